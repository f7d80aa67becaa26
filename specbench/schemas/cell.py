"""The identity of a cell: config × data set × load point, where a load point is a concurrency *and*
a request rate.

Every place that groups, compares, resumes or gates cells builds its key here, so two request rates
at one concurrency cap (an open-loop sweep) can never fold into one cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .meta import RunMeta
    from .row import ResultRow


@dataclass(frozen=True)
class LoadPoint:
    """Closed loop: ``concurrency`` streams. Open loop: Poisson ``request_rate`` per second, with
    ``concurrency`` the cap on requests in flight (0 = none)."""

    concurrency: int
    request_rate: float | None = None

    @property
    def label(self) -> str:
        return load_label("rate" if self.request_rate is not None else "concurrency",
                          self.request_rate if self.request_rate is not None else self.concurrency)


def load_label(kind: str, value: float | None) -> str:
    """The one label of a load point, in tables, plots, progress and errors: ``C=16`` or ``4 req/s``."""
    if value is None:
        return "load not recorded"
    return f"{value:g} req/s" if kind == "rate" else f"C={value:g}"


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


def baseline_name(records: Sequence[ResultRow], meta: RunMeta | None) -> str | None:
    """The suite's baseline: the config marked ``baseline: true``, else the one named "baseline"."""
    marked = [c["name"] for c in (meta.raw.configs if meta else None) or [] if c.get("baseline")
              and isinstance(c.get("name"), str)]
    found = find_baseline(unique(r.run for r in records), marked)
    return found or next((r.run for r in records if r.method == "baseline"), None)


@dataclass(frozen=True)
class Load:
    """A cell's load point as a plot axis sees it: closed-loop concurrency, or an open-loop request
    rate (with its in-flight cap, so two caps at one rate stay two points). Always taken from the
    row's or request's ``Cell``, the one identity of a cell."""

    kind: str  # "concurrency" | "rate"
    value: float | None
    cap: int | None = None

    @classmethod
    def of(cls, cell: Cell, recorded: bool = True) -> Load:
        if cell.request_rate is not None:
            return cls("rate", float(cell.request_rate), cell.concurrency)
        return cls("concurrency", float(cell.concurrency) if recorded else None)

    @property
    def label(self) -> str:
        return load_label(self.kind, self.value)

    def sort_key(self) -> tuple[str, float, int]:
        return (self.kind, -1 if self.value is None else self.value, self.cap or 0)

    @property
    def uncapped(self) -> Load:
        """The point without its in-flight cap (a suite's load block gives one cap for all its rates)."""
        return Load(self.kind, self.value)


def load_of(r: ResultRow) -> Load:
    return Load.of(Cell.of_row(r), recorded=r.request_rate is not None or r.concurrency is not None)


def load_of_request(r: Any) -> Load:
    """The load point of a request record (``request_rate`` set in open-loop phases)."""
    return Load.of(Cell.of_record(r))


def cell_where(r: ResultRow) -> str:
    """A row's cell as warnings and notes name it: ``run / dataset / C=2`` (no load part when none was recorded)."""
    load = load_of(r)
    return f"{r.run} / {r.dataset}" + (f" / {load.label}" if load.value is not None else "")
