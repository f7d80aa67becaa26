"""Open-loop schedules are computed up front by a pure function: each mode's due times exactly, from its
definition (load/schedule.py's docstring) and the seed."""

import math
import random

import pytest

from specbench.load.schedule import ramp_inverse, ramp_rate, schedule
from specbench.schemas.request import Prompt, TraceLine
from specbench.suite.arrival import Arrival


def prompts(n: int) -> list[Prompt]:
    return [Prompt(id=f"p{i}", dataset="d", turns=(f"q{i}",)) for i in range(n)]


def cumulative(gaps: list[float]) -> list[float]:
    out, t = [0.0], 0.0
    for g in gaps:
        t += g
        out.append(t)
    return out


def test_poisson_draws_what_the_loop_drew_before_schedules_were_computed_up_front():
    rng = random.Random(7)
    assert schedule(Arrival(), 4.0, prompts(6), seed=7) == cumulative([rng.expovariate(4.0) for _ in range(5)])


def test_gamma_gaps_have_vllms_shape_and_scale():
    rng = random.Random(3)
    want = cumulative([rng.gammavariate(0.25, 1 / (8.0 * 0.25)) for _ in range(4)])
    assert schedule(Arrival("gamma", burstiness=0.25), 8.0, prompts(5), seed=3) == want


def test_gamma_keeps_the_mean_rate_and_burstiness_sets_the_spread():
    """20 000 seeded gaps: mean 1/rate; squared coefficient of variation 1/burstiness (2 here: burstier than Poisson)."""
    due = schedule(Arrival("gamma", burstiness=0.5), 10.0, prompts(20_001), seed=1)
    gaps = [b - a for a, b in zip(due, due[1:])]
    mean = sum(gaps) / len(gaps)
    var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
    assert mean == pytest.approx(0.1, rel=0.03) and var / mean**2 == pytest.approx(2.0, rel=0.05)


def test_every_schedule_starts_at_zero_and_never_goes_back():
    modes = [(Arrival(), 5.0), (Arrival("gamma", burstiness=0.1), 5.0),
             (Arrival("ramp", start=1.0, end=50.0, shape="exponential"), None),
             (Arrival("ramp", start=20.0, end=1.0, duration_s=3.0, burstiness=2.0), None)]
    for arrival, rate in modes:
        due = schedule(arrival, rate, prompts(200), seed=0)
        assert len(due) == 200 and due[0] == 0.0 and all(a <= b for a, b in zip(due, due[1:])), arrival


@pytest.mark.parametrize("shape", ["linear", "exponential"])
def test_a_ramp_over_the_pass_draws_each_gap_at_the_rate_its_request_reached(shape):
    arrival = Arrival("ramp", shape=shape, start=2.0, end=32.0)
    rates = [ramp_rate(arrival, i, 5) for i in range(5)]
    if shape == "linear":
        assert rates == [2.0, 9.5, 17.0, 24.5, 32.0]
    else:
        assert rates == pytest.approx([2.0, 4.0, 8.0, 16.0, 32.0])
    rng = random.Random(11)
    assert schedule(arrival, None, prompts(5), seed=11) == cumulative([rng.expovariate(r) for r in rates[1:]])


@pytest.mark.parametrize("shape,start,end", [("linear", 2.0, 12.0), ("linear", 12.0, 2.0), ("linear", 3.0, 3.0),
                                             ("exponential", 1.0, 16.0), ("exponential", 16.0, 1.0)])
def test_a_ramp_in_time_inverts_the_integral_of_its_rate(shape, start, end):
    """Λ(t) = ∫ rate: the ramp for duration_s, the end rate after it; due times are Λ⁻¹ of summed unit gaps."""
    arrival = Arrival("ramp", shape=shape, start=start, end=end, duration_s=4.0)

    def rate(t: float) -> float:
        if t >= 4.0:
            return end
        return start + (end - start) * t / 4 if shape == "linear" else start * (end / start) ** (t / 4)

    def integral(t: float, steps: int = 20_000) -> float:  # midpoint rule, independent of the closed forms
        h = t / steps
        return sum(rate((i + 0.5) * h) for i in range(steps)) * h

    for t in (0.3, 1.7, 3.99, 4.0, 6.5):
        assert ramp_inverse(arrival, integral(t)) == pytest.approx(t, rel=1e-6)
    rng = random.Random(5)
    sums = cumulative([rng.expovariate(1.0) for _ in range(6)])
    assert schedule(arrival, None, prompts(7), seed=5) == [ramp_inverse(arrival, s) for s in sums]


def test_a_ramp_in_time_arrives_at_its_rates():
    """From 1 to 20 req/s over 30 s, then 20: the count due by t is Λ(t) (seeded, 1 500 requests)."""
    arrival = Arrival("ramp", start=1.0, end=20.0, duration_s=30.0)
    due = schedule(arrival, None, prompts(1_500), seed=2)
    by_30 = sum(1 for t in due if t <= 30.0)
    assert by_30 == pytest.approx(30 * (1 + 20) / 2, rel=0.1)  # Λ(30) = 315
    late = [t for t in due if t > 40.0]
    assert (len(late) - 1) / (late[-1] - late[0]) == pytest.approx(20.0, rel=0.1)


def test_a_trace_is_due_at_its_lines_times_from_the_first_prompts():
    lines = [TraceLine(at_s=t, output_length=4, line=i + 1) for i, t in enumerate([2.0, 2.0, 2.5, 7.25])]
    ps = [Prompt(id=f"l{line.line}", dataset="d", turns=("x",), trace=line) for line in lines]
    assert schedule(Arrival("trace"), None, ps, seed=9) == [0.0, 0.0, 0.5, 5.25]
    with pytest.raises(ValueError, match="not a trace line"):
        schedule(Arrival("trace"), None, prompts(2), seed=0)


def test_no_prompts_no_schedule():
    assert schedule(Arrival(), 1.0, [], seed=0) == []
    assert math.isfinite(sum(schedule(Arrival("gamma", burstiness=1000.0), 100000.0, prompts(3), seed=0)))
