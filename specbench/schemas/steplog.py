"""The step log's rows as typed records (docs/steplog.md, docs/records.md; the files' ``SCHEMA`` below),
one per line format: a value of the wrong type or out of range rejects the row with the reason (the
engine's processes wrote it, and a killed server can leave a torn last line)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .record import Record, RowError, key

SCHEMA = "specbench.steplog/1"
HIST_LEN = 17  # hist index 0..16: tokens a request committed in the step (accepted guesses plus one)
#: the runner's marks, ms from the step's start (the gpu row's ``t_<point>``)
TIME_POINTS = ("fwd", "fwd_end", "lg0", "lg1", "samp", "d0", "d1", "exec_end", "end")
MAX_MS = 3.6e6  # an hour: a mark later than that within one step is not a time
WALL_LOW, WALL_HIGH = 1e9, 1e10  # Unix time: 2001 to 2286

#: what an ``events`` row can say happened (docs/steplog.md); one-time kinds are warm-up left undone, steady ones
#: belong to the steady state, ``recorder_flush`` is the recorder's own write (so it can be ruled in or out)
ONE_TIME_KINDS = ("compile", "graph_capture", "triton_compile", "triton_autotune", "alloc_growth")
STEADY_KINDS = ("gc", "preemption")
EVENT_KINDS = (*ONE_TIME_KINDS, *STEADY_KINDS, "recorder_flush")

__all__ = ["EVENT_KINDS", "HIST_LEN", "MAX_MS", "ONE_TIME_KINDS", "SCHEMA", "STEADY_KINDS", "TIME_POINTS", "EventRow",
           "GpuRow", "RowError", "SchedRow", "StepHeader", "TokenRow"]


def _ms(doc: str) -> Any:
    return key(doc, low=0.0, high=MAX_MS)


@dataclass
class SchedRow(Record):
    """One engine step as the scheduler saw it (``sched-<pid>.jsonl``)."""

    FILE: ClassVar[str] = "step log sched-<pid>.jsonl line"

    step: int = key("the engine step, from 1 per process", required=True, low=1)
    wall: float = key("Unix time the step ended", required=True, low=WALL_LOW, high=WALL_HIGH)
    num_reqs: int = key("requests scheduled in the step", required=True, low=0)
    num_tokens: int = key("tokens scheduled (prefill, decode and guesses to verify)", required=True, low=0)
    decode_reqs: int = key("requests decoding (not prefilling)", required=True, low=0)
    spec_tokens: int = key("guessed tokens sent to the target to verify", required=True, low=0)
    prefill_tokens: int = key("prompt tokens prefilled", required=True, low=0)
    ctx_tokens: int = key("context tokens over the scheduled requests", required=True, low=0)
    hist: tuple[int, ...] = key("requests per tokens committed: hist[j] requests committed j tokens (0..16)",
                                required=True, low=0, length=HIST_LEN)
    running: int | None = key("requests running after the step", low=0)
    waiting: int | None = key("requests waiting after the step", low=0)
    kv_usage: float | None = key("KV-cache share in use", low=0.0, high=1.0)
    drafts: int | None = key("drafts verified in the step (the step's SpecDecodingStats)", low=0)
    draft_tokens: int | None = key("guessed tokens verified", low=0)
    accepted: int | None = key("guessed tokens accepted (≤ draft_tokens)", low=0)
    accepted_per_pos: tuple[int, ...] = key("accepted guesses per draft position", factory=tuple, low=0, max_len=64)
    graph_mode: str | None = key("the CUDA graph mode the step ran in", max_len=40)
    padded_tokens: int | None = key("tokens after padding to the captured graph size", low=0)
    unpadded_tokens: int | None = key("tokens before padding", low=0)
    skipped_reqs: tuple[str, ...] = key("requests scheduled in the step whose output vLLM did not count (finished or "
                                        "aborted while it ran); absent: none", factory=tuple, max_len=64)

    def problem(self) -> str | None:
        if self.accepted is not None and self.draft_tokens is not None and self.accepted > self.draft_tokens:
            return f"accepted {self.accepted} > draft_tokens {self.draft_tokens}"
        return None

    @property
    def committed(self) -> int:
        """Tokens the step committed over its requests: Σ j·hist[j]."""
        return sum(j * n for j, n in enumerate(self.hist))

    @property
    def hist_accepted(self) -> int:
        """Accepted guesses by the histogram: Σ (j − 1)·hist[j] over j ≥ 1."""
        return sum((j - 1) * n for j, n in enumerate(self.hist) if j >= 1)


@dataclass
class GpuRow(Record):
    """One step's runner times (``gpu-<pid>.jsonl``, the ``timing`` level): ms from the step's start."""

    FILE: ClassVar[str] = "step log gpu-<pid>.jsonl line"

    step: int = key("the engine step it timed", required=True, low=1)
    wall: float = key("Unix time the step ended", required=True, low=WALL_LOW, high=WALL_HIGH)
    t_fwd: float | None = _ms("the target's forward began")
    t_fwd_end: float | None = _ms("the target's forward ended")
    t_lg0: float | None = _ms("the LM head began")
    t_lg1: float | None = _ms("the LM head ended")
    t_samp: float | None = _ms("sampling and verification ended")
    t_d0: float | None = _ms("the drafter's propose began")
    t_d1: float | None = _ms("the drafter's propose ended")
    t_exec_end: float | None = _ms("execute_model returned")
    t_end: float | None = _ms("the step's output was ready")
    since_prev_ms: float | None = _ms("ms since the previous step ended: the host gap")


@dataclass
class StepHeader(Record):
    """``header-<pid>.json``: which hooks one process installed, and why any is missing."""

    FILE: ClassVar[str] = "step log header-<pid>.json"

    schema: str = key(f"the log's format: {SCHEMA!r}", required=True)
    pid: int = key("the engine process", required=True, low=0)
    level: str = key("off, steps, timing or tokens", default="off", max_len=100)
    vllm_version: str | None = key("the engine's vLLM version", max_len=100)
    runner: str | None = key("the model runner hooked: v1 or v2", max_len=100)
    clock: str | None = key("what timed the runner: CUDA events or perf_counter", max_len=100)
    hooks: dict[str, str] = key("hook name → installed, or why not", factory=dict)
    notes: list[str] = key("what the hooks said while installing", factory=list)

    def problem(self) -> str | None:
        return None if self.schema == SCHEMA else f"schema: expected {SCHEMA!r}, got {self.schema[:40]!r}"

    @classmethod
    def of_file(cls, obj: Any) -> StepHeader:
        """The header as a process wrote it; a hook's long state or note is cut, never a reason to lose the log."""
        header = cls.from_line(obj)
        header.hooks = {k[:100]: v[:300] for k, v in header.hooks.items()}
        header.notes = [n[:300] for n in header.notes]
        return header


