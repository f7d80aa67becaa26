"""The results row's step-log groups (docs/steplog.md): the engine's own steps over the cell's timed passes
(``measure.steplog``), where they came from, the token log against them, the stalls and what caused them
(``measure.stalls``), and the steady warm-up. Written only for a cell whose server ran with ``steplog:`` on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .record_values import key
from .row_baseline import Decomposition
from .row_group import MetricGroup

__all__ = ["ServerBatch", "StallStats", "SteadyWarmup", "StepDecomposition", "StepLogSource", "StepStats", "TokenLogStats"]

_STEP = ("time from one engine step's start to the next one's, the first step of each pass left out (it spans the "
         "idle time before the pass): the runner's since_prev_ms (GPU events; host perf_counter on the CPU engine) at "
         "the timing level, the scheduler's wall-time differences at the steps level (steplog_step_clock)")


@dataclass
class StepStats(MetricGroup):
    """The cell's step log over its timed passes (each cut from its server's log by the wall times of its two
    /metrics scrapes): step times, where a step's time goes, tokens per step, and whether the log's accepted tokens
    equal the /metrics counters exactly."""

    steplog_steps: int | None = key("engine steps in the cell's timed passes", unit="steps", low=0)
    steplog_step_mean_ms: float | None = key(f"{_STEP}; the mean (p50, p95 beside it; by batch size in "
                                             "steplog_step_by_batch)", unit="ms", low=0)
    steplog_step_p50_ms: float | None = key("50th percentile of those step times", unit="ms", low=0)
    steplog_step_p95_ms: float | None = key("95th percentile of those step times", unit="ms", low=0)
    steplog_step_clock: str | None = key("which clock timed the steps: the runner's since_prev_ms, or the scheduler's "
                                         "wall time")
    steplog_step_by_batch: dict[str, Any] | None = key("num_reqs bucket (1, 2-4, 5-8, 9-16, …) → {steps, mean_ms}")
    steplog_fwd_ms: float | None = key(
        "mean per step (timing level): target forward (t_fwd_end − t_fwd), its LM head (t_lg1 − t_lg0), sampling and "
        "verification (t_d0, or t_end without a drafter, − t_samp), the drafter's propose (t_d1 − t_d0), and the gap "
        "between steps (since_prev_ms − the previous step's t_end), in steplog_fwd_ms, _lm_head_ms, _verify_ms, "
        "_drafter_ms and _gap_ms; null = a mark this runner does not reach", unit="ms")
    steplog_lm_head_ms: float | None = key("mean per step: the LM head, t_lg1 − t_lg0", unit="ms")
    steplog_verify_ms: float | None = key("mean per step: sampling and verification, (t_d0, or t_end without a "
                                          "drafter) − t_samp", unit="ms")
    steplog_drafter_ms: float | None = key("mean per step: the drafter's propose, t_d1 − t_d0", unit="ms")
    steplog_gap_ms: float | None = key("mean per step: since_prev_ms − the previous step's t_end", unit="ms")
    steplog_tokens_per_step: float | None = key(
        "tokens committed per request per step, from the step log's histogram: Σ j·hist[j] ÷ Σ hist[j≥1] (merged "
        "chunks do not enter); steplog_hist is the histogram over the timed passes", unit="tokens/step", low=0)
    steplog_hist: list[int] | None = key("the commit histogram's 17 counts (requests that committed j tokens in a "
                                         "step), summed over the timed passes", unit="requests")
    steplog_accepted: int | None = key(
        "Σ accepted of the step log's rows over the timed passes, against steplog_counter_accepted, the /metrics "
        "accepted-token counter delta of the same passes: equal, or flagged (a pass cut wrong, a lost row, other "
        "traffic)", unit="tokens", low=0)
    steplog_counter_accepted: int | None = key("the /metrics accepted-token counter delta of the same passes",
                                               unit="tokens", low=0)
    steplog_accepted_agree: bool | None = key("steplog_accepted = steplog_counter_accepted")
    steplog_hist_accepted: int | None = key(
        "Σ (j − 1)·hist[j] against Σ accepted of the same steps (steplog_accepted): the per-request histogram against "
        "the engine's own spec-decode stats", unit="tokens", low=0)
    steplog_hist_agree: bool | None = key("steplog_hist_accepted = steplog_accepted")
    steplog_graph_modes: dict[str, float] | None = key(
        "share of steps per CUDA-graph mode (FULL, PIECEWISE, NONE; --cudagraph-metrics), and in steplog_padding_share "
        "the padded tokens beyond the scheduled ones ÷ the scheduled ones", unit="share")
    steplog_padding_share: float | None = key("(padded − unpadded tokens) ÷ unpadded tokens", unit="share", low=0,
                                              high=1)


@dataclass
class ServerBatch(MetricGroup):
    """The batch the server ran over the cell's timed passes (``measure.server_batch``), from the scheduler's
    ``running``, ``waiting`` and ``kv_usage`` after each step: a closed loop at C asks for C requests at once, and a
    server whose KV cache, --max-num-seqs or prefill budget holds fewer runs its own batch and queues the rest. Null
    where the log lacks the field (older logs, some hooks), never 0."""

    steplog_running_p50: float | None = key(
        "requests in the scheduler's running queue (decoding or prefilling) after each step of the timed passes, the "
        "median over the steps (steplog_running_max the most, steplog_waiting_share how often others waited, "
        "steplog_kv_peak the fullest KV cache): a closed loop at C asks for C", unit="requests", low=0)
    steplog_running_max: int | None = key("the most requests running after any step of the timed passes",
                                          unit="requests", low=0)
    steplog_waiting_share: float | None = key(
        "share of the timed passes' steps after which requests waited in the scheduler's queue (waiting > 0): sent, "
        "not yet admitted (the KV cache full, --max-num-seqs reached, or the step's token budget spent on prefill)",
        unit="share", low=0, high=1)
    steplog_kv_peak: float | None = key("the highest share of the KV cache in use after any step of the timed passes "
                                        "(kv_usage)", unit="share", low=0, high=1)


@dataclass
class StepLogSource(MetricGroup):
    """Where the cell's step-log numbers came from."""

    steplog_window: str | None = key("how the passes were cut from the log: /metrics scrapes (the wall times of each "
                                     "pass's two scrapes)")
    steplog_skipped_rows: dict[str, Any] | None = key(
        "lines of the step log that could not be used (bad type or range, torn, not JSON; reason → lines): skipped "
        "and counted, never a failure of the run; steplog_error says why a pass had no log", unit="lines")
    steplog_error: str | None = key("why a pass had no log, or lost rows (a cut file, no scrape times, no step of the "
                                    "launch's own)")


