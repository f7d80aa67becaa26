"""Service-level objectives: which requests met the latency bounds (goodput), and the highest
Poisson request rate a config sustains while a percentile of each bounded metric stays within them
(capacity at the SLO) — the number hardware is bought with.

A request meets the SLO when it succeeded and every bounded metric is within its bound; a failed
request is a miss, never left out. TPOT is undefined for a one-token answer, so that bound does not
apply to it. The rate search probes a running server with the cell's prompts as an open loop
(seeded Poisson arrivals, no cap on requests in flight, so queueing shows): doubling (or halving)
from a start rate until one rate passes and one fails, then bisection, at most ``max_steps``
probes; the answer is the highest passing rate with the bracket [highest pass, lowest fail].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..schemas.row_quality import SloAttainment
from ..schemas.slo_search import SloSearch
from ..suite.objectives import Slo
from .latency import tpot

PROBE_PHASE = "slo_probe"
_MISS = 1e300  # a failed request's value: above any bound, finite so percentiles interpolate


# ---- per request and per cell ----------------------------------------------------------------

def request_values(rec: RequestRecord) -> dict[str, float | None]:
    """The bounded metrics of one successful request, in ms (TPOT None for a one-token answer)."""
    t = tpot(rec)
    assert rec.ttft is not None and rec.latency is not None  # a successful request has chunks
    return {"ttft_ms": rec.ttft * 1000, "tpot_ms": None if t is None else t * 1000, "latency_ms": rec.latency * 1000}


def meets(rec: RequestRecord, slo: Slo) -> bool:
    if not rec.ok:
        return False
    values = request_values(rec)
    return all((v := values[k]) is None or v <= bound for k, bound in slo.bounds().items())


def slo_summary(records: Sequence[RequestRecord], wall_s: float, slo: Slo | None) -> SloAttainment | None:
    """Share of the cell's requests (failed ones included) that met every bound, and those per
    second; None without an SLO (the row gets none of the keys)."""
    if slo is None:
        return None
    met = sum(1 for r in records if meets(r, slo))
    n = len(records)
    return SloAttainment(slo.bounds(), met / n if n else None, met, met / wall_s if n and wall_s > 0 else None)


def percentile_check(records: Sequence[RequestRecord], slo: Slo, percentile: float) -> tuple[bool, dict[str, float | None]]:
    """Whether the given percentile of each bounded metric is within its bound, failed requests
    counting as misses (an infinite value); the percentiles in ms (null where a miss decides it).

    The percentile is the empirical one (numpy ``inverted_cdf``): p99 ≤ bound exactly when at least
    99 % of the requests are within it, so one miss in 100 passes and two do not."""
    out: dict[str, float | None] = {}
    ok = bool(records)
    for key, bound in slo.bounds().items():
        values = []
        for r in records:
            if not r.ok:
                values.append(_MISS)
            elif (v := request_values(r)[key]) is not None:
                values.append(v)
        if not values:
            out[key] = None
            continue
        p = float(np.percentile(values, percentile, method="inverted_cdf"))
        out[key] = p if p < _MISS / 10 else None
        ok = ok and p <= bound
    return ok, out


# ---- results -----------------------------------------------------------------------------------

def attach_capacity(rows: list[ResultRow], searches: dict[str, dict[str, SloSearch]] | None, baseline: str | None) -> None:
    """Copy each config × data set's search result into its rows, with the capacity speed-up vs
    the baseline: the ratio of the highest passing rates, and the range its brackets allow."""
    if not searches:
        return
    for row in rows:
        found = (searches.get(row.run) or {}).get(row.dataset)
        if found is None or not found.keys():
            continue
        row.slo_search_percentile = found.percentile
        row.slo_max_rate_rps = found.max_rate_rps
        row.slo_max_rate_bracket = found.bracket
        row.slo_search_steps = found.steps
        base = (searches.get(baseline) or {}).get(row.dataset) if baseline else None
        row.slo_capacity_speedup = row.slo_capacity_speedup_range = None
        if base and found.max_rate_rps and base.max_rate_rps:
            row.slo_capacity_speedup = found.max_rate_rps / base.max_rate_rps
            (c_lo, c_hi), (b_lo, b_hi) = found.bracket or [None, None], base.bracket or [None, None]
            row.slo_capacity_speedup_range = [c_lo / b_hi if c_lo is not None and b_hi else None,
                                              c_hi / b_lo if c_hi and b_lo else None]
