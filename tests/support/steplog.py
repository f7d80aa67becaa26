"""Hand-written step-log files in docs/steplog.md's format (``specbench.steplog/1``), for the readers'
and the measures' tests, and for the fake engine (``tests/support/fake_engine.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

SCHEMA = "specbench.steplog/1"
HIST_LEN = 17
WALL0 = 1_760_000_000.0


def hist_of(committed: list[int]) -> list[int]:
    """The 17-count histogram of the tokens each request committed this step."""
    hist = [0] * HIST_LEN
    for n in committed:
        hist[min(n, HIST_LEN - 1)] += 1
    return hist


def sched_row(step: int, wall: float, committed: list[int], k: int | None = None, **over) -> dict:
    """A scheduler row: one request per entry of ``committed`` (tokens it committed), with the spec stats
    vLLM would add for it (k guesses each, ``n − 1`` accepted)."""
    spec = k is not None
    row = {"step": step, "wall": wall, "num_reqs": len(committed), "num_tokens": len(committed) * (1 + (k or 0)),
           "decode_reqs": len(committed), "spec_tokens": len(committed) * (k or 0), "prefill_tokens": 0,
           "ctx_tokens": 100 * len(committed), "running": len(committed), "waiting": 0, "kv_usage": 0.01,
           "hist": hist_of(committed),
           "drafts": len(committed) if spec else 0, "draft_tokens": len(committed) * (k or 0),
           "accepted": sum(n - 1 for n in committed) if spec else 0, "accepted_per_pos": []}
    row.update(over)
    return row


def token_row(step: int, wall: float, req_id: str, pos: int, out_pos: int, token: int, accepted: bool, **over) -> dict:
    """A token-log row: one guess the target verified (the ``tokens`` level)."""
    row = {"step": step, "wall": wall, "req_id": req_id, "batch": 2, "draft_pos": pos, "ctx": 10 + out_pos,
           "out_pos": out_pos, "token": token, "target_top": token if accepted else token + 1, "accepted": accepted,
           "t_prob": 0.9 if accepted else 0.1, "t_entropy": 0.3, "t_margin": 0.5, "d_prob": None, "d_entropy": None,
           "d_margin": None}
    return {**row, **over}


def step_guesses(step: int, wall: float, req_id: str, k: int, accepted: int) -> list[dict]:
    """The token rows of one request's draft of ``k`` guesses in ``step``, the first ``accepted`` of them kept."""
    return [token_row(step, wall, req_id, p, 10 * step + p, 100 + p, p <= accepted) for p in range(1, k + 1)]


def gpu_row(step: int, wall: float, since_prev_ms: float | None, *, fwd: tuple[float, float] = (0.1, 4.0),
            lm_head: tuple[float, float] = (4.0, 4.5), samp: float = 4.5, draft: tuple[float, float] | None = (5.0, 7.0),
            end: float = 7.5) -> dict:
    return {"step": step, "wall": wall, "t_fwd": fwd[0], "t_fwd_end": fwd[1], "t_lg0": lm_head[0], "t_lg1": lm_head[1],
            "t_samp": samp, "t_d0": draft[0] if draft else None, "t_d1": draft[1] if draft else None,
            "t_exec_end": end - 0.5, "t_end": end, "since_prev_ms": since_prev_ms}


def header(level: str = "timing", pid: int = 1, runner: str | None = "v1") -> dict:
    return {"schema": SCHEMA, "pid": pid, "level": level, "vllm_version": "0.26.0", "runner": runner,
            "clock": "cuda_event", "hooks": {"scheduler.schedule": "installed"}, "notes": [], "written_at": WALL0}


def write_launch(folder: Path, sched: list[dict], gpu: list[dict] | None = None, *, pid: int = 1,
                 extra_lines: dict[str, list[str]] | None = None) -> Path:
    """A launch folder: a header per process, ``sched-<pid>.jsonl`` and (timing) ``gpu-<pid+1>.jsonl``,
    and any raw ``extra_lines`` appended to a kind's file (bad rows for the readers' tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"header-{pid}.json").write_text(json.dumps(header(pid=pid)))
    files = {"sched": [json.dumps(r) for r in sched]}
    if gpu is not None:
        (folder / f"header-{pid + 1}.json").write_text(json.dumps(header(pid=pid + 1)))
        files["gpu"] = [json.dumps(r) for r in gpu]
    for kind, lines in (extra_lines or {}).items():
        files.setdefault(kind, []).extend(lines)
    for kind, lines in files.items():
        with (folder / f"{kind}-{pid if kind == 'sched' else pid + 1}.jsonl").open("a") as f:
            f.writelines(line if line.endswith("\n") or line.startswith("#torn") else line + "\n" for line in lines)
    return folder


class StepWriter:
    """What the fake engine writes when ``SPECBENCH_STEPLOG_DIR`` is set: one sched row (and at ``timing``
    one gpu row) per decode chunk it streams, its accepted tokens the ones its /metrics counters add."""

    def __init__(self, folder: str, level: str) -> None:
        self.folder, self.level, self.step, self.prev_wall = Path(folder), level, 0, None
        self.folder.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        (self.folder / f"header-{pid}.json").write_text(json.dumps({**header(level, pid), "clock": "perf_counter"}))
        self.sched = (self.folder / f"sched-{pid}.jsonl").open("a", buffering=1)
        self.events = (self.folder / f"events-{pid}.jsonl").open("a", buffering=1)
        self.gpu = (self.folder / f"gpu-{pid}.jsonl").open("a", buffering=1) if level == "timing" else None

    def write(self, wall: float, committed: int, k: int | None) -> None:
        self.step += 1
        self.sched.write(json.dumps(sched_row(self.step, wall, [committed], k)) + "\n")
        if self.gpu is not None:
            since = None if self.prev_wall is None else (wall - self.prev_wall) * 1000.0
            self.gpu.write(json.dumps(gpu_row(self.step, wall, since, draft=(5.0, 7.0) if k else None)) + "\n")
        self.prev_wall = wall

    def event(self, kind: str, wall: float, ms: float, detail: str | None = None) -> None:
        """One ``events`` row, tagged with the step last written."""
        self.events.write(json.dumps({"kind": kind, "wall": wall, "ms": ms, "step": self.step or None, "detail": detail}) + "\n")
