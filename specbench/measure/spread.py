"""Spread between repeats of a cell: the stopping rule of adaptive repeats and the test that flags
passes (or server starts) that disagree by more than their own within-pass intervals allow.

Pure functions; the run loop (``run/sequential``) asks ``planned_repeats`` after the first stage and
``run/results`` writes what ``spread_keys`` returns. docs/measurement.md states the rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .compare import mean_ci95, t975

#: a cell's passes disagree when Cochran's Q says so at this level
HETEROGENEITY_P = 0.05
_Z975 = 1.959964


def planned_repeats(first: Sequence[float | None], target: float, maximum: int) -> int:
    """Stein's two-stage rule: from the first stage's m values (mean x̄, sd s), the repeats that make
    t₀.₉₇₅(m−1)·s/√n ≤ target·x̄, between m and ``maximum``. It reads the first stage only, so later
    repeats cannot stop the run when their spread happens to look small (optional stopping); a
    first stage with a missing value plans ``maximum``."""
    vals = [v for v in first if v is not None]
    if len(vals) < 2 or len(vals) < len(first):
        return maximum
    m = len(vals)
    mean = sum(vals) / m
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (m - 1))
    if mean <= 0:
        return maximum
    need = math.ceil((t975(m - 1) * sd / (target * mean)) ** 2 - 1e-9)
    return min(maximum, max(m, need))


def two_stage_ci(values: Sequence[float | None], stage: int) -> tuple[float, float, float] | None:
    """Mean and 95% interval after a two-stage run: the wider of the Student-t interval over all n
    values and Stein's (x̄ₙ ± t₀.₉₇₅(m−1)·s_m/√n, s_m of the first ``stage`` values), whose coverage is
    exact for normal values whatever n the first stage chose."""
    vals = [v for v in values if v is not None]
    mc = mean_ci95(vals)
    if mc is None or len(vals) < len(values):
        return None
    half = (mc[2] - mc[1]) / 2
    first = vals[:stage]
    if len(first) >= 2:
        m1 = sum(first) / len(first)
        sd1 = math.sqrt(sum((v - m1) ** 2 for v in first) / (len(first) - 1))
        half = max(half, t975(len(first) - 1) * sd1 / math.sqrt(len(vals)))
    return mc[0], mc[0] - half, mc[0] + half


def ratio_ci95(values: Sequence[float | None], stage: int | None = None) -> tuple[float, float, float] | None:
    """A ratio's (a speedup's) centre and 95% interval over repeats, on the log scale: the Student-t
    interval of the log ratios (Stein's two-stage one with ``stage``), exponentiated. A ratio lives on
    (0, ∞) and 0.8× is as far below 1 as 1.25× is above: the interval never goes below 0 however far
    one start is off (three starts at 0.2×, 1.5× and 1.6×: [−0.84, 3.04] on the ratios, [0.04, 14.8] here).
    The centre is the geometric mean; a ratio of 0 or less (not a measured speed) gives none."""
    if any(v is not None and v <= 0 for v in values):
        return None
    logs = [None if v is None else math.log(v) for v in values]
    ci = two_stage_ci(logs, stage) if stage is not None else mean_ci95(logs)
    return None if ci is None else (math.exp(ci[0]), math.exp(ci[1]), math.exp(ci[2]))


def chi2_sf(x: float, df: int) -> float:
    """P(χ²_df ≥ x), in closed form for integer df (no scipy): the Poisson sum for even df, the
    normal tail plus the odd-df series otherwise."""
    if x <= 0:
        return 1.0
    half = x / 2
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for j in range(1, df // 2):
            term *= half / j
            total += term
        return min(1.0, math.exp(-half) * total)
    root = math.sqrt(x)
    total = math.erfc(root / math.sqrt(2))
    term = math.sqrt(2 * x / math.pi) * math.exp(-half)  # k = 1: x^{1/2} e^{-x/2} / Γ(3/2) / 2^{1/2}
    for k in range(1, (df + 1) // 2):
        total += term
        term *= x / (2 * k + 1)
    return min(1.0, total)


def cochran_q(log_values: Sequence[float], variances: Sequence[float]) -> tuple[float, int, float] | None:
    """Cochran's Q of per-pass log-speedups, each weighted by 1 ÷ its own within-pass variance:
    (Q, degrees of freedom, p). Null with fewer than two passes or a variance that is not positive."""
    if len(log_values) < 2 or len(log_values) != len(variances) or any(not v > 0 for v in variances):
        return None
    weights = [1 / v for v in variances]
    pooled = sum(w * y for w, y in zip(weights, log_values)) / sum(weights)
    q = sum(w * (y - pooled) ** 2 for w, y in zip(weights, log_values))
    df = len(log_values) - 1
    return q, df, chi2_sf(q, df)


def log_variance(low: float | None, high: float | None) -> float | None:
    """The variance of a log-ratio whose 95% interval is [low, high] (normal on the log scale)."""
    if low is None or high is None or low <= 0 or high <= low:
        return None
    return ((math.log(high) - math.log(low)) / (2 * _Z975)) ** 2


def heterogeneity(speedups: Sequence[float | None], intervals: Sequence[tuple[float | None, float | None]]) -> float | None:
    """The p-value of Cochran's Q over per-pass speedups and their within-pass 95% intervals; null
    when a pass lacks either (a flag needs every pass)."""
    logs, variances = [], []
    for s, (lo, hi) in zip(speedups, intervals):
        v = log_variance(lo, hi)
        if s is None or s <= 0 or v is None:
            return None
        logs.append(math.log(s))
        variances.append(v)
    result = cochran_q(logs, variances)
    return None if result is None else result[2]
