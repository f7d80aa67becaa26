"""The *Per request* and *Quality & cost* tables' columns (``specbench.measure.quality``,
``measure.per_request``, ``measure.slo``, ``grade``): each appears only when some row measured it, so a
run that did not ask for it prints the same tables as before."""

from __future__ import annotations

from ..schemas.row import ResultRow
from .colspec import DASH, PER_REQUEST, QUALITY, Column, Rows, measured, num, pct


def _pct1(v: float | None) -> str:
    return pct(v, 1)


def _bracket(r: ResultRow) -> str:
    """Highest passing rate and the lowest failing one: "12.5 (fails at 13.1)"."""
    if not r.slo_max_rate_bracket:
        return DASH
    lo, hi = r.slo_max_rate_bracket[:2]
    if lo is None:
        return DASH if hi is None else f"< {hi:.3g} (none passed)"
    return f"≥ {lo:.3g} (none failed)" if hi is None else f"{lo:.3g} (fails at {hi:.3g})"


def _bracket_header(records: Rows) -> str:
    label = next((f"p{r.slo_search_percentile:g}" for r in records if r.slo_search_percentile), "")
    return f"Max rate @SLO {label} req/s"


def _capacity(r: ResultRow) -> str:
    s = r.slo_capacity_speedup
    if s is None:
        return DASH
    lo, hi = (r.slo_capacity_speedup_range or [None, None])[:2]
    rng = f" [{num(lo, 2)}–{'∞' if hi is None else f'{hi:.2f}'}]" if lo is not None or hi is not None else ""
    return f"{s:.2f}x{rng}"


def _accuracy(r: ResultRow) -> str:
    if r.accuracy is None:
        return DASH
    return f"{r.accuracy * 100:.1f}% ({r.accuracy_compared})"


def _accuracy_diff(r: ResultRow) -> str:
    d = r.accuracy_diff_vs_baseline
    if d is None:
        return DASH
    lo, hi = r.accuracy_diff_ci_low, r.accuracy_diff_ci_high
    p = r.accuracy_mcnemar_p
    return (f"{d * 100:+.1f} pp" + (f" [{lo * 100:+.1f}, {hi * 100:+.1f}]" if lo is not None and hi is not None else "")
            + (f" p={p:.2g}" if p is not None else ""))


def _merged(r: ResultRow) -> str:
    """⚠ beside per-request lengths that merged chunks make too high (``request_acceptance_warning``)."""
    return " ⚠" if r.request_acceptance_warning else ""


def _acceptance(r: ResultRow) -> str:
    return "/".join(num(v, 2) for v in (r.request_acceptance_p10, r.request_acceptance_p50, r.request_acceptance_p90)) + _merged(r)


def _acceptance_means(r: ResultRow) -> str:
    return f"{num(r.request_acceptance_mean, 2)}/{num(r.request_acceptance_token_weighted_mean, 2)}" + _merged(r)


_per_request = measured(lambda r: r.request_acceptance_p50)
_slo = measured(lambda r: r.slo_attainment)
_searched = measured(lambda r: r.slo_max_rate_bracket or None)
_energy = measured(lambda r: r.energy_j)
_cost = measured(lambda r: r.usd_per_million_output_tokens)


def _graded(records: Rows) -> bool:
    return any(r.has("accuracy") for r in records)


_MERGED = "⚠ = from chunks while the engine merged steps into one chunk, so too high (request_acceptance_warning)"

QUALITY_COLUMNS: list[Column] = [
    Column("Req accept len p10/p50/p90", _acceptance, ("request_acceptance_p10", "request_acceptance_p50",
                                                        "request_acceptance_p90", "request_acceptance_warning"),
           PER_REQUEST, note=_MERGED, shown=_per_request),
    Column("Req accept len mean req/tok", _acceptance_means,
           ("request_acceptance_mean", "request_acceptance_token_weighted_mean", "request_acceptance_warning"),
           PER_REQUEST, note=_MERGED, shown=_per_request),
    Column("Slower than base", lambda r: _pct1(r.slower_than_baseline_share), ("slower_than_baseline_share",),
           PER_REQUEST, shown=measured(lambda r: r.slower_than_baseline_share)),
    Column("Same output", lambda r: pct(r.fidelity_identical), ("fidelity_identical",), PER_REQUEST,
           shown=measured(lambda r: r.fidelity_identical)),
    Column("SLO met", lambda r: _pct1(r.slo_attainment), ("slo_attainment",), QUALITY, note="with load.slo",
           shown=_slo),
    Column("Goodput req/s", lambda r: num(r.goodput_rps, 3), ("goodput_rps",), QUALITY, note="with load.slo",
           shown=_slo),
    Column("Max rate @SLO pN req/s", _bracket, ("slo_max_rate_bracket", "slo_search_percentile"), QUALITY,
           note="shown as the highest rate, with the lowest that failed", shown=_searched, header_for=_bracket_header),
    Column("Capacity speedup @SLO", _capacity, ("slo_capacity_speedup", "slo_capacity_speedup_range"), QUALITY,
           note="in brackets the range its two brackets allow (slo_capacity_speedup_range)", shown=_searched),
    Column("Accuracy (graded)", _accuracy, ("accuracy", "accuracy_compared"), QUALITY,
           note="in brackets how many were graded (accuracy_compared); accuracy_error is said under the tables",
           shown=_graded),
    Column("Accuracy Δ vs base [95% CI]", _accuracy_diff,
           ("accuracy_diff_vs_baseline", "accuracy_diff_ci_low", "accuracy_diff_ci_high", "accuracy_mcnemar_p"),
           QUALITY, note="in percentage points, with its paired-bootstrap 95% CI and the exact McNemar p", unit="pp",
           shown=lambda rows: _graded(rows) and measured(lambda r: r.accuracy_diff_vs_baseline)(rows)),
    Column("J/token", lambda r: num(r.joules_per_output_token, 3), ("joules_per_output_token",), QUALITY,
           shown=_energy),
    Column("J/token vs base", lambda r: num(r.energy_per_token_ratio_vs_baseline, 3, "x"),
           ("energy_per_token_ratio_vs_baseline",), QUALITY, shown=_energy),
    Column("GPU util %", lambda r: num(r.gpu_util_mean_pct, 1), ("gpu_util_mean_pct",), QUALITY,
           shown=measured(lambda r: r.gpu_util_mean_pct)),
    Column("$/M tok", lambda r: num(r.usd_per_million_output_tokens, 3), ("usd_per_million_output_tokens",), QUALITY,
           note="with cost.gpu_hour_usd", shown=_cost),
    Column("Cost saving", lambda r: _pct1(r.cost_saving_vs_baseline), ("cost_saving_vs_baseline",), QUALITY,
           shown=_cost),
]
