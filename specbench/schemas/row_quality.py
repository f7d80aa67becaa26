"""The results row's quality and cost groups (``measure.quality``): goodput at the SLO and the capacity search
(``measure.slo``), accuracy (``grade``), energy and cost (``measure.telemetry``), and lengths in one tokenizer
(``measure.o200k``). Each is written only for what the suite asked for or a phase recorded; a value that could
not be measured is null with its reason, never 0."""

from __future__ import annotations

from dataclasses import dataclass

from .record_values import key
from .row_group import MetricGroup, Numbers

__all__ = ["Accuracy", "CostSummary", "CostVsBaseline", "O200kLengths", "PairedAccuracy", "SloAttainment",
           "SloCapacity", "TelemetrySummary"]


@dataclass
class SloAttainment(MetricGroup):
    """The cell at the suite's SLO (load.slo): a request meets it when it succeeded and every bounded metric is
    within its bound (TPOT does not apply to a one-token answer)."""

    slo: dict[str, float] | None = key("the SLO's bounds: ttft_ms, tpot_ms, latency_ms → ms", unit="ms")
    slo_attainment: float | None = key("share of the cell's requests within every bound of the SLO (failed requests "
                                       "are misses)", unit="share", low=0, high=1)
    slo_met_requests: int | None = key("requests that met the SLO", unit="requests", low=0)
    goodput_rps: float | None = key("requests that met the SLO ÷ wall time of the timed pass", unit="req/s", low=0)


@dataclass
class Accuracy(MetricGroup):
    """Task accuracy of a data set the suite grades (load.grade)."""

    accuracy: float | None = key("correct ÷ graded first-turn answers of the timed passes; null when none was graded "
                                 "(accuracy_error)", unit="share", low=0, high=1)
    accuracy_compared: int | None = key("first-turn answers graded", unit="answers", low=0)
    accuracy_ungraded: int | None = key("first-turn answers of the timed passes not graded (failed requests, no gold "
                                        "answer)", unit="answers", low=0)
    accuracy_truncated: int | None = key("graded answers cut by max_tokens (graded as they are; usually wrong)",
                                         unit="answers", low=0)
    accuracy_error: str | None = key("why accuracy is null; written only then", omit_none=True)
    grade_network_guard: str | None = key(
        "how the graded programs were kept off the network: namespace (an empty network namespace), socket guard (the "
        "prelude only), joined by + when both ran; written only for graded programs", omit_none=True)


@dataclass
class PairedAccuracy(MetricGroup):
    """Accuracy against the baseline's on the prompts both answered (a graded speculative config's row)."""

    accuracy_diff_vs_baseline: float | None = key("accuracy − the baseline's on the prompts both answered",
                                                  unit="share")
    accuracy_diff_ci_low: float | None = key("95% CI of accuracy_diff_vs_baseline, low end: paired bootstrap over "
                                             "prompts (2000 resamples)", unit="share")
    accuracy_diff_ci_high: float | None = key("95% CI of accuracy_diff_vs_baseline, high end", unit="share")
    accuracy_mcnemar_p: float | None = key("the exact McNemar test's p-value (two-sided, over the discordant prompts)",
                                           low=0, high=1)
    accuracy_paired_prompts: int | None = key("prompts graded under both configs", unit="prompts", low=0)
    accuracy_diff_method: str | None = key("how the interval and the p-value were computed; written only with them",
                                           omit_none=True)


@dataclass
class TelemetrySummary(MetricGroup):
    """The cell's GPU energy and sampled NVML telemetry over its timed passes (GPU engines only; null with
    telemetry_error elsewhere)."""

    energy_j: float | None = key("NVML energy of the server's GPUs over the timed passes, Σ over repeats", unit="J",
                                 low=0)
    joules_per_output_token: float | None = key(
        "NVML energy of the server's GPUs over the timed passes (energy_j) ÷ output tokens (GPU only; null otherwise, "
        "with telemetry_error)", unit="J/token", low=0)
    gpu_util_mean_pct: float | None = key(
        "mean of NVML utilisation samples (4 per second) taken at least 1 s into the timed pass (NVML averages over "
        "its last period of up to 1 s); null for a shorter pass", unit="%", low=0, high=100)
    gpu_mem_used_max_mib: float | None = key("the most GPU memory used in any sample", unit="MiB", low=0)
    sm_clock_mean_mhz: float | None = key("mean SM clock over the samples", unit="MHz", low=0)
    telemetry_gpus: list[str] | None = key("the GPUs metered (the server's)")
    telemetry_error: str | None = key("why energy is null (a repeat's reason)")


