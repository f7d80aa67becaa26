"""The *Step* table (the engine's own step log, ``specbench.measure.steplog``) and the Why table's note of
which source its step cost came from; shown only where some cell ran with ``steplog:``."""

from __future__ import annotations

from ..schemas.row import ResultRow
from .colspec import STEP, WHY, Column, Rows, num, pct


def _steps(r: ResultRow) -> str:
    return f"{num(r.steplog_step_mean_ms, 2)}/{num(r.steplog_step_p50_ms, 2)}/{num(r.steplog_step_p95_ms, 2)}"


def _split(r: ResultRow) -> str:
    return "/".join(num(v, 2) for v in (r.steplog_fwd_ms, r.steplog_lm_head_ms, r.steplog_verify_ms,
                                        r.steplog_drafter_ms, r.steplog_gap_ms))


def _agree(agree: bool | None, a: int | None, b: int | None) -> str:
    if a is None or b is None:
        return "—"
    return f"{a} = {b}" if agree else f"{a} ≠ {b} ⚠"


def _modes(r: ResultRow) -> str:
    modes = r.steplog_graph_modes or {}
    return " ".join(f"{m} {pct(v, 0)}" for m, v in modes.items()) or "—"


def _stalls(r: ResultRow) -> str:
    if r.steplog_stalls is None:
        return "—"
    return f"{r.steplog_stalls}/{num(r.steplog_stall_ms, 0)}/{pct(r.steplog_stall_share, 1)}"


def _causes(r: ResultRow) -> str:
    causes = r.steplog_stall_causes or {}
    top = sorted(((k, v) for k, v in causes.items() if isinstance(v, (int, float))), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.0f}" for k, v in top[:3]) or ("none" if r.steplog_stalls == 0 else "—")


def _has_log(records: Rows) -> bool:
    return any(r.steplog_steps is not None for r in records)


