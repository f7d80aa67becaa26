"""The capacity search (``--max-rate-at-slo``): probe a running server with open-loop Poisson load,
doubling (or halving) the rate until one passes and one fails, then bisecting; which rate passes is
decided by ``measure.slo.percentile_check``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..client import close_transport, open_transport
from ..load.generate import LoadPass, generate_load
from ..measure.slo import PROBE_PHASE, percentile_check
from ..schemas.request import RequestRecord
from ..schemas.slo_search import SloProbe, SloSearch
from ..suite.objectives import RateSearch, Slo

ProbeFn = Callable[[float], Awaitable[SloProbe | None]]


async def search_max_rate(probe: ProbeFn, search: RateSearch) -> SloSearch:
    """Doubling (or halving) until a rate passes and one fails, then bisection between them.

    ``probe(rate)`` returns the probe (or None when the run was stopped). The result's
    ``max_rate_rps`` is the highest passing rate probed (null if none passed) and ``bracket``
    [highest pass, lowest fail] (an end is null when no probe bounded it)."""
    probes: list[SloProbe] = []
    lo = hi = None
    rate = search.start_rate
    interrupted = False
    for _ in range(search.max_steps):
        result = await probe(rate)
        if result is None:
            interrupted = True
            break
        probes.append(result)
        if result.ok:
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
    return SloSearch(search.percentile, lo, [lo, hi], len(probes),
                     lo is not None and hi is not None and hi / lo - 1 <= search.tolerance, interrupted, probes)


async def search_server(*, url: str, client: str, spec, prompts, config: str, slo: Slo, search: RateSearch,
                        seed: int, stop, grace_s: float, on_probe: Callable[[SloProbe, list[RequestRecord]], None],
                        on_record: Callable[[RequestRecord], None] | None = None,
                        on_start: Callable[[float], None] | None = None) -> SloSearch:
    """Run the search against one server with ``prompts`` as each probe's workload."""
    async def probe(rate: float) -> SloProbe | None:
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
        found = SloProbe.from_dict({"rate": rate, "ok": ok, f"{search.label}_ms": pcts, "requests": len(res.records),
                                    "failed": sum(1 for r in res.records if not r.ok), "wall_s": res.wall_s}, "probe")
        on_probe(found, res.records)
        return found

    out = await search_max_rate(probe, search)
    out.slo = slo.bounds()
    return out
