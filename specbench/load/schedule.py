"""When each request of an open-loop pass is due: offsets in seconds from the pass's start, computed up
front from the suite's arrival process (``suite/arrival.py``) and the pass's seed, so the schedule is a
pure function of its inputs (tested exactly) and the client only has to keep to it.

- Poisson: exponential gaps at the rate, ``random.Random(seed).expovariate`` — the same draws, in the
  same order, as before schedules were computed up front.
- gamma: gaps Gamma(shape = burstiness, scale = 1 / (rate · burstiness)), mean 1 / rate, as vLLM's
  ``vllm bench serve --burstiness`` draws them (``get_request`` in its serve module).
- ramp over the pass's requests: the gap before request i of n (i ≥ 1) drawn at the rate reached at
  progress i / (n − 1), linear start + (end − start)·p or exponential start·(end / start)^p — vLLM's
  ``--ramp-up-strategy`` rates.
- ramp over ``duration_s``: a non-homogeneous process by time rescaling: unit-mean gaps (exponential, or
  gamma with the burstiness) summed to S, each request due at Λ⁻¹(S), where Λ is the integral of the
  rate (the ramp, then the end rate after the duration).
- trace: each prompt's own line time, counted from the first prompt's.

The first request is due at 0 in every mode; the pass starts when it is sent.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from ..schemas.request import Prompt
from ..suite.arrival import Arrival


def schedule(arrival: Arrival, rate: float | None, prompts: Sequence[Prompt], seed: int) -> list[float]:
    """Each prompt's due time, seconds after the pass's first request (non-decreasing, first 0)."""
    n = len(prompts)
    if n == 0:
        return []
    if arrival.kind == "trace":
        return trace_offsets(prompts)
    rng = random.Random(seed)
    if arrival.kind == "ramp":
        assert arrival.start is not None and arrival.end is not None  # checked where the suite is read
        if arrival.duration_s:
            return ramp_in_time(rng, arrival, n)
        return _cumulative([_gap(rng, ramp_rate(arrival, i, n), arrival.burstiness) for i in range(1, n)])
    if rate is None:
        raise ValueError("an open-loop schedule needs a rate")
    burstiness = arrival.burstiness if arrival.kind == "gamma" else 1.0
    return _cumulative([_gap(rng, rate, burstiness) for _ in range(1, n)])


def _gap(rng: random.Random, rate: float, burstiness: float) -> float:
    """One gap of mean 1 / rate: exponential (burstiness 1, the Poisson draws), else gamma of that shape."""
    if burstiness == 1.0:
        return rng.expovariate(rate)
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))


def _cumulative(gaps: Sequence[float]) -> list[float]:
    out, t = [0.0], 0.0
    for g in gaps:
        t += g
        out.append(t)
    return out


def ramp_rate(arrival: Arrival, i: int, n: int) -> float:
    """The rate request i of n arrives at, on a ramp over the pass's requests."""
    start, end = float(arrival.start or 0.0), float(arrival.end or 0.0)
    progress = i / max(n - 1, 1)
    if arrival.shape == "exponential":
        return start * (end / start) ** progress
    return start + (end - start) * progress


def ramp_in_time(rng: random.Random, arrival: Arrival, n: int) -> list[float]:
    """Due times of a ramp over ``duration_s`` seconds: unit-mean gaps mapped through Λ⁻¹."""
    total, out = 0.0, [0.0]
    for _ in range(1, n):
        total += _gap(rng, 1.0, arrival.burstiness)
        out.append(ramp_inverse(arrival, total))
    return out


def ramp_inverse(arrival: Arrival, s: float) -> float:
    """The time t at which Λ(t) = ∫₀ᵗ rate = ``s``: the expected count of arrivals by t reaches s."""
    a, b, d = float(arrival.start or 0.0), float(arrival.end or 0.0), float(arrival.duration_s or 0.0)
    exponential = arrival.shape == "exponential" and not math.isclose(a, b)
    k = math.log(b / a) / d if exponential else 0.0
    whole = a * (math.exp(k * d) - 1) / k if exponential else d * (a + b) / 2  # Λ(d)
    if s >= whole:
        return d + (s - whole) / b
    if exponential:
        return math.log1p(k * s / a) / k
    # a·t + (b − a)·t² / (2d) = s, in the form that needs no division by b − a
    return 2 * s / (a + math.sqrt(a * a + 2 * (b - a) * s / d))


def trace_offsets(prompts: Sequence[Prompt]) -> list[float]:
    """A trace's prompts: each line's time, counted from the first prompt's (a pass may start past line 1)."""
    times = []
    for p in prompts:
        if p.trace is None:
            raise ValueError(f"prompt {p.id!r} is not a trace line: a trace pass sends only the trace's requests")
        times.append(p.trace.at_s)
    return [t - times[0] for t in times]
