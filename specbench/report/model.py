"""The report's data model: configs (colour, dash, order), cells and load points of a run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schemas.cell import Cell
from ..schemas.row import ResultRow
from ..suite import find_baseline

Record = ResultRow

#: baseline first (black), then the Okabe–Ito colours, which stay distinct under colour-vision deficiency
BASELINE_COLOUR = "#000000"
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
DASHES = ["", "7 4", "2 3", "9 3 2 3"]


def unique(values: Iterable[Any]) -> list[Any]:
    """The distinct values in first-seen order (values need not be hashable)."""
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def baseline_name(records: Sequence[Record], meta: dict[str, Any] | None) -> str | None:
    """The suite's baseline: the config marked ``baseline: true``, else the one named "baseline"."""
    raw = (((meta or {}).get("suite") or {}).get("raw") or {})
    marked = [c["name"] for c in raw.get("configs") or [] if isinstance(c, dict) and c.get("baseline")
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
        if self.value is None:
            return "load not recorded"
        if self.kind == "rate":
            return f"{self.value:g} req/s"
        return f"c={self.value:g}"

    def sort_key(self) -> tuple:
        return (self.kind, -1 if self.value is None else self.value, self.cap or 0)

    @property
    def uncapped(self) -> Load:
        """The point without its in-flight cap (a suite's load block gives one cap for all its rates)."""
        return Load(self.kind, self.value)


def load_of(r: Record) -> Load:
    return Load.of(Cell.of_row(r), recorded=r.request_rate is not None or r.concurrency is not None)


def load_of_request(r: Any) -> Load:
    """The load point of a request record (``request_rate`` set in open-loop phases)."""
    return Load.of(Cell.of_record(r))


class Model:
    """Records grouped the way every plot needs them."""

    def __init__(self, records: Sequence[Record], meta: dict[str, Any] | None) -> None:
        self.rows = list(records)
        self.meta = meta or {}
        self.baseline = baseline_name(self.rows, self.meta)
        self.configs = unique(r.run for r in self.rows)
        if self.baseline in self.configs:  # baseline first, then the suite's order
            self.configs.remove(self.baseline)
            self.configs.insert(0, self.baseline)
        self.spec_configs = [c for c in self.configs if c != self.baseline and not self._is_plain(c)]
        self.datasets = unique(r.dataset for r in self.rows)
        self.loads = sorted(unique(load_of(r) for r in self.rows), key=Load.sort_key)
        self.colour = {}
        self.dash = {}
        i = 0
        for c in self.configs:
            if c == self.baseline:
                self.colour[c], self.dash[c] = BASELINE_COLOUR, ""
            else:
                self.colour[c] = PALETTE[i % len(PALETTE)]
                self.dash[c] = DASHES[(i // len(PALETTE)) % len(DASHES)]
                i += 1

    def _is_plain(self, config: str) -> bool:
        rows = [r for r in self.rows if r.run == config]
        return all(r.method == "baseline" and r.num_speculative_tokens is None for r in rows)

    def row(self, config: str, dataset: str, load: Load) -> Record | None:
        return next((r for r in self.rows if r.run == config and r.dataset == dataset
                     and load_of(r) == load), None)

    def loads_of(self, dataset: str) -> list[Load]:
        return [ld for ld in self.loads if any(r.dataset == dataset and load_of(r) == ld for r in self.rows)]

    def sweep_kind(self) -> str | None:
        """The load dimension swept with several values, if any."""
        for kind in ("concurrency", "rate"):
            if len([ld for ld in self.loads if ld.kind == kind and ld.value is not None]) > 1:
                return kind
        return None
