"""The engine's own step timeline, measured (docs/steplog.md): a launch's rows joined on ``step``, a timed
pass cut by its counter window, and per cell the step time, where it goes, and whether the step log's
accepted tokens equal the ``/metrics`` counters exactly.

Pure functions over typed rows; reading the files is ``run.steplog``'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..schemas.row import ResultRow
from ..schemas.row_steplog import StepDecomposition, StepStats, TokenLogStats
from ..schemas.steplog import HIST_LEN, GpuRow, SchedRow, StepHeader, TokenRow

#: ``num_reqs`` buckets of the step time by batch size
BATCH_BUCKETS = ((1, 1), (2, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 10**9))


@dataclass(frozen=True)
class Step:
    """One engine step: the scheduler's row, and the runner's where the ``timing`` level recorded it."""

    sched: SchedRow
    gpu: GpuRow | None = None


@dataclass(frozen=True)
class StepLog:
    """One server launch's step log: its steps in step order, its processes' headers, and the lines skipped
    (reason → count; a bad line never fails the run)."""

    steps: tuple[Step, ...] = ()
    headers: tuple[StepHeader, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)


def join(sched: Sequence[SchedRow], gpu: Sequence[GpuRow], skipped: Counter[str]) -> tuple[Step, ...]:
    """Rows joined on ``step``; a second row of the same step (another engine core or worker) is skipped."""
    by_step: dict[int, GpuRow] = {}
    for g in gpu:
        if g.step in by_step:
            skipped["gpu: duplicate step"] += 1
        else:
            by_step[g.step] = g
    seen: set[int] = set()
    steps = []
    for s in sorted(sched, key=lambda r: r.step):
        if s.step in seen:
            skipped["sched: duplicate step"] += 1
            continue
        seen.add(s.step)
        steps.append(Step(s, by_step.get(s.step)))
    return tuple(steps)


def cut(log: StepLog, start: float, end: float) -> tuple[Step, ...]:
    """The steps whose scheduler wall time lies in [start, end]: a timed pass's, when the window is its two
    /metrics scrapes (the server is idle at both)."""
    return tuple(s for s in log.steps if start <= s.sched.wall <= end)


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _mean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return float(np.mean(xs)) if xs else None


def step_times(steps: Sequence[Step]) -> tuple[list[float | None], str]:
    """Each step's time from the previous step's start (its first: None, it spans the idle time before the
    pass): the runner's ``since_prev_ms`` where recorded, else the scheduler's wall-time differences."""
    if steps and all(s.gpu is not None for s in steps):
        times = [None if i == 0 or s.gpu is None else s.gpu.since_prev_ms for i, s in enumerate(steps)]
        return times, "runner (since_prev_ms)"
    walls = [s.sched.wall for s in steps]
    return [None] + [(b - a) * 1000.0 for a, b in zip(walls, walls[1:])], "scheduler wall"


def split(steps: Sequence[Step]) -> dict[str, float | None]:
    """Mean ms per step of the target forward, its LM head, sampling/verification, the drafter, and the gap
    between steps (since_prev_ms − the previous step's t_end; consecutive steps only)."""
    parts: dict[str, list[float | None]] = {k: [] for k in ("fwd", "lm_head", "verify", "drafter", "gap")}
    prev: Step | None = None
    for s in steps:
        g = s.gpu
        if g is not None:
            parts["fwd"].append(_diff(g.t_fwd, g.t_fwd_end))
            parts["lm_head"].append(_diff(g.t_lg0, g.t_lg1))
            parts["verify"].append(_diff(g.t_samp, g.t_d0 if g.t_d0 is not None else g.t_end))
            parts["drafter"].append(_diff(g.t_d0, g.t_d1))
            if prev is not None and prev.gpu is not None and prev.sched.step + 1 == s.sched.step:
                parts["gap"].append(_diff(prev.gpu.t_end, g.since_prev_ms))
        prev = s
    return {k: _mean(v) for k, v in parts.items()}


def _bucket(n: int) -> str:
    lo, hi = next(b for b in BATCH_BUCKETS if b[0] <= n <= b[1])
    return str(lo) if lo == hi else f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"


def by_batch(steps: Sequence[Step], times: Sequence[float | None]) -> dict[str, dict[str, int | float]]:
    groups: dict[str, list[float]] = {}
    for s, t in zip(steps, times):
        if t is not None and s.sched.num_reqs > 0:
            groups.setdefault(_bucket(s.sched.num_reqs), []).append(t)
    order = [_bucket(lo) for lo, _ in BATCH_BUCKETS]
    return {b: {"steps": len(groups[b]), "mean_ms": float(np.mean(groups[b]))} for b in order if b in groups}


@dataclass(frozen=True)
class PassSteps:
    """One timed pass's steps, and the ``/metrics`` accepted-token delta of the same pass (None: unknown)."""

    steps: tuple[Step, ...]
    counter_accepted: int | None


def _agree(a: int | None, b: int | None) -> bool | None:
    return None if a is None or b is None else a == b


def cell_stats(passes: Sequence[PassSteps]) -> StepStats:
    """The results keys of one cell's step log over its timed passes (``steplog_*``; docs/metrics.md)."""
    steps = [s for p in passes for s in p.steps]
    times: list[float | None] = []
    clock = "runner (since_prev_ms)"
    for p in passes:  # per pass: a pass's first step spans the idle time before it
        t, c = step_times(p.steps)
        times += t
        clock = c if c != "runner (since_prev_ms)" else clock
    measured = [t for t in times if t is not None]
    hist = [sum(s.sched.hist[j] for s in steps) for j in range(HIST_LEN)]
    accepted_known = all(s.sched.accepted is not None for s in steps)
    accepted = sum(s.sched.accepted or 0 for s in steps) if accepted_known else None
    counters = [p.counter_accepted for p in passes]
    counter = None if any(c is None for c in counters) else sum(c or 0 for c in counters)
    if counter is None and accepted == 0:
        counter = 0  # a server that does not speculate: no counter, no accepted token
    hist_accepted = sum((j - 1) * n for j, n in enumerate(hist) if j >= 1)
    committing = sum(hist[1:])
    modes = Counter(s.sched.graph_mode for s in steps if s.sched.graph_mode is not None)
    padded = [s.sched for s in steps if s.sched.padded_tokens is not None and s.sched.unpadded_tokens is not None]
    unpadded = sum(r.unpadded_tokens or 0 for r in padded)
    parts = split(steps)
    return StepStats(
        steplog_steps=len(steps),
        steplog_step_mean_ms=float(np.mean(measured)) if measured else None,
        steplog_step_p50_ms=float(np.percentile(measured, 50)) if measured else None,
        steplog_step_p95_ms=float(np.percentile(measured, 95)) if measured else None,
        steplog_step_clock=clock if measured else None,
        steplog_step_by_batch=by_batch(steps, times) or None,
        steplog_fwd_ms=parts["fwd"], steplog_lm_head_ms=parts["lm_head"], steplog_verify_ms=parts["verify"],
        steplog_drafter_ms=parts["drafter"], steplog_gap_ms=parts["gap"],
        steplog_tokens_per_step=sum(j * n for j, n in enumerate(hist)) / committing if committing else None,
        steplog_hist=hist,
        steplog_accepted=accepted,
        steplog_counter_accepted=counter,
        steplog_accepted_agree=_agree(accepted, counter),
        steplog_hist_accepted=hist_accepted,
        steplog_hist_agree=_agree(hist_accepted, accepted),
        steplog_graph_modes={m: n / len(steps) for m, n in sorted(modes.items())} or None,
        steplog_padding_share=(sum(r.padded_tokens or 0 for r in padded) - unpadded) / unpadded if unpadded else None,
    )


def pass_tokens(tokens: Sequence[TokenRow], steps: Sequence[Step]) -> list[TokenRow]:
    """The token log's rows of one timed pass: those of its steps, by step number — the one cut its steps got.
    A token row's own wall time is the sampler's, taken in another process, and may fall on the other side of
    a scrape than its step's."""
    numbers = {s.sched.step for s in steps}
    return [r for r in tokens if r.step in numbers]


@dataclass(frozen=True)
class PassTokens:
    """One timed pass's steps and the token rows of those steps (``pass_tokens``)."""

    steps: tuple[Step, ...]
    tokens: tuple[TokenRow, ...]


def token_stats(passes: Sequence[PassTokens], orphans: int = 0) -> TokenLogStats:
    """Σ accepted of the token rows against Σ accepted of the same steps' scheduler rows; a step that accepted
    guesses but has no token row (a row lost before it reached disk) is counted, and so are ``orphans``, the
    launch's token rows whose step no scheduler row has (they cannot be placed in any pass), and the guesses the
    runner verified for a request the scheduler had finished (async scheduling: left out of both sides)."""
    steps = [s for p in passes for s in p.steps]
    uncounted = {(s.sched.step, r) for s in steps for r in s.sched.skipped_reqs}
    tokens = [t for p in passes for t in p.tokens if (t.step, t.req_id) not in uncounted]
    late = sum(len(p.tokens) for p in passes) - len(tokens)
    with_rows = {t.step for t in tokens}
    missing = sum(1 for s in steps if (s.sched.accepted or 0) > 0 and s.sched.step not in with_rows)
    known = all(s.sched.accepted is not None for s in steps)
    accepted = sum(1 for t in tokens if t.accepted)
    unplaced = {k: v for k, v in (("pass steps that accepted guesses but have no token row", missing),
                                  ("token rows of a step the scheduler log lacks", orphans),
                                  ("guesses of a request vLLM had finished (verified, not counted by it)", late)) if v}
    return TokenLogStats(steplog_token_guesses=len(tokens), steplog_token_accepted=accepted,
                         steplog_token_agree=accepted == sum(s.sched.accepted or 0 for s in steps) if known else None,
                         steplog_token_unplaced=unplaced or None)


def steplog_decomposition(row: ResultRow, base: ResultRow | None) -> StepDecomposition | None:
    """The Why table's Step cost and Tok/step from the step log where both the row and its baseline have
    a measured step time: step cost = the row's mean step ÷ the baseline's (one token per request a
    step), tokens per step = Σ j·hist[j] ÷ Σ hist[j≥1]; merged chunks no longer enter. The decomposed
    speedup's CI keeps the paired bootstrap's relative width, moved onto the new point value.
    ``step_source`` says which source the row's decomposition used; None: the row has no decomposition."""
    if base is None or row.run == base.run or row.step_cost_ratio is None and row.speedup_decomposed is None:
        return None
    kept = StepDecomposition(step_source="chunk gaps", step_cost_ratio=row.step_cost_ratio,
                             speedup_decomposed=row.speedup_decomposed, speedup_residual=row.speedup_residual,
                             speedup_decomposed_ci_low=row.speedup_decomposed_ci_low,
                             speedup_decomposed_ci_high=row.speedup_decomposed_ci_high)
    step, base_step = row.steplog_step_mean_ms, base.steplog_step_mean_ms
    tokens = row.steplog_tokens_per_step
    if step is None or base_step is None or not base_step > 0 or tokens is None:
        return kept
    cost = step / base_step
    if not cost > 0:
        return replace(kept, step_source="step log", step_cost_ratio=cost)
    old, new = row.speedup_decomposed, tokens / cost
    lo, hi = row.speedup_decomposed_ci_low, row.speedup_decomposed_ci_high
    if old and lo is not None and hi is not None:
        lo, hi = lo * new / old, hi * new / old
    return StepDecomposition(step_source="step log", step_cost_ratio=cost, speedup_decomposed=new,
                             speedup_residual=row.speedup_vs_baseline / new if row.speedup_vs_baseline is not None else None,
                             speedup_decomposed_ci_low=lo, speedup_decomposed_ci_high=hi)
