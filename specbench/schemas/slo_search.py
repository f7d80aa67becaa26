"""meta.json ``slo_search``: the SLO capacity search's result per config and data set
(``run.rate_search``), which ``measure.slo.attach_capacity`` copies into the rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .record import Record


@dataclass
class SloProbe(Record):
    """One probe at ``rate`` req/s: whether the percentile of each bounded metric held. The
    percentiles themselves are under a key named by the percentile (``p99_ms``: metric → ms, null
    where a miss decides it), kept as read (``unknown``) in its place after ``ok``."""

    rate: float | None = None
    ok: bool | None = None
    requests: int | None = None
    failed: int | None = None
    wall_s: float | None = None


@dataclass
class SloSearch(Record):
    """The highest passing rate probed (null if none passed) and the bracket [highest pass, lowest
    fail] (an end null when no probe bounded it); every key is written, null or not."""

    KEEP_NONE: ClassVar[bool] = True

    percentile: float | None = None
    max_rate_rps: float | None = None
    bracket: list[float | None] | None = None
    steps: int | None = None
    converged: bool | None = None
    interrupted: bool | None = None
    probes: list[SloProbe] | None = None
    slo: dict[str, float] | None = None
