"""The engine's own step timeline, measured (docs/steplog.md): a timed pass's steps (``step_columns``: a launch's
rows joined on ``step``, cut by the pass's counter window) and per cell the step time, where it goes, and whether
the step log's accepted tokens equal the ``/metrics`` counters exactly.

Pure functions over the steps' columns; reading the files is ``run.steplog``'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..schemas.row import ResultRow
from ..schemas.row_steplog import StepDecomposition, StepStats, TokenLogStats
from ..schemas.steplog import HIST_LEN, StepHeader, TokenRow
from .step_columns import NONE, Array, RowColumns, Step, StepColumns

__all__ = ["PassSteps", "PassTokens", "Step", "StepColumns", "StepLog",
           "by_batch", "cell_stats", "cut", "pass_tokens", "split", "step_times", "steplog_decomposition", "token_stats"]

#: ``num_reqs`` buckets of the step time by batch size
BATCH_BUCKETS = ((1, 1), (2, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 10**9))
RUNNER, SCHEDULER = "runner (since_prev_ms)", "scheduler wall"


@dataclass(frozen=True)
class StepLog:
    """One server launch's step log: its steps in step order, its processes' headers, and the lines skipped
    (reason → count; a bad line never fails the run)."""

    steps: StepColumns
    headers: tuple[StepHeader, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)


def cut(log: StepLog, start: float, end: float) -> StepColumns:
    """The steps whose scheduler wall time lies in [start, end]: a timed pass's, when the window is its two
    /metrics scrapes (the server is idle at both)."""
    return log.steps.window(start, end)


def step_times(steps: Sequence[Step]) -> tuple[list[float | None], str]:
    """Each step's time from the previous step's start (its first: None, it spans the idle time before the
    pass): the runner's ``since_prev_ms`` where recorded, else the scheduler's wall-time differences. On records
    (``stalls``); ``column_times`` is the same on columns."""
    if steps and all(s.gpu is not None for s in steps):
        times = [None if i == 0 or s.gpu is None else s.gpu.since_prev_ms for i, s in enumerate(steps)]
        return times, RUNNER
    walls = [s.sched.wall for s in steps]
    return [None] + [(b - a) * 1000.0 for a, b in zip(walls, walls[1:])], SCHEDULER


def column_times(steps: StepColumns) -> tuple[Array, str]:
    """``step_times`` of a pass's steps, NaN for None (a pass without steps has none)."""
    if len(steps) and steps.has_gpu.all():
        times = steps.gpu["since_prev_ms"].copy()
        times[0] = np.nan
        return times, RUNNER
    return np.concatenate(([np.nan], np.diff(steps.wall) * 1000.0))[:len(steps)], SCHEDULER


def _mean(values: Array) -> float | None:
    xs = values[~np.isnan(values)]
    return float(np.mean(xs)) if len(xs) else None


def split(steps: Sequence[StepColumns]) -> dict[str, float | None]:
    """Mean ms per step, over the passes' steps in turn, of the target forward, its LM head,
    sampling/verification, the drafter, and the gap between steps (since_prev_ms − the previous step's t_end;
    consecutive steps only)."""
    def cat(name: str) -> Array:
        return np.concatenate([s.gpu[name] for s in steps]) if steps else np.zeros(0)

    has = np.concatenate([s.has_gpu for s in steps]) if steps else np.zeros(0, dtype=bool)
    number = np.concatenate([s.step for s in steps]) if steps else np.zeros(0, dtype=np.int64)
    d0, end = cat("t_d0"), cat("t_end")
    parts = {"fwd": cat("t_fwd_end") - cat("t_fwd"), "lm_head": cat("t_lg1") - cat("t_lg0"),
             "verify": np.where(np.isnan(d0), end, d0) - cat("t_samp"), "drafter": cat("t_d1") - d0}
    out = {k: _mean(v[has]) for k, v in parts.items()}
    after = has[1:] & has[:-1] & (number[:-1] + 1 == number[1:])
    out["gap"] = _mean((cat("since_prev_ms")[1:] - end[:-1])[after])
    return out


def _bucket(n: int) -> str:
    lo, hi = next(b for b in BATCH_BUCKETS if b[0] <= n <= b[1])
    return str(lo) if lo == hi else f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"


def by_batch(num_reqs: Array, times: Array) -> dict[str, dict[str, int | float]]:
    """The mean step time by the ``num_reqs`` bucket of its step (a number above the last bucket's is in it)."""
    lows = np.array([lo for lo, _ in BATCH_BUCKETS])
    bucket = np.searchsorted(lows, num_reqs, side="right") - 1
    timed = ~np.isnan(times) & (num_reqs > 0)
    out: dict[str, dict[str, int | float]] = {}
    for i, (lo, _) in enumerate(BATCH_BUCKETS):
        ts = times[timed & (bucket == i)]
        if len(ts):
            out[_bucket(lo)] = {"steps": len(ts), "mean_ms": float(np.mean(ts))}
    return out


@dataclass(frozen=True)
class PassSteps:
    """One timed pass's steps, and the ``/metrics`` accepted-token delta of the same pass (None: unknown)."""

    steps: StepColumns
    counter_accepted: int | None


def _agree(a: int | None, b: int | None) -> bool | None:
    return None if a is None or b is None else a == b


def _cat(columns: Sequence[Array], dtype: type = np.int64) -> Array:
    return np.concatenate(columns) if columns else np.zeros(0, dtype=dtype)