STEP_COLUMNS: list[Column] = [
    Column("Steps", lambda r: num(r.steplog_steps, 0),
           "engine steps in the cell's timed passes (each pass cut from its server's step log by the wall times of its "
           "two /metrics scrapes; steplog_window)", STEP, "steps", ("steplog_steps", "steplog_window"), _has_log),
    Column("Step ms mean/p50/p95", _steps,
           "time from one engine step's start to the next one's, the first step of each pass left out (it spans the "
           "idle time before the pass): the runner's since_prev_ms (GPU events; host perf_counter on the CPU engine) "
           "at the timing level, the scheduler's wall-time differences at the steps level (steplog_step_clock); by "
           "batch size (num_reqs buckets) in steplog_step_by_batch", STEP, "ms",
           ("steplog_step_mean_ms", "steplog_step_p50_ms", "steplog_step_p95_ms", "steplog_step_clock",
            "steplog_step_by_batch"), _has_log),
    Column("Fwd/LM head/verify/draft/gap ms", _split,
           "mean per step (timing level): target forward (t_fwd_end − t_fwd), its LM head (t_lg1 − t_lg0), sampling and "
           "verification (t_d0, or t_end without a drafter, − t_samp), the drafter's propose (t_d1 − t_d0), and the gap "
           "between steps (since_prev_ms − the previous step's t_end); — = a mark this runner does not reach",
           STEP, "ms", ("steplog_fwd_ms", "steplog_lm_head_ms", "steplog_verify_ms", "steplog_drafter_ms",
                        "steplog_gap_ms"), _has_log),
    Column("Log tok/step", lambda r: num(r.steplog_tokens_per_step, 3),
           "tokens committed per request per step, from the step log's histogram: Σ j·hist[j] ÷ Σ hist[j≥1] (merged "
           "chunks do not enter); steplog_hist is the histogram over the timed passes", STEP, "tokens/step",
           ("steplog_tokens_per_step", "steplog_hist"), _has_log),
    Column("Accepted log = counter", lambda r: _agree(r.steplog_accepted_agree, r.steplog_accepted,
                                                      r.steplog_counter_accepted),
           "Σ accepted of the step log's rows over the timed passes vs the /metrics accepted-token counter delta of the "
           "same passes: equal, or ⚠ with both numbers (a pass cut wrong, a lost row, other traffic)", STEP, "tokens",
           ("steplog_accepted", "steplog_counter_accepted", "steplog_accepted_agree"), _has_log),
    Column("Hist = accepted", lambda r: _agree(r.steplog_hist_agree, r.steplog_hist_accepted, r.steplog_accepted),
           "Σ (j − 1)·hist[j] vs Σ accepted of the same steps: the per-request histogram against the engine's own "
           "spec-decode stats; ⚠ with both numbers when they differ", STEP, "tokens",
           ("steplog_hist_accepted", "steplog_hist_agree"), _has_log),
    Column("Token log = log", lambda r: _agree(r.steplog_token_agree, r.steplog_token_accepted, r.steplog_accepted),
           "the token log (steplog: tokens) against the step log: its accepted guesses over the rows of the timed passes' "
           "steps (cut by step number, as the steps are) vs the steps' accepted tokens; ⚠ with both numbers when they "
           "differ; steplog_token_guesses counts the verified guesses and steplog_token_unplaced what could not be "
           "placed (a step that accepted guesses without a token row, a token row of a step the scheduler log lacks)",
           STEP, "tokens", ("steplog_token_accepted", "steplog_token_agree", "steplog_token_guesses",
                            "steplog_token_unplaced"), lambda rows: any(r.steplog_token_guesses is not None for r in rows)),
    Column("Stalls n/ms/share", _stalls,
           "steps of the timed passes that took ≥ 5× their pass's median step or ≥ 50 ms (a step's time: its start to "
           "the next one's), how many, the ms they took beyond the median, and that share of the passes' wall time; "
           "per pass with its longest stalls in steplog_stall_passes (docs/steplog.md)", STEP, "steps/ms/%",
           ("steplog_stalls", "steplog_stall_ms", "steplog_stall_share", "steplog_stall_passes"), _has_log),
    Column("Stall causes", _causes,
           "what the stalls' excess ms went to, by cause: the events that overlapped a stall (gc, compile, graph_capture, "
           "triton_compile, triton_autotune, alloc_growth, preemption, recorder_flush), a step of ≥ 5× a median "
           "step's tokens (prefill, batch), a step outside the pass's CUDA-graph mode (graph mode), or unknown; a stall "
           "with two causes counts toward both; steplog_one_time_events counts the one-time events (warm-up left "
           "undone) anywhere in the passes", STEP, "ms",
           ("steplog_stall_causes", "steplog_stall_unknown_ms", "steplog_one_time_events"), _has_log),
    Column("Graph modes", _modes,
           "share of steps per CUDA-graph mode (FULL, PIECEWISE, NONE; --cudagraph-metrics), and in "
           "steplog_padding_share the padded tokens beyond the scheduled ones ÷ the scheduled ones",
           STEP, "%", ("steplog_graph_modes", "steplog_padding_share"), _has_log),
    Column("Skipped rows", lambda r: str(sum((r.steplog_skipped_rows or {}).values())) if r.steplog_steps is not None else "—",
           "lines of the step log that could not be used (bad type or range, torn, not JSON; by reason in "
           "steplog_skipped_rows): skipped and counted, never a failure of the run; steplog_error says why a pass had "
           "no log", STEP, "lines", ("steplog_skipped_rows", "steplog_error"),
           lambda rows: any(r.steplog_skipped_rows or r.steplog_error for r in rows)),
]

STEP_SOURCE_COLUMN = Column(
    "Step source", lambda r: r.step_source or "—",
    "what Step cost and Tok/step of this row came from: \"step log\" = Step cost is the engine's mean step time ÷ "
    "the baseline's (steplog_step_mean_ms, both measured) and Tok/step the step log's commit histogram "
    "(steplog_tokens_per_step), so merged chunks do not enter; \"chunk gaps\" = the client's chunks as described "
    "above (merged steps overstate both); — = chunk gaps, in a run without a step log", WHY,
    keys=("step_source", "steplog_tokens_per_step"),
    shown=lambda rows: any(r.step_source is not None for r in rows))
