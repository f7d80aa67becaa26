"""Table columns for quality and cost (``specbench.measure.quality``): each group appears only when some
row measured it, so a run that did not ask for it prints the same table as before."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..schemas.row import ResultRow

DASH = "—"

def _num(v: Any, digits: int, suffix: str = "") -> str:
    return DASH if v is None else f"{v:.{digits}f}{suffix}"


def _pct(v: Any) -> str:
    return DASH if v is None else f"{v * 100:.1f}%"


def _any(records: Sequence[ResultRow], value: Callable[[ResultRow], Any]) -> bool:
    return any(value(r) is not None for r in records)


def _bracket(r: ResultRow) -> str:
    """Highest passing rate and the lowest failing one: "12.5 (fails at 13.1)"."""
    if not r.slo_max_rate_bracket:
        return DASH
    lo, hi = r.slo_max_rate_bracket[:2]
    if lo is None:
        return DASH if hi is None else f"< {hi:.3g} (none passed)"
    return f"≥ {lo:.3g} (none failed)" if hi is None else f"{lo:.3g} (fails at {hi:.3g})"


def _capacity(r: ResultRow) -> str:
    s = r.slo_capacity_speedup
    if s is None:
        return DASH
    lo, hi = (r.slo_capacity_speedup_range or [None, None])[:2]
    rng = f" [{_num(lo, 2)}–{'∞' if hi is None else f'{hi:.2f}'}]" if lo is not None or hi is not None else ""
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
    return "/".join(_num(v, 2) for v in (r.request_acceptance_p10, r.request_acceptance_p50, r.request_acceptance_p90)) + _merged(r)


def _acceptance_means(r: ResultRow) -> str:
    return f"{_num(r.request_acceptance_mean, 2)}/{_num(r.request_acceptance_token_weighted_mean, 2)}" + _merged(r)


def quality_columns(records: Sequence[ResultRow]) -> list[tuple[str, Callable[[ResultRow], str]]]:
    cols: list[tuple[str, Callable[[ResultRow], str]]] = []
    if _any(records, lambda r: r.slo_attainment):
        cols += [("SLO met", lambda r: _pct(r.slo_attainment)),
                 ("Goodput req/s", lambda r: _num(r.goodput_rps, 3))]
    if any(r.slo_max_rate_bracket for r in records):
        label = next((f"p{r.slo_search_percentile:g}" for r in records if r.slo_search_percentile), "")
        cols += [(f"Max rate @SLO {label} req/s", _bracket), ("Capacity speedup @SLO", _capacity)]
    if _any(records, lambda r: r.request_acceptance_p50):
        cols += [("Req accept len p10/p50/p90", _acceptance), ("Req accept len mean req/tok", _acceptance_means)]
    if _any(records, lambda r: r.slower_than_baseline_share):
        cols.append(("Slower than base", lambda r: _pct(r.slower_than_baseline_share)))
    if any(r.has("accuracy") for r in records):
        cols.append(("Accuracy (graded)", _accuracy))
        if _any(records, lambda r: r.accuracy_diff_vs_baseline):
            cols.append(("Accuracy Δ vs base [95% CI]", _accuracy_diff))
    if _any(records, lambda r: r.energy_j):
        cols += [("J/token", lambda r: _num(r.joules_per_output_token, 3)),
                 ("J/token vs base", lambda r: _num(r.energy_per_token_ratio_vs_baseline, 3, "x"))]
    if _any(records, lambda r: r.gpu_util_mean_pct):
        cols.append(("GPU util %", lambda r: _num(r.gpu_util_mean_pct, 1)))
    if _any(records, lambda r: r.usd_per_million_output_tokens):
        cols += [("$/M tok", lambda r: _num(r.usd_per_million_output_tokens, 3)),
                 ("Cost saving", lambda r: _pct(r.cost_saving_vs_baseline))]
    return cols