@dataclass
class CostSummary(MetricGroup):
    """The cell's cost per output token at the suite's GPU-hour price (cost.gpu_hour_usd): written only when the
    suite prices GPUs."""

    gpu_hour_usd: float | None = key("cost.gpu_hour_usd: the price of one GPU-hour", unit="USD", low=0)
    cost_gpus: int | None = key("GPUs per server", unit="GPUs", low=0)
    usd_per_million_output_tokens: float | None = key(
        "USD per GPU-hour × GPUs per server ÷ (output_throughput_tps × 3600) × 10⁶", unit="USD", low=0)
    cost_error: str | None = key("why there is no price per token; written only then", omit_none=True)


@dataclass
class CostVsBaseline(MetricGroup):
    """Energy and cost per token against the baseline's on the same data set and load point."""

    energy_per_token_ratio_vs_baseline: float | None = key("joules_per_output_token ÷ the baseline's", unit="×",
                                                           low=0)
    cost_saving_vs_baseline: float | None = key(
        "1 − usd_per_million_output_tokens ÷ the baseline's (negative = dearer than the baseline)", unit="share")


@dataclass
class SloCapacity(MetricGroup):
    """The SLO capacity search (load.rate_search, meta.json slo_search): the highest Poisson request rate whose
    percentile of each bounded metric met the SLO, copied into the config's rows of that data set."""

    slo_search_percentile: float | None = key("the percentile the search held within the SLO (99: p99)", low=0,
                                              high=100)
    slo_max_rate_rps: float | None = key("the highest probed rate that met the SLO (null: none did)", unit="req/s",
                                         low=0)
    slo_max_rate_bracket: Numbers | None = key(
        "with load.rate_search: [the highest Poisson request rate whose slo_search_percentile of each bounded metric "
        "met the SLO, the lowest rate that failed] (doubling, then bisecting; an end null where no probe bounded it)",
        unit="req/s")
    slo_search_steps: int | None = key("probes the search ran", unit="probes", low=0)
    slo_capacity_speedup: float | None = key("slo_max_rate_rps ÷ the baseline's", unit="×", low=0)
    slo_capacity_speedup_range: Numbers | None = key(
        "[low, high] of slo_capacity_speedup the two brackets allow (high null: unbounded)", unit="×")


@dataclass
class O200kLengths(MetricGroup):
    """Output and prompt lengths in tiktoken's o200k_base tokens, one tokenizer for every model: written only where
    counted (from a local o200k_base.tiktoken only), or null with o200k_error where the file was not there."""

    output_tokens_o200k: int | None = key("Σ o200k_base tokens of the successful requests' answer text",
                                          unit="tokens", low=0)
    output_throughput_o200k_tps: float | None = key(
        "Output tok/s counted in tiktoken's o200k_base tokens instead of the server's: Σ o200k tokens of the "
        "successful requests' answer text ÷ wall time of the timed pass, mean over repeats — one tokenizer for every "
        "model, as Artificial Analysis and specdec_bench normalise; counted after the run from a local "
        "o200k_base.tiktoken only (null: o200k_error says why)", unit="tokens/s", low=0)
    o200k_per_output_token: float | None = key(
        "o200k_base tokens ÷ the server's output tokens over the same successful requests: how much text one of this "
        "model's tokens carries (below 1: its tokenizer splits finer than o200k_base)", unit="×", low=0)
    prompt_tokens_o200k_mean: float | None = key(
        "per successful request: o200k_base tokens of the text it sent, each message's content counted on its own (no "
        "chat template; a later turn includes the earlier answers) — SPEED-Bench-style input length, the same for "
        "every model; the mean (p50 and max beside it)", unit="tokens", low=0)
    prompt_tokens_o200k_p50: float | None = key("median of those prompt lengths", unit="tokens", low=0)
    prompt_tokens_o200k_max: int | None = key("the longest of those prompt lengths", unit="tokens", low=0)
    o200k_error: str | None = key("why the o200k counts are null or incomplete; written only then", omit_none=True)
