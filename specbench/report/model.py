"""The report's data model: configs (colour, dash, order), cells and load points of a run."""

from __future__ import annotations

from collections.abc import Sequence

from ..schemas.cell import LoadPoint, load_of, unique
from ..schemas.meta import RunMeta, baseline_name
from ..schemas.row import ResultRow

#: baseline first (black), then the Okabe–Ito colours, which stay distinct under colour-vision deficiency
BASELINE_COLOUR = "#000000"
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
DASHES = ["", "7 4", "2 3", "9 3 2 3"]


class Model:
    """Rows grouped the way every plot needs them."""

    def __init__(self, rows: Sequence[ResultRow], meta: RunMeta | None) -> None:
        self.rows = list(rows)
        self.meta = meta
        self.baseline = baseline_name(self.rows, self.meta)
        self.configs = unique(r.run for r in self.rows)
        if self.baseline in self.configs:  # baseline first, then the suite's order
            self.configs.remove(self.baseline)
            self.configs.insert(0, self.baseline)
        self.spec_configs = [c for c in self.configs if c != self.baseline and not self._is_plain(c)]
        self.datasets = unique(r.dataset for r in self.rows)
        self.loads = sorted(unique(load_of(r) for r in self.rows), key=LoadPoint.sort_key)
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

    def row(self, config: str, dataset: str, load: LoadPoint) -> ResultRow | None:
        return next((r for r in self.rows if r.run == config and r.dataset == dataset
                     and load_of(r) == load), None)

    def loads_of(self, dataset: str) -> list[LoadPoint]:
        return [ld for ld in self.loads if any(r.dataset == dataset and load_of(r) == ld for r in self.rows)]

    def sweep_kind(self) -> str | None:
        """The load dimension swept with several values, if any."""
        for kind in ("concurrency", "rate"):
            if len([ld for ld in self.loads if ld.kind == kind and ld.value is not None]) > 1:
                return kind
        return None