def _prob(doc: str, high: float = 1.0) -> Any:
    return key(doc, low=0.0, high=high)


@dataclass(kw_only=True)
class TokenRow(Record):
    """One guess the target verified (``tokens-<pid>.jsonl``, the ``tokens`` level): accuracy runs only."""

    FILE: ClassVar[str] = "step log tokens-<pid>.jsonl line"

    step: int = key("the engine step", required=True, low=1)
    wall: float = key("Unix time the step ended", required=True, low=WALL_LOW, high=WALL_HIGH)
    req_id: str | None = key("the engine's request id", max_len=300)
    batch: int = key("the request's place in the step's batch, from 1", required=True, low=1)
    draft_pos: int = key("the guess's position in its draft, from 1", required=True, low=1)
    ctx: int | None = key("the request's context length at the step", low=0)
    out_pos: int | None = key("the guess's position in the output", low=0)
    token: int = key("the guessed token", required=True, low=0)
    target_top: int = key("the target's own top token there", required=True, low=0)
    accepted: bool = key("kept by the rejection sampler", required=True)
    t_prob: float | None = _prob("the target's probability of the guess")
    t_entropy: float | None = _prob("the target's entropy there (nats)", 50.0)
    t_margin: float | None = _prob("the target's top-1 minus top-2 probability")
    d_prob: float | None = _prob("the drafter's probability of the guess")
    d_entropy: float | None = _prob("the drafter's entropy there (nats)", 50.0)
    d_margin: float | None = _prob("the drafter's top-1 minus top-2 probability")


@dataclass(kw_only=True)
class EventRow(Record):
    """Something that can make a step slow, as an engine process saw it happen (``events-<pid>.jsonl``, the
    ``steps`` level and above): a garbage collection, a compile, a graph capture, a Triton compile or autotune,
    the allocator growing, a preemption, or the recorder's own flush."""

    FILE: ClassVar[str] = "step log events-<pid>.jsonl line"

    kind: str = key(f"what happened: one of {', '.join(EVENT_KINDS)}", required=True, max_len=40)
    wall: float = key("Unix time it began", required=True, low=WALL_LOW, high=WALL_HIGH)
    ms: float = key("how long it took (0: an instant, e.g. a preemption)", required=True, low=0.0, high=MAX_MS)
    step: int | None = key("the step the process had in flight (null: between steps, or a process without steps)",
                           low=1)
    detail: str | None = key("what exactly: the collection's generation, the kernel, the shape, the bytes", max_len=300)

    def problem(self) -> str | None:
        return None if self.kind in EVENT_KINDS else f"kind: {self.kind[:40]!r} is not one of {', '.join(EVENT_KINDS)}"

    @property
    def one_time(self) -> bool:
        """Warm-up left undone (a compile, a capture, an autotune, the allocator's first growth)."""
        return self.kind in ONE_TIME_KINDS
