"""The plans of the derived suites, as meta.json holds them, and what a tune run chose: ``WhatifPlan``
(``meta.whatif``: each derived config's synthetic length, or what it replays of a profile), ``TunePlan``
(``meta.tune``: each derived config's family and K, and the ``TuneResult`` the run chose as it was written),
``ScheduleCheck`` (``meta.schedule``: ``tune --verify``'s schedule file) and ``ScheduleFile`` (schedule.json).

Written by ``run.whatif``/``run.replay``/``run.tune`` (the plans) and ``measure.best_k`` (the choice);
read back by ``measure`` and the report. Each is a ``Record``: a file read and written back is the same
bytes, and a fresh plan writes its keys in the order the dict-built plan had them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .cell import LoadPoint
from .record import Reader, Record

# ------------------------------------------------------------------------------ whatif


@dataclass
class PlannedConfig(Record):
    """One derived config of a whatif run: a ``SyntheticLength`` of the grid, or a ``ReplayedConfig`` of a
    profile (told apart by its ``dataset`` key when read)."""

    @classmethod
    def read(cls, data: Mapping[str, Any], reader: Reader, prefix: str = "") -> Any:
        if cls is PlannedConfig:
            return (ReplayedConfig if "dataset" in data else SyntheticLength).read(data, reader, prefix)
        return super().read(dict(data), reader, prefix)


@dataclass
class SyntheticLength(PlannedConfig):
    """A config of the grid: the real config ``of`` served at a synthetic mean acceptance length."""

    of: str | None = None
    acceptance_length: float | None = None
    k: int | None = None


@dataclass
class ProfileSpeedup(Record):
    """A profile entry's own measured speedup, at its load (both null: the profile does not say)."""

    KEEP_NONE: ClassVar[bool] = True
    concurrency: float | None = None
    request_rate: float | None = None
    speedup_vs_baseline: float | None = None
    ci: tuple[float, float] | None = None

    @property
    def load(self) -> LoadPoint:
        if self.request_rate is not None:
            return LoadPoint.of("rate", self.request_rate)
        return LoadPoint.of("concurrency", self.concurrency)


@dataclass
class ReplayedConfig(PlannedConfig):
    """A config replaying a profile's acceptance for one data set at its k, and the server settings that do."""

    KEEP_NONE: ClassVar[bool] = True
    of: str | None = None
    dataset: str | None = None
    k: int | None = None
    engine: str | None = None
    adapter: str | None = None
    mode: str | None = None  # "rates": every position (vLLM); "mean_length": the mean only (SGLang)
    acceptance_per_position: list[float] | None = None
    estimated_positions: list[int] = field(default_factory=list)
    acceptance_length: float | None = None
    replayed_length: float | None = None  # what the engine was asked for (SGLang DSPARK: rounded)
    profile_entries: list[int] = field(default_factory=list)
    profile_config: str | None = None
    pooled: str | None = None
    speculative: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    profile_speedups: list[ProfileSpeedup] = field(default_factory=list)


@dataclass
class ProfileRef(Record):
    """The profile file a replay read: where, its sha256, its format."""

    path: str | None = None
    sha256: str | None = None
    format: str | None = None


@dataclass
class WhatifPlan(Record):
    """``meta.whatif``: derived config → what it runs; ``profile`` set for a profile's replay."""

    configs: dict[str, PlannedConfig] = field(default_factory=dict)
    real: bool | None = None
    profile: ProfileRef | None = None
    skipped_datasets: list[str] | None = None
    suite: str | None = None

    @property
    def is_replay(self) -> bool:
        return self.profile is not None

    def lengths(self) -> dict[str, SyntheticLength]:
        return {n: c for n, c in self.configs.items() if isinstance(c, SyntheticLength)}

    def replayed(self) -> dict[str, ReplayedConfig]:
        return {n: c for n, c in self.configs.items() if isinstance(c, ReplayedConfig)}


# ------------------------------------------------------------------------------ tune


class _KeywordKey(Record):
    """A record with the key ``from`` (a Python keyword): the field ``from_`` holds it."""

    @classmethod
    def read(cls, data: Mapping[str, Any], reader: Reader, prefix: str = "") -> Any:
        return super().read({("from_" if k == "from" else k): v for k, v in data.items()}, reader, prefix)

    def to_dict(self) -> dict[str, object]:
        return {("from" if k == "from_" else k): v for k, v in super().to_dict().items()}


@dataclass
class TunedConfig(Record):
    family: str | None = None
    k: int | None = None


@dataclass
class TuneFamily(_KeywordKey):
    """Configs that differ only in K (``from``), and what serves them: the schedule's engine flag is built from it."""

    KEEP_NONE: ClassVar[bool] = True
    from_: list[str] = field(default_factory=list)
    engine: str | None = None
    adapter: str | None = None
    method: str | None = None
    drafter: str | None = None
    speculative: dict[str, Any] = field(default_factory=dict)


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
    """What a tune run chose (``measure.best_k``), stored in meta.json under ``tune.result``."""

    KEEP_NONE: ClassVar[bool] = True
    method: str = ""
    cells: list[KCell] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)

    def ks(self) -> list[int]:
        """Every K measured in some cell, 0 included."""
        return sorted({c.k for cell in self.cells for c in cell.candidates})


@dataclass
class TunePlan(Record):
    """``meta.tune``: the Ks, derived config → family and K, the families; ``result`` once the run is written."""

    ks: list[int] = field(default_factory=list)
    configs: dict[str, TunedConfig] = field(default_factory=dict)
    families: dict[str, TuneFamily] = field(default_factory=dict)
    suite: str | None = None
    result: TuneResult | None = None


@dataclass
class ScheduleFile(Record):
    """schedule.json: the schedules a tune run chose, and the suite they were tuned on."""

    suite: str | None = None
    run: str | None = None
    method: str | None = None
    schedules: list[Schedule] | None = None
    verify: str | None = None


@dataclass
class ScheduleCheck(_KeywordKey):
    """``meta.schedule``: the schedule file ``tune --verify`` re-measures (``from``)."""

    from_: str | None = None
