"""The stopping rule of adaptive repeats and the heterogeneity test (specbench/measure/spread.py)."""

import math

import numpy as np
import pytest

from specbench.measure.compare import mean_ci95, t975
from specbench.measure.spread import chi2_sf, cochran_q, heterogeneity, log_variance, planned_repeats, two_stage_ci
from specbench.suite.model import MIN_ADAPTIVE_REPEATS


@pytest.mark.parametrize(("x", "df", "p"), [(3.841459, 1, 0.05), (5.991465, 2, 0.05), (7.814728, 3, 0.05),
                                            (1.0, 1, 0.3173105), (2.0, 4, 0.7357589), (12.0, 7, 0.1005589)])
def test_chi2_sf_matches_tables(x, df, p):
    assert chi2_sf(x, df) == pytest.approx(p, rel=1e-5)


def test_cochran_q_by_hand():
    q, df, p = cochran_q([0.0, 0.1, 0.3], [0.01, 0.01, 0.04])
    pooled = (0 / 0.01 + 0.1 / 0.01 + 0.3 / 0.04) / (1 / 0.01 + 1 / 0.01 + 1 / 0.04)
    assert q == pytest.approx((0 - pooled) ** 2 / 0.01 + (0.1 - pooled) ** 2 / 0.01 + (0.3 - pooled) ** 2 / 0.04)
    assert df == 2 and p == pytest.approx(math.exp(-q / 2))


def test_heterogeneity_needs_every_pass_interval():
    assert heterogeneity([1.5, 1.6], [(1.4, 1.6), (None, None)]) is None
    assert log_variance(1.0, 1.0) is None
    assert heterogeneity([1.5, 1.5], [(1.4, 1.6), (1.4, 1.6)]) == pytest.approx(1.0)
    assert heterogeneity([1.5, 2.0], [(1.45, 1.55), (1.95, 2.05)]) < 1e-6


def test_planned_repeats_is_steins_count_between_the_first_stage_and_the_cap():
    first = [1.50, 1.53, 1.47]
    sd, mean = float(np.std(first, ddof=1)), float(np.mean(first))
    need = math.ceil((t975(2) * sd / (0.03 * mean)) ** 2)
    assert 3 < need < 10 and planned_repeats(first, 0.03, 10) == need
    assert planned_repeats(first, 0.03, 4) == 4
    assert planned_repeats([1.5, 1.5, 1.5], 0.03, 10) == 3
    assert planned_repeats([1.5, None, 1.5], 0.03, 10) == 10


def test_two_stage_ci_is_never_narrower_than_the_t_interval_or_steins():
    values = [1.50, 1.53, 1.47, 1.50, 1.50, 1.50]
    mean, lo, hi = two_stage_ci(values, 3)
    t = mean_ci95(values)
    stein = t975(2) * float(np.std(values[:3], ddof=1)) / math.sqrt(6)
    assert (hi - lo) / 2 == pytest.approx(max((t[2] - t[1]) / 2, stein))
    assert (hi - lo) / 2 > (t[2] - t[1]) / 2  # the later values' small spread does not narrow it


def coverage(sigma: float, target: float, maximum: int, sims: int, seed: int) -> float:
    """How often the reported interval holds the true mean speedup when the two-stage rule stops the run:
    per-start speedups log-normal around 1.5, the rule applied to each simulated run."""
    rng = np.random.default_rng(seed)
    truth = 1.5 * math.exp(sigma ** 2 / 2)
    stage, hits = MIN_ADAPTIVE_REPEATS, 0
    for _ in range(sims):
        values = list(1.5 * np.exp(rng.normal(0, sigma, stage)))
        n = planned_repeats(values, target, maximum)
        values += list(1.5 * np.exp(rng.normal(0, sigma, n - stage)))
        _, lo, hi = two_stage_ci(values, stage)
        hits += lo <= truth <= hi
    return hits / sims


@pytest.mark.parametrize("sigma", [0.01, 0.02, 0.03, 0.05, 0.1, 0.2])
def test_the_stopping_rule_keeps_the_interval_s_coverage(sigma):
    """Nominal 0.95; the simple rule "stop once the t-interval is narrow" fell to 0.91 (σ = 0.05, 4,000 runs) at a first
    stage of 3 (it stops on runs whose spread looked small by chance); the two-stage rule does not."""
    assert coverage(sigma, 0.03, 10, 1500, seed=7) >= 0.93


def test_the_check_catches_optional_stopping():
    """The same check on the naive rule (another repeat while the t-interval is wider than the target) fails."""
    rng = np.random.default_rng(7)
    truth, hits, sims = 1.5 * math.exp(0.05 ** 2 / 2), 0, 1500
    for _ in range(sims):
        values = list(1.5 * np.exp(rng.normal(0, 0.05, MIN_ADAPTIVE_REPEATS)))
        while len(values) < 10:
            mean, lo, hi = mean_ci95(values)
            if (hi - lo) / 2 / mean <= 0.03:
                break
            values.append(1.5 * math.exp(rng.normal(0, 0.05)))
        _, lo, hi = mean_ci95(values)
        hits += lo <= truth <= hi
    assert hits / sims < 0.93


def test_a_ratio_interval_is_on_the_log_scale_and_never_below_zero():
    """Three server starts where one is far off: the t-interval on the ratios went below 0
    ([−0.84, 3.04]); on the log scale it stays on (0, ∞) and ×/÷ symmetric about the geometric mean."""
    from specbench.measure.spread import ratio_ci95

    assert mean_ci95([0.2, 1.5, 1.6])[1] < 0
    centre, low, high = ratio_ci95([0.2, 1.5, 1.6])
    assert 0 < low < centre < high and centre == pytest.approx((0.2 * 1.5 * 1.6) ** (1 / 3))
    assert centre / low == pytest.approx(high / centre)
    steady = ratio_ci95([1.477, 1.485, 1.548])  # the H200 swing's second passes: close to the ratio-scale interval
    assert steady == pytest.approx((1.5030, 1.4101, 1.6021), abs=1e-3)
    assert ratio_ci95([1.2, None]) is None and ratio_ci95([1.2, 0.0, 1.1]) is None
