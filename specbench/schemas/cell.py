"""The identity of a cell: config × data set × load point, where a load point is a concurrency *and*
a request rate.

Every place that groups, compares, resumes or gates cells builds its key here, so two request rates
at one concurrency cap (an open-loop sweep) can never fold into one cell; every place that names a
cell or a load point says it as ``str(cell)`` and ``LoadPoint.label``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .row import ResultRow


@dataclass(frozen=True)
class LoadPoint:
    """Closed loop: ``concurrency`` streams. Open loop: Poisson ``request_rate`` per second, with
    ``concurrency`` the cap on requests in flight (0 = none). A closed-loop point at concurrency 0 is
    a load not recorded (results written before rows carried one): labels and cell names leave it out.

    Also the x axis of every plot and table over load: ``kind`` and ``value`` are the axis, the cap
    keeps two caps at one rate two points."""

    concurrency: int
    request_rate: float | None = None

    @classmethod
    def of(cls, kind: str, value: float | None) -> LoadPoint:
        """A point as a tune or profile file keeps it, (kind, value): an open-loop point without its cap."""
        if kind == "rate" and value is not None:
            return cls(0, value)
        return cls(0 if value is None else int(value))

    @property
    def kind(self) -> str:
        return "rate" if self.request_rate is not None else "concurrency"

    @property
    def value(self) -> float | None:
        """The point on a load axis: the rate, else the concurrency; None when no load was recorded."""
        if self.request_rate is not None:
            return float(self.request_rate)
        return float(self.concurrency) if self.concurrency else None

    @property
    def recorded(self) -> bool:
        return self.value is not None

    @property
    def label(self) -> str:
        return load_label(self.kind, self.value)

    @property
    def columns(self) -> tuple[int | None, float | None]:
        """(concurrency, request_rate) as a results row writes them: an open-loop row keeps its cap in
        ``max_concurrency``, not in ``concurrency``; no load recorded is (None, None)."""
        if self.request_rate is not None:
            return None, self.request_rate
        return self.concurrency or None, None

    def sort_key(self) -> tuple[str, float, int]:
        return (self.kind, -1 if self.value is None else self.value,
                self.concurrency if self.request_rate is not None else 0)

    @property
    def uncapped(self) -> LoadPoint:
        """The point without its in-flight cap (a suite's load block gives one cap for all its rates)."""
        return LoadPoint(0, self.request_rate) if self.request_rate is not None else self


def load_label(kind: str, value: float | None) -> str:
    """The one label of a load point, in tables, plots, progress and errors: ``C=16`` or ``4 req/s``."""
    if value is None:
        return "load not recorded"
    return f"{value:g} req/s" if kind == "rate" else f"C={value:g}"


@dataclass(frozen=True)
class Cell:
    """The one identity of a cell, named ``config / dataset / C=8`` (``4 req/s`` open loop; no load part
    when none was recorded) in tables, warnings, errors, the gate and the comparison of two runs."""

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
        point = self.point
        return f"{self.config} / {self.dataset}" + (f" / {point.label}" if point.recorded else "")


def find_baseline(names: list[str], marked: list[str]) -> str | None:
    """The baseline among configs ``names``: the one marked ``baseline: true``, else the one named "baseline".

    The one rule for the suite, the report (from meta.json) and everything that divides by the baseline."""
    marked = [m for m in marked if m in names]
    if marked:
        return marked[0]
    return "baseline" if "baseline" in names else None


def unique(values: Iterable[Any]) -> list[Any]:
    """The distinct values in first-seen order (values need not be hashable)."""
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def load_of(r: ResultRow) -> LoadPoint:
    """A results row's load point (its cell's)."""
    return Cell.of_row(r).point
