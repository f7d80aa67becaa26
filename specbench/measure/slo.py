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

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SuiteError
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from .latency import tpot

SLO_KEYS = ("ttft_ms", "tpot_ms", "latency_ms")
PROBE_PHASE = "slo_probe"
PROBES_FILE = "slo_probes.jsonl"
_MISS = 1e300  # a failed request's value: above any bound, finite so percentiles interpolate


@dataclass(frozen=True)
class Slo:
    """Upper bounds in milliseconds; None = not bounded."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_ms: float | None = None

    def bounds(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in SLO_KEYS if getattr(self, k) is not None}

    def describe(self) -> str:
        names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}
        return ", ".join(f"{names[k]} ≤ {v:g} ms" for k, v in self.bounds().items())


@dataclass(frozen=True)
class RateSearch:
    """``--max-rate-at-slo``: which percentile must meet the SLO, and how long to search."""

    percentile: float = 99.0
    max_steps: int = 8
    start_rate: float = 1.0
    tolerance: float = 0.05  # stop bisecting once lowest fail ÷ highest pass − 1 is this small

    @property
    def label(self) -> str:
        return f"p{self.percentile:g}"


def _positive(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def parse_slo(value: Any, where: str, problems: list[str]) -> Slo | None:
    """``load.slo``: a mapping with any of ttft_ms, tpot_ms, latency_ms (positive numbers)."""
    if not isinstance(value, dict) or not value:
        problems.append(f"{where}: expected a mapping with at least one of {', '.join(SLO_KEYS)}, got {value!r}")
        return None
    clean: dict[str, float] = {}
    for key, bound in value.items():
        if key not in SLO_KEYS:
            problems.append(f"{where}.{key}: unknown key (allowed: {', '.join(SLO_KEYS)})")
        elif not _positive(bound):
            problems.append(f"{where}.{key}: expected a positive number of milliseconds, got {bound!r}")
        else:
            clean[key] = float(bound)
    return Slo(**clean) if len(clean) == len(value) else None


def parse_percentile(value: Any) -> float:
    """``p99``, ``P99``, ``99`` or 99.9 → the percentile (0 < p ≤ 100); ValueError otherwise."""
    text = str(value).strip()
    if isinstance(value, bool) or not text:
        raise ValueError(f"expected a percentile such as p99, got {value!r}")
    try:
        p = float(text[1:] if text[0] in "pP" else text)
    except ValueError:
        raise ValueError(f"expected a percentile such as p99, got {value!r}") from None
    if not 0 < p <= 100:
        raise ValueError(f"expected a percentile between 0 and 100, got {value!r}")
    return p


def parse_search(value: Any, where: str, problems: list[str]) -> RateSearch | None:
    """``load.max_rate_at_slo``: ``p99``, or {percentile, max_steps, start_rate, tolerance}."""
    raw = value if isinstance(value, dict) else {"percentile": value}
    allowed = ("percentile", "max_steps", "start_rate", "tolerance")
    out: dict[str, Any] = {}
    for key, v in raw.items():
        at = f"{where}.{key}" if isinstance(value, dict) else where
        if key not in allowed:
            problems.append(f"{at}: unknown key (allowed: {', '.join(allowed)})")
        elif key == "percentile":
            try:
                out[key] = parse_percentile(v)
            except ValueError as err:
                problems.append(f"{at}: {err}")
        elif key == "max_steps":
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 50:
                problems.append(f"{at}: expected an integer from 2 to 50, got {v!r}")
            else:
                out[key] = v
        elif not _positive(v) or (key == "tolerance" and v >= 1):
            problems.append(f"{at}: expected a positive number{' below 1' if key == 'tolerance' else ''}, got {v!r}")
        else:
            out[key] = float(v)
    return RateSearch(**out) if len(out) == len(raw) else None


def with_rate_search(suite, percentile: str):
    """The suite with ``--max-rate-at-slo P`` applied (its other search settings kept)."""
    from dataclasses import replace

    if suite.load.slo is None:
        raise SuiteError(f"{suite.path}: load.slo: required by --max-rate-at-slo (give ttft_ms, tpot_ms and/or latency_ms)")
    try:
        p = parse_percentile(percentile)
    except ValueError as err:
        raise SuiteError(f"--max-rate-at-slo: {err}") from None
    search = replace(suite.load.rate_search or RateSearch(), percentile=p)
    return replace(suite, load=replace(suite.load, rate_search=search))


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


def slo_summary(records: Sequence[RequestRecord], wall_s: float, slo: Slo | None) -> dict[str, Any]:
    """Share of the cell's requests (failed ones included) that met every bound, and those per second."""
    if slo is None:
        return {}
    met = sum(1 for r in records if meets(r, slo))
    n = len(records)
    return {"slo": slo.bounds(), "slo_attainment": met / n if n else None, "slo_met_requests": met,
            "goodput_rps": met / wall_s if n and wall_s > 0 else None}


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


