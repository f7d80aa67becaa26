"""The identity of a cell: config × data set × load point, where a load point is a concurrency *and*
a request rate.

Every place that groups, compares, resumes or gates cells builds its key here, so two request rates
at one concurrency cap (an open-loop sweep) can never fold into one cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .row import ResultRow


@dataclass(frozen=True)
class LoadPoint:
    """Closed loop: ``concurrency`` streams. Open loop: Poisson ``request_rate`` per second, with
    ``concurrency`` the cap on requests in flight (0 = none)."""

    concurrency: int
    request_rate: float | None = None

    @property
    def label(self) -> str:
        return f"rate {self.request_rate:g}/s" if self.request_rate is not None else f"c={self.concurrency}"


@dataclass(frozen=True)
class Cell:
    config: str
    dataset: str
    concurrency: int
    request_rate: float | None = None

    @classmethod
    def at(cls, config: str, dataset: str, point: LoadPoint) -> Cell:
        return cls(config, dataset, point.concurrency, point.request_rate)

    @classmethod
    def of_phase(cls, phase: Any) -> Cell:
        """A ``PhaseInfo`` or its dict in phases.jsonl."""
        get: Callable[[str], Any] = phase.get if isinstance(phase, Mapping) else lambda k: getattr(phase, k)
        return cls(get("config"), get("dataset"), get("concurrency"), get("request_rate"))

    @classmethod
    def of_record(cls, record: Any) -> Cell:
        return cls(record.config, record.dataset, record.concurrency or 0, getattr(record, "request_rate", None))

    @classmethod
    def of_row(cls, row: ResultRow) -> Cell:
        """A results row: an open-loop row keeps its cap in ``max_concurrency`` (``concurrency`` is null)."""
        rate = row.request_rate
        conc = row.max_concurrency if rate is not None else row.concurrency
        return cls(row.run, row.dataset, conc or 0, rate)

    @property
    def point(self) -> LoadPoint:
        return LoadPoint(self.concurrency, self.request_rate)

    def with_config(self, config: str) -> Cell:
        return replace(self, config=config)

    def __str__(self) -> str:
        return f"{self.config} / {self.dataset} / {self.point.label}"