@dataclass
class StepDecomposition(Decomposition):
    """The Why table's decomposition as the step log gives it, where the row and its baseline both have a measured
    step time: its keys are the decomposition's (``Decomposition``), and ``step_source`` says which source they used."""

    step_source: str | None = key(
        "what Step cost and Tok/step of this row came from: \"step log\" = Step cost is the engine's mean step time ÷ "
        "the baseline's (steplog_step_mean_ms, both measured) and Tok/step the step log's commit histogram "
        "(steplog_tokens_per_step), so merged chunks do not enter; \"chunk gaps\" = the client's chunks (merged steps "
        "overstate both); null = chunk gaps, in a run without a step log")


@dataclass
class TokenLogStats(MetricGroup):
    """The token log (steplog: tokens) over the rows of the timed passes' steps, cut by step number as the steps
    are, against the step log: written only where the launch kept a token log."""

    steplog_token_guesses: int | None = key("verified guesses of the token log in the timed passes' steps",
                                            unit="tokens")
    steplog_token_accepted: int | None = key(
        "the token log's accepted guesses over the rows of the timed passes' steps vs the steps' accepted tokens "
        "(steplog_token_agree); steplog_token_guesses counts the verified guesses and steplog_token_unplaced what "
        "could not be placed", unit="tokens")
    steplog_token_agree: bool | None = key("steplog_token_accepted = Σ accepted of the same steps (null: a step's "
                                           "accepted unknown)")
    steplog_token_unplaced: dict[str, int] | None = key(
        "what could not be placed, reason → count: a step that accepted guesses without a token row, a token row of "
        "a step the scheduler log lacks, a guess of a request vLLM had finished; null when everything was")


@dataclass
class StallStats(MetricGroup):
    """The stalls of the cell's timed passes: steps of at least 5× their pass's median step or 50 ms (a step's
    time: its start to the next one's; the median of the decode-only steps where a pass has ≥ 5, else of all its
    steps), and what caused them (docs/steplog.md)."""

    steplog_stalls: int | None = key(
        "steps of the timed passes that took ≥ 5× their pass's median step or ≥ 50 ms (a step's time: its start to "
        "the next one's; the median of the pass's decode-only steps, those without a prefill chunk, where it has ≥ 5, "
        "else of all its steps), how many; steplog_stall_ms the ms they took beyond the median, steplog_stall_share "
        "that share of the passes' wall time; per pass with its longest stalls and the median's basis in "
        "steplog_stall_passes (docs/steplog.md)",
        unit="steps")
    steplog_stall_ms: float | None = key("Σ the stalls' excess over their pass's median step (decode-only, or all "
                                         "steps: steplog_stall_passes' basis)", unit="ms")
    steplog_stall_share: float | None = key("steplog_stall_ms ÷ Σ wall time of the passes", unit="share")
    steplog_stall_causes: dict[str, float] | None = key(
        "what the stalls' excess ms went to, by cause: the events that overlapped a stall (gc, compile, graph_capture, "
        "triton_compile, triton_autotune, alloc_growth, preemption, recorder_flush), a step of ≥ 5× a median step's "
        "tokens (prefill, batch), a step outside the pass's CUDA-graph mode (graph mode), or unknown; a stall with two "
        "causes counts toward both; steplog_one_time_events counts the one-time events (warm-up left undone) anywhere "
        "in the passes", unit="ms")
    steplog_stall_unknown_ms: float | None = key("the excess ms no cause explains", unit="ms")
    steplog_one_time_events: int | None = key("one-time events anywhere in the timed passes' windows: warm-up left "
                                              "undone", unit="events")
    steplog_stall_passes: list[dict[str, Any]] | None = key(
        "per timed pass: repeat, server_start, stalls, stall_ms, share, one_time_events, median_ms (the median step "
        "its stalls were judged against) and basis (whose median: \"decode-only\" steps, or \"all steps\" where "
        "the pass had fewer than 5 decode-only ones), and its 5 longest stalls (step, at_s into the pass, ms, "
        "excess_ms, where, causes)")


@dataclass
class SteadyWarmup(MetricGroup):
    """``load.warmup: steady`` over the cell's timed passes: written only where a steady warm-up ran."""

    warmup_steady_passes: list[int] | None = key("warm-up passes each repeat took", unit="passes")
    warmup_steady: bool | None = key("every repeat's warm-up ended on a pass with no one-time event (false: the cap "
                                     "was reached first)")
    warmup_steady_events: list[list[int]] | None = key("one-time events of each warm-up pass, per repeat",
                                                       unit="events")
