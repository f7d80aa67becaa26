"""The results row's groups against the baseline on the same data set and load point (``measure.compare``,
``measure.per_request``, ``measure.repeat_spread``): written only in a run with a baseline, on the rows that
have one."""

from __future__ import annotations

from dataclasses import dataclass

from .record_values import key
from .row_group import MetricGroup, Numbers

__all__ = ["Decomposition", "Fidelity", "PairedSpeedup", "RepeatSpread", "SlowerShare"]


@dataclass
class PairedSpeedup(MetricGroup):
    """The speed-up over the prompts both this config and the baseline answered, with its bootstrap CI."""

    paired_speedup: float | None = key(
        "Σ output tokens ÷ Σ latency over the paired prompts (prompt, turn and repeat), this config's ÷ the "
        "baseline's", unit="×", low=0)
    paired_speedup_ci_low: float | None = key(
        "95% CI of paired_speedup, low end: bootstrap over paired prompts (2000 resamples; resampling prompts keeps "
        "each pair intact)", unit="×")
    paired_speedup_ci_high: float | None = key("95% CI of paired_speedup, high end", unit="×")
    paired_prompts: int | None = key("paired prompts the speed-up is over", unit="prompts", low=0)


@dataclass
class Fidelity(MetricGroup):
    """Outputs identical to the baseline's on the same prompts (a speculative config's row)."""

    fidelity_identical: float | None = key(
        "share of the prompts both answered whose output is identical to the baseline's (token ids where both "
        "returned them, else the text; meaningful at temperature 0; fidelity_first_divergence_median says where the "
        "others part)", unit="share", low=0, high=1)
    fidelity_compared: int | None = key("prompts both answered, compared", unit="prompts", low=0)
    fidelity_unit: str | None = key("token or char: what was compared, and what fidelity_first_divergence_median "
                                    "counts")
    fidelity_first_divergence_median: float | None = key(
        "median position of the first difference among the outputs that differ (in fidelity_unit)", low=0)


@dataclass
class Decomposition(MetricGroup):
    """Speedup = tokens per step ÷ step cost × residual (the Why table); null where not measured."""

    step_cost_ratio: float | None = key(
        "mean gap between chunks (step_mean_ms) ÷ the baseline's time per decode step (its step_mean_ms ÷ its Tok/step, "
        "stream_mean_acceptance_length): how much longer one target step takes with drafting and verification "
        "(from the step log where step_source says so)", unit="×", low=0)
    speedup_decomposed: float | None = key(
        "Tok/step ÷ step_cost_ratio: the ratio of decode token rates (time outside decode steps left out; merged "
        "chunks leave it unchanged)", unit="×", low=0)
    speedup_decomposed_ci_low: float | None = key(
        "95% CI of speedup_decomposed, low end: the paired bootstrap over prompts, scaled onto the point value like "
        "the speedup's", unit="×")
    speedup_decomposed_ci_high: float | None = key("95% CI of speedup_decomposed, high end", unit="×")
    speedup_residual: float | None = key(
        "speedup_vs_baseline ÷ speedup_decomposed: below 1 lost, above 1 won outside decode steps (prefill/TTFT, "
        "queueing, scheduling)", unit="×", low=0)


@dataclass
class SlowerShare(MetricGroup):
    """Paired prompts this config served slower per output token than the baseline."""

    slower_than_baseline_share: float | None = key(
        "share of the prompts both answered on which this config's time per output token (latency ÷ output tokens) "
        "exceeded the baseline's", unit="share", low=0, high=1)
    slower_than_baseline_compared: int | None = key("prompts both answered, compared", unit="prompts", low=0)


@dataclass
class RepeatSpread(MetricGroup):
    """The speed-up repeat by repeat (a row with two or more paired repeats): on which server starts, whether the
    repeats disagree (Cochran's Q), and the adaptive target (load.target_ci)."""

    speedup_repeats: Numbers | None = key("each paired repeat's speed-up: its output tok/s ÷ the baseline's in the "
                                          "same repeat", unit="×")
    speedup_repeats_fresh_servers: bool | None = key("true when every repeat of both configs ran on its own server "
                                                     "start (the spread then covers server starts, not only passes)")
    speedup_between_p: float | None = key(
        "Cochran's Q p-value: do the repeats' speed-ups disagree by more than their own bootstrap intervals allow",
        low=0, high=1)
    speedup_varies: bool | None = key("speedup_between_p < 0.05: the repeats disagree (⚠ varies between servers or "
                                      "passes); the CI is then the between-repeat t-interval")
    repeats_target: float | None = key("load.target_ci: the relative half-width the speed-up's CI was to reach",
                                       unit="share", low=0, high=1)
    repeats_target_met: bool | None = key("whether the reported half-width reached repeats_target (null: no interval)")
