"""What ``specbench tune`` found, as typed records: per data set × family × load the ``KCell`` of
every K's ``Candidate``, per family the ``Schedule`` concurrency → K, all in a ``TuneResult``.

Stored in meta.json under ``tune.result`` and (the schedules) in schedule.json; read back by the
report and by ``tune --verify``. Each writes every key, null or not, in the order below, and a file
read back is written as it was (``schemas.record``), so both files stay what they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..schemas.cell import LoadPoint
from ..schemas.record import Record


@dataclass
class Candidate(Record):
    """One K of a cell; K = 0 is no speculation (the baseline itself)."""

    KEEP_NONE: ClassVar[bool] = True
    k: int
    speedup: float | None = None
    ci: tuple[float, float] | None = None  # 95% CI of the speedup vs the baseline
    vs_best_ci: tuple[float, float] | None = None  # 95% CI of its paired speed ratio to the best K


@dataclass
class KCell(Record):
    """One data set × family × load: every K's speedup, the best K and the Ks not told apart from it."""

    KEEP_NONE: ClassVar[bool] = True
    dataset: str = ""
    family: str = ""
    kind: str = "concurrency"
    load: float | None = None
    candidates: list[Candidate] = field(default_factory=list)
    best: int | None = None
    best_speedup: float | None = None
    best_ci: tuple[float, float] | None = None
    indistinguishable: list[int] = field(default_factory=list)

    @property
    def load_point(self) -> LoadPoint:
        return LoadPoint.of(self.kind, self.load)

    def by_k(self) -> dict[int, Candidate]:
        return {c.k: c for c in self.candidates}


@dataclass
class Schedule(Record):
    """One family's concurrency → K, as vLLM's per-batch-size ranges and the flag that serves them."""

    KEEP_NONE: ClassVar[bool] = True
    family: str = ""
    engine: str | None = None
    datasets: list[str] = field(default_factory=list)
    by_concurrency: dict[str, int] = field(default_factory=dict)
    ranges: list[list[int]] = field(default_factory=list)
    speculative_config: dict[str, Any] | None = None
    flag: str | None = None
    note: str = ""


@dataclass
class TuneResult(Record):
    KEEP_NONE: ClassVar[bool] = True
    method: str = ""
    cells: list[KCell] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)

    def ks(self) -> list[int]:
        """Every K measured in some cell, 0 included."""
        return sorted({c.k for cell in self.cells for c in cell.candidates})