# ---- the search --------------------------------------------------------------------------------

ProbeFn = Callable[[float], Awaitable[dict[str, Any] | None]]


async def search_max_rate(probe: ProbeFn, search: RateSearch) -> dict[str, Any]:
    """Doubling (or halving) until a rate passes and one fails, then bisection between them.

    ``probe(rate)`` returns a dict with at least ``ok`` (or None when the run was stopped). The
    result's ``max_rate_rps`` is the highest passing rate probed (null if none passed) and
    ``bracket`` [highest pass, lowest fail] (an end is null when no probe bounded it)."""
    probes: list[dict[str, Any]] = []
    lo = hi = None
    rate = search.start_rate
    interrupted = False
    for _ in range(search.max_steps):
        result = await probe(rate)
        if result is None:
            interrupted = True
            break
        probes.append({"rate": rate, **result})
        if result["ok"]:
            lo = rate if lo is None else max(lo, rate)
        else:
            hi = rate if hi is None else min(hi, rate)
        if hi is None:
            rate *= 2
        elif lo is None:
            rate /= 2
        elif hi / lo - 1 <= search.tolerance:
            break
        else:
            rate = (lo + hi) / 2
    return {"percentile": search.percentile, "max_rate_rps": lo, "bracket": [lo, hi], "steps": len(probes),
            "converged": lo is not None and hi is not None and hi / lo - 1 <= search.tolerance,
            "interrupted": interrupted, "probes": probes}


async def search_server(*, url: str, client: str, spec, prompts, config: str, slo: Slo, search: RateSearch,
                        seed: int, stop, grace_s: float, on_probe: Callable[[dict, list[RequestRecord]], None],
                        on_record: Callable[[RequestRecord], None] | None = None,
                        on_start: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Run the search against one server with ``prompts`` as each probe's workload."""
    from ..client import close_transport, open_transport
    from ..load.generate import LoadPass, generate_load

    async def probe(rate: float) -> dict[str, Any] | None:
        if stop is not None and stop.is_set():
            return None
        if on_start:
            on_start(rate)
        transport = open_transport(url, client)
        try:
            res = await generate_load(transport, spec, prompts, LoadPass(config, PROBE_PHASE, 0, rate, seed=seed),
                                      on_record=on_record, stop=stop, grace_s=grace_s)
        finally:
            await close_transport(transport)
        if stop is not None and stop.is_set():
            return None
        ok, pcts = percentile_check(res.records, slo, search.percentile)
        summary = {"ok": ok, f"{search.label}_ms": pcts, "requests": len(res.records),
                   "failed": sum(1 for r in res.records if not r.ok), "wall_s": res.wall_s}
        on_probe({"rate": rate, **summary}, res.records)
        return summary

    out = await search_max_rate(probe, search)
    out["slo"] = slo.bounds()
    return out


# ---- results -----------------------------------------------------------------------------------

def attach_capacity(rows: list[ResultRow], searches: dict[str, dict[str, Any]] | None, baseline: str | None) -> None:
    """Copy each config × data set's search result into its rows, with the capacity speed-up vs
    the baseline: the ratio of the highest passing rates, and the range its brackets allow."""
    if not searches:
        return
    for row in rows:
        found = (searches.get(row.run) or {}).get(row.dataset)
        if not found:
            continue
        row.slo_search_percentile = found.get("percentile")
        row.slo_max_rate_rps = found.get("max_rate_rps")
        row.slo_max_rate_bracket = found.get("bracket")
        row.slo_search_steps = found.get("steps")
        base = (searches.get(baseline) or {}).get(row.dataset) if baseline else None
        row.slo_capacity_speedup = row.slo_capacity_speedup_range = None
        if base and found.get("max_rate_rps") and base.get("max_rate_rps"):
            row.slo_capacity_speedup = found["max_rate_rps"] / base["max_rate_rps"]
            (c_lo, c_hi), (b_lo, b_hi) = found["bracket"], base["bracket"]
            row.slo_capacity_speedup_range = [c_lo / b_hi if b_hi else None, c_hi / b_lo if c_hi else None]