def cell_stats(passes: Sequence[PassSteps]) -> StepStats:
    """The results keys of one cell's step log over its timed passes (``steplog_*``; docs/metrics.md)."""
    steps = [p.steps for p in passes]
    n = sum(len(s) for s in steps)
    times, clock = [], RUNNER
    for s in steps:  # per pass: a pass's first step spans the idle time before it; a pass without steps has none
        t, c = column_times(s)
        times.append(t)
        clock = c if c != RUNNER and len(s) else clock
    all_times = _cat(times, np.float64)
    measured = all_times[~np.isnan(all_times)]
    hist = [int(x) for x in sum((s.sched["hist"].sum(axis=0) for s in steps), np.zeros(HIST_LEN, dtype=np.int64))]
    acc = _cat([s.sched["accepted"] for s in steps])
    accepted = int(acc.sum()) if (acc != NONE).all() else None
    counters = [p.counter_accepted for p in passes]
    counter = None if any(c is None for c in counters) else sum(c or 0 for c in counters)
    if counter is None and accepted == 0:
        counter = 0  # a server that does not speculate: no counter, no accepted token
    hist_accepted = sum((j - 1) * k for j, k in enumerate(hist) if j >= 1)
    committing = sum(hist[1:])
    modes = sum((s.sched.text_counts("graph_mode") for s in steps), Counter[str]())
    padded, unpadded = _cat([s.sched["padded_tokens"] for s in steps]), _cat([s.sched["unpadded_tokens"] for s in steps])
    both = (padded != NONE) & (unpadded != NONE)
    unpadded_sum = int(unpadded[both].sum())
    parts = split(steps)
    return StepStats(
        steplog_steps=n,
        steplog_step_mean_ms=float(np.mean(measured)) if len(measured) else None,
        steplog_step_p50_ms=float(np.percentile(measured, 50)) if len(measured) else None,
        steplog_step_p95_ms=float(np.percentile(measured, 95)) if len(measured) else None,
        steplog_step_clock=clock if len(measured) else None,
        steplog_step_by_batch=by_batch(_cat([s.sched["num_reqs"] for s in steps]), all_times) or None,
        steplog_fwd_ms=parts["fwd"], steplog_lm_head_ms=parts["lm_head"], steplog_verify_ms=parts["verify"],
        steplog_drafter_ms=parts["drafter"], steplog_gap_ms=parts["gap"],
        steplog_tokens_per_step=sum(j * k for j, k in enumerate(hist)) / committing if committing else None,
        steplog_hist=hist,
        steplog_accepted=accepted,
        steplog_counter_accepted=counter,
        steplog_accepted_agree=_agree(accepted, counter),
        steplog_hist_accepted=hist_accepted,
        steplog_hist_agree=_agree(hist_accepted, accepted),
        steplog_graph_modes={m: k / n for m, k in sorted(modes.items())} or None,
        steplog_padding_share=(int(padded[both].sum()) - unpadded_sum) / unpadded_sum if unpadded_sum else None,
    )


def pass_tokens(tokens: RowColumns[TokenRow], steps: StepColumns) -> RowColumns[TokenRow]:
    """The token log's rows of one timed pass: those of its steps, by step number — the one cut its steps got.
    A token row's own wall time is the sampler's, taken in another process, and may fall on the other side of
    a scrape than its step's."""
    return tokens.take(np.flatnonzero(np.isin(tokens["step"], steps.step)))


@dataclass(frozen=True)
class PassTokens:
    """One timed pass's steps and the token rows of those steps (``pass_tokens``)."""

    steps: StepColumns
    tokens: RowColumns[TokenRow]


def token_stats(passes: Sequence[PassTokens], orphans: int = 0) -> TokenLogStats:
    """Σ accepted of the token rows against Σ accepted of the same steps' scheduler rows; a step that accepted
    guesses but has no token row (a row lost before it reached disk) is counted, and so are ``orphans``, the
    launch's token rows whose step no scheduler row has (they cannot be placed in any pass), and the guesses the
    runner verified for a request the scheduler had finished (async scheduling: left out of both sides)."""
    uncounted = {(int(step), req) for p in passes
                 for step, reqs in zip(p.steps.step.tolist(), p.steps.sched.values("skipped_reqs")) for req in reqs}
    counted = []
    for p in passes:
        keep = np.ones(len(p.tokens), dtype=bool)
        if uncounted:
            keep = np.array([(int(s), r) not in uncounted
                             for s, r in zip(p.tokens["step"].tolist(), p.tokens.values("req_id"))], dtype=bool)
        counted.append(keep)
    late = int(sum(int((~k).sum()) for k in counted))
    token_steps = _cat([p.tokens["step"][k] for p, k in zip(passes, counted)])
    kept = int(sum(int(((p.tokens["accepted"] == 1) & k).sum()) for p, k in zip(passes, counted)))
    steps = _cat([p.steps.step for p in passes])
    accepted = _cat([p.steps.sched["accepted"] for p in passes])
    missing = int(((accepted > 0) & ~np.isin(steps, token_steps)).sum())
    unplaced = {k: v for k, v in (("pass steps that accepted guesses but have no token row", missing),
                                  ("token rows of a step the scheduler log lacks", orphans),
                                  ("guesses of a request vLLM had finished (verified, not counted by it)", late)) if v}
    return TokenLogStats(steplog_token_guesses=len(token_steps), steplog_token_accepted=kept,
                         steplog_token_agree=kept == int(accepted.sum()) if (accepted != NONE).all() else None,
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
