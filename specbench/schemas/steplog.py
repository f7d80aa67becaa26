"""The step log's rows as typed records (docs/steplog.md; the files' ``SCHEMA`` below), one per line format,
each with a strict reader: a value of the wrong type or out of range rejects the row with the reason
(the engine's processes wrote it, and a killed server can leave a torn last line)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..util.numbers import is_number

SCHEMA = "specbench.steplog/1"
HIST_LEN = 17  # hist index 0..16: tokens a request committed in the step (accepted guesses plus one)
#: the runner's marks, ms from the step's start (the gpu row's ``t_<point>``)
TIME_POINTS = ("fwd", "fwd_end", "lg0", "lg1", "samp", "d0", "d1", "exec_end", "end")
MAX_MS = 3.6e6  # an hour: a mark later than that within one step is not a time


class RowError(ValueError):
    """Why one line of a step-log file cannot be used (one short reason, the key named)."""


def _int(obj: dict[str, Any], key: str, *, low: int = 0, null: bool = False) -> int | None:
    value = obj.get(key)
    if type(value) is int and value >= low:  # the common case first: a run reads 10⁵ rows and more
        return value
    if value is None and null:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise RowError(f"{key}: expected an integer ≥ {low}, got {str(value)[:40]}")
    return value


def _float(obj: dict[str, Any], key: str, *, low: float = 0.0, high: float = MAX_MS, null: bool = True) -> float | None:
    value = obj.get(key)
    if type(value) is float and low <= value <= high:  # NaN fails the comparison, ±inf the range
        return value
    if value is None and null:
        return None
    if not is_number(value) or not low <= value <= high:
        raise RowError(f"{key}: expected a number in [{low:g}, {high:g}], got {str(value)[:40]}")
    return float(value)


def _wall(obj: dict[str, Any]) -> float:
    wall = _float(obj, "wall", low=1e9, high=1e10, null=False)  # Unix time: 2001 to 2286
    assert wall is not None
    return wall


def _ints(obj: dict[str, Any], key: str, length: int | None = None) -> tuple[int, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or (length is not None and len(value) != length) or len(value) > 64 or any(
            not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in value):
        raise RowError(f"{key}: expected a list of {length or 'at most 64'} integers ≥ 0")
    return tuple(value)


@dataclass(frozen=True)
class SchedRow:
    """One engine step as the scheduler saw it (``sched-<pid>.jsonl``)."""

    step: int
    wall: float
    num_reqs: int
    num_tokens: int
    decode_reqs: int
    spec_tokens: int
    prefill_tokens: int
    ctx_tokens: int
    hist: tuple[int, ...]
    running: int | None = None
    waiting: int | None = None
    kv_usage: float | None = None
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted: int | None = None
    accepted_per_pos: tuple[int, ...] = ()
    graph_mode: str | None = None
    padded_tokens: int | None = None
    unpadded_tokens: int | None = None

    @classmethod
    def read(cls, obj: Any) -> SchedRow:
        if not isinstance(obj, dict):
            raise RowError(f"expected a JSON object, got {type(obj).__name__}")
        mode = obj.get("graph_mode")
        if mode is not None and (not isinstance(mode, str) or len(mode) > 40):
            raise RowError("graph_mode: expected a short string or null")
        accepted, draft_tokens = _int(obj, "accepted", null=True), _int(obj, "draft_tokens", null=True)
        if accepted is not None and draft_tokens is not None and accepted > draft_tokens:
            raise RowError(f"accepted {accepted} > draft_tokens {draft_tokens}")
        per_pos = obj.get("accepted_per_pos")
        return cls(
            step=_int(obj, "step", low=1) or 0, wall=_wall(obj),
            **{k: _int(obj, k) or 0 for k in ("num_reqs", "num_tokens", "decode_reqs", "spec_tokens",
                                                "prefill_tokens", "ctx_tokens")},
            hist=_ints(obj, "hist", HIST_LEN),
            running=_int(obj, "running", null=True), waiting=_int(obj, "waiting", null=True),
            kv_usage=_float(obj, "kv_usage", high=1.0),
            drafts=_int(obj, "drafts", null=True), draft_tokens=draft_tokens, accepted=accepted,
            accepted_per_pos=() if per_pos in (None, []) else _ints(obj, "accepted_per_pos"),
            graph_mode=mode, padded_tokens=_int(obj, "padded_tokens", null=True),
            unpadded_tokens=_int(obj, "unpadded_tokens", null=True))

    @property
    def committed(self) -> int:
        """Tokens the step committed over its requests: Σ j·hist[j]."""
        return sum(j * n for j, n in enumerate(self.hist))

    @property
    def hist_accepted(self) -> int:
        """Accepted guesses by the histogram: Σ (j − 1)·hist[j] over j ≥ 1."""
        return sum((j - 1) * n for j, n in enumerate(self.hist) if j >= 1)


@dataclass(frozen=True)
class GpuRow:
    """One step's runner times (``gpu-<pid>.jsonl``, the ``timing`` level): ms from the step's start."""

    step: int
    wall: float
    t_fwd: float | None = None
    t_fwd_end: float | None = None
    t_lg0: float | None = None
    t_lg1: float | None = None
    t_samp: float | None = None
    t_d0: float | None = None
    t_d1: float | None = None
    t_exec_end: float | None = None
    t_end: float | None = None
    since_prev_ms: float | None = None

    @classmethod
    def read(cls, obj: Any) -> GpuRow:
        if not isinstance(obj, dict):
            raise RowError(f"expected a JSON object, got {type(obj).__name__}")
        times = {f"t_{p}": _float(obj, f"t_{p}") for p in TIME_POINTS}
        return cls(step=_int(obj, "step", low=1) or 0, wall=_wall(obj), **times,
                   since_prev_ms=_float(obj, "since_prev_ms"))


@dataclass(frozen=True)
class StepHeader:
    """``header-<pid>.json``: which hooks one process installed, and why any is missing."""

    pid: int
    level: str
    vllm_version: str | None
    runner: str | None
    clock: str | None
    hooks: dict[str, str]
    notes: tuple[str, ...] = ()

    @classmethod
    def read(cls, obj: Any) -> StepHeader:
        if not isinstance(obj, dict):
            raise RowError(f"expected a JSON object, got {type(obj).__name__}")
        if obj.get("schema") != SCHEMA:
            raise RowError(f"schema: expected {SCHEMA!r}, got {str(obj.get('schema'))[:40]!r}")
        strings = {}
        for key in ("level", "vllm_version", "runner", "clock"):
            value = obj.get(key)
            if value is not None and (not isinstance(value, str) or len(value) > 100):
                raise RowError(f"{key}: expected a short string or null")
            strings[key] = value
        hooks, notes = obj.get("hooks") or {}, obj.get("notes") or []
        if not isinstance(hooks, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in hooks.items()):
            raise RowError("hooks: expected a mapping of hook name to state")
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise RowError("notes: expected a list of strings")
        return cls(pid=_int(obj, "pid") or 0, level=strings["level"] or "off", vllm_version=strings["vllm_version"],
                   runner=strings["runner"], clock=strings["clock"],
                   hooks={k[:100]: v[:300] for k, v in hooks.items()}, notes=tuple(n[:300] for n in notes))


def _prob(obj: dict[str, Any], key: str, high: float = 1.0) -> float | None:
    return _float(obj, key, low=0.0, high=high)


@dataclass(frozen=True)
class TokenRow:
    """One guess the target verified (``tokens-<pid>.jsonl``, the ``tokens`` level): accuracy runs only."""

    step: int
    wall: float
    req_id: str | None
    batch: int
    draft_pos: int
    ctx: int | None
    out_pos: int | None
    token: int
    target_top: int
    accepted: bool
    t_prob: float | None
    t_entropy: float | None
    t_margin: float | None
    d_prob: float | None = None
    d_entropy: float | None = None
    d_margin: float | None = None

    @classmethod
    def read(cls, obj: Any) -> TokenRow:
        if not isinstance(obj, dict):
            raise RowError(f"expected a JSON object, got {type(obj).__name__}")
        req_id, accepted = obj.get("req_id"), obj.get("accepted")
        if req_id is not None and (not isinstance(req_id, str) or len(req_id) > 300):
            raise RowError("req_id: expected a short string or null")
        if not isinstance(accepted, bool):
            raise RowError("accepted: expected true or false")
        return cls(step=_int(obj, "step", low=1) or 0, wall=_wall(obj), req_id=req_id,
                   batch=_int(obj, "batch", low=1) or 0, draft_pos=_int(obj, "draft_pos", low=1) or 0,
                   ctx=_int(obj, "ctx", null=True), out_pos=_int(obj, "out_pos", null=True),
                   token=_int(obj, "token") or 0, target_top=_int(obj, "target_top") or 0, accepted=accepted,
                   t_prob=_prob(obj, "t_prob"), t_entropy=_prob(obj, "t_entropy", 50.0), t_margin=_prob(obj, "t_margin"),
                   d_prob=_prob(obj, "d_prob"), d_entropy=_prob(obj, "d_entropy", 50.0), d_margin=_prob(obj, "d_margin"))
