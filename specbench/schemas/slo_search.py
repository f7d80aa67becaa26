"""meta.json ``slo_search``: the SLO capacity search's result per config and data set
(``run.rate_search``), which ``measure.slo.attach_capacity`` copies into the rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .record import Record, key


@dataclass
class SloProbe(Record):
    """One probe at ``rate`` req/s: whether the percentile of each bounded metric held. The
    percentiles themselves are under a key named by the percentile (``p99_ms``: metric → ms, null
    where a miss decides it), kept as read (``unknown``) in its place after ``ok``."""

    rate: float | None = key("the probe's arrival rate, req/s")
    ok: bool | None = key('every bounded percentile held')
    requests: int | None = key('requests the probe sent')
    failed: int | None = key('of them failed')
    wall_s: float | None = key("the probe's wall time, s")


@dataclass
class SloSearch(Record):
    """The highest passing rate probed (null if none passed) and the bracket [highest pass, lowest
    fail] (an end null when no probe bounded it); every key is written, null or not."""

    KEEP_NONE: ClassVar[bool] = True

    percentile: float | None = key("the SLO's percentile (99: p99)")
    max_rate_rps: float | None = key('the highest passing rate probed, req/s (null: none passed)')
    bracket: list[float | None] | None = key('[highest pass, lowest fail], req/s (an end null where no probe bounded it)')
    steps: int | None = key('probes run')
    converged: bool | None = key("the bracket narrowed to the search's tolerance")
    interrupted: bool | None = key('cut by a stop')
    probes: list[SloProbe] | None = key('each probe, in the order run')
    slo: dict[str, float] | None = key('the SLO: metric → bound, ms')
