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
from dataclasses import dataclass
from typing import Any, ClassVar

from .cell import LoadPoint
from .record import Reader, Record, key
from .run_files import META, SCHEDULE

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

    of: str | None = key("the suite's config it is derived from")
    acceptance_length: float | None = key("the synthetic mean acceptance length L it is served at (tokens per step, "
                                          "1 to k+1)")
    k: int | None = key("its num_speculative_tokens (draft positions)")


@dataclass
class ProfileSpeedup(Record):
    """A profile entry's own measured speedup, at its load (both null: the profile does not say)."""

    KEEP_NONE: ClassVar[bool] = True
    concurrency: float | None = key("the entry's concurrency (null: open loop, or no load stated)")
    request_rate: float | None = key("the entry's arrival rate in req/s (null: closed loop)")
    speedup_vs_baseline: float | None = key("the speedup vs the baseline the profile measured (null: not said)")
    ci: tuple[float, float] | None = key("its 95% CI [low, high] (null: not said)")

    @property
    def load(self) -> LoadPoint:
        if self.request_rate is not None:
            return LoadPoint.of("rate", self.request_rate)
        return LoadPoint.of("concurrency", self.concurrency)


@dataclass
class ReplayedConfig(PlannedConfig):
    """A config replaying a profile's acceptance for one data set at its k, and the server settings that do."""

    KEEP_NONE: ClassVar[bool] = True
    of: str | None = key("the suite's config it replays the profile on")
    dataset: str | None = key("the one data set it runs")
    k: int | None = key("the config's num_speculative_tokens: the profile's entry is chosen at this k")
    engine: str | None = key("the engine (launcher) that serves it")
    adapter: str | None = key("the engine's adapter: vllm, sglang")
    mode: str | None = key('"rates": every position replayed (vLLM); "mean_length": the mean length only (SGLang)')
    acceptance_per_position: list[float] | None = key("the profile's p_1..p_k replayed (1-based, unconditional; "
                                                      "pooled where it has several loads)")
    estimated_positions: list[int] = key("1-based positions the profile filled by its fill_rule, not measured",
                                         factory=list)
    acceptance_length: float | None = key("the profile's mean acceptance length, 1 + Σ p (tokens per step)")
    replayed_length: float | None = key("the mean length the engine was asked for (SGLang DSPARK: rounded to "
                                        "whole drafts)")
    profile_entries: list[int] = key("the indexes in the profile's profiles list it was taken from", factory=list)
    profile_config: str | None = key("the profile's config those entries are of")
    pooled: str | None = key("how several loads' entries were combined (null: one entry)")
    speculative: dict[str, Any] = key("the speculative settings it sets on its server (vLLM)", factory=dict)
    env: dict[str, str] = key("the environment it sets on its server (SGLang)", factory=dict)
    note: str | None = key("what the replay does not reproduce (SGLang: the per-position shape; DSPARK's rounding)")
    profile_speedups: list[ProfileSpeedup] = key("each profile entry's own measured speedup, at its load",
                                                 factory=list)


@dataclass
class ProfileRef(Record):
    """The profile file a replay read: where, its sha256, its format."""

    path: str | None = key("the profile file's absolute path")
    sha256: str | None = key("the sha256 of its bytes")
    format: str | None = key('its format ("specbench-profile/1")')


@dataclass
class WhatifPlan(Record):
    """``meta.whatif``: derived config → what it runs; ``profile`` set for a profile's replay."""

    FILE: ClassVar[str] = f"{META} whatif"
    configs: dict[str, PlannedConfig] = key("derived config → its synthetic length (a grid) or what it replays of "
                                            "the profile", factory=dict)
    real: bool | None = key("the unmodified speculative configs run too (false: --no-real)")
    profile: ProfileRef | None = key("the profile file replayed (null: a grid of synthetic lengths)")
    skipped_datasets: list[str] | None = key("the suite's data sets the profile has no entry for: not run")
    suite: str | None = key("the suite file the derived suite was expanded from")

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
    """One derived config of a tune run: a family served at one K."""

    family: str | None = key("the family it belongs to (a key of ``families``)")
    k: int | None = key("the number of draft tokens K it is served with")


@dataclass
class TuneFamily(_KeywordKey):
    """Configs that differ only in K (``from``), and what serves them: the schedule's engine flag is built from it."""

    KEEP_NONE: ClassVar[bool] = True
    from_: list[str] = key("the suite's configs in the family (they differ only in K)", factory=list)
    engine: str | None = key("the engine (launcher) that serves it")
    adapter: str | None = key("the engine's adapter: vllm, sglang (only vllm has a per-batch-size K flag)")
    method: str | None = key("the speculative method")
    drafter: str | None = key("the drafter model (null: none, e.g. ngram)")
    speculative: dict[str, Any] = key("its speculative settings, the K keys left out", factory=dict)


@dataclass
class Candidate(Record):
    """One K of a cell; K = 0 is no speculation (the baseline itself)."""

    KEEP_NONE: ClassVar[bool] = True
    k: int = key("the number of draft tokens (0: the baseline)", required=True)
    speedup: float | None = key("its speedup vs the baseline (K=0: 1.0; null: its cell did not finish ok)")
    ci: tuple[float, float] | None = key("95% CI of the speedup vs the baseline (null: none)")
    vs_best_ci: tuple[float, float] | None = key("95% CI of its paired speed ratio to the best K (null: the best "
                                                 "itself, K=0 either side, or no requests.jsonl)")


@dataclass
class KCell(Record):
    """One data set × family × load: every K's speedup, the best K and the Ks not told apart from it."""

    KEEP_NONE: ClassVar[bool] = True
    dataset: str = key("the data set", default="")
    family: str = key("the family (a key of the plan's ``families``)", default="")
    kind: str = key('the kind of load: "concurrency" (closed loop) or "rate" (open loop)', default="concurrency")
    load: float | None = key("the concurrency, or the arrival rate in req/s (null: no load recorded)")
    candidates: list[Candidate] = key("every K measured here, K=0 (the baseline) first where it finished",
                                      factory=list)
    best: int | None = key("the K with the highest speedup, a tie to the smaller K (null: none measured)")
    best_speedup: float | None = key("the best K's speedup vs the baseline")
    best_ci: tuple[float, float] | None = key("the best K's 95% speedup CI")
    indistinguishable: list[int] = key("the other Ks not told apart from the best (TuneResult.method says how)",
                                       factory=list)

    @property
    def load_point(self) -> LoadPoint:
        return LoadPoint.of(self.kind, self.load)

    def by_k(self) -> dict[int, Candidate]:
        return {c.k: c for c in self.candidates}


@dataclass
class Schedule(Record):
    """One family's concurrency → K, as vLLM's per-batch-size ranges and the flag that serves them."""

    KEEP_NONE: ClassVar[bool] = True
    family: str = key("the family it serves", default="")
    engine: str | None = key("the engine (launcher) that serves the family")
    datasets: list[str] = key("the data sets its closed-loop cells were measured on", factory=list)
    by_concurrency: dict[str, int] = key("measured concurrency → the K chosen there (several data sets: the "
                                         "highest geometric-mean speedup)", factory=dict)
    ranges: list[list[int]] = key("[start, end, K] per running batch size, inclusive (vLLM's "
                                  "num_speculative_tokens_per_batch_size)", factory=list)
    speculative_config: dict[str, Any] | None = key("the --speculative-config that serves it (null: K=0 everywhere, "
                                                    "or the engine has no per-batch-size K)")
    flag: str | None = key("the exact --speculative-config command-line flag (null: no flag, as speculative_config)")
    note: str = key("how to serve it, or why there is no flag", default="")


@dataclass
class TuneResult(Record):
    """What a tune run chose (``measure.best_k``), stored in meta.json under ``tune.result``."""

    KEEP_NONE: ClassVar[bool] = True
    method: str = key("how the Ks not told apart were found: a paired bootstrap, or overlapping CIs without "
                      "requests.jsonl", default="")
    cells: list[KCell] = key("one per data set × family × load point", factory=list)
    schedules: list[Schedule] = key("one per family with a closed-loop choice: concurrency → K and its flag",
                                    factory=list)

    def ks(self) -> list[int]:
        """Every K measured in some cell, 0 included."""
        return sorted({c.k for cell in self.cells for c in cell.candidates})


@dataclass
class TunePlan(Record):
    """``meta.tune``: the Ks, derived config → family and K, the families; ``result`` once the run is written."""

    FILE: ClassVar[str] = f"{META} tune"
    ks: list[int] = key("the K values given (--k); K=0, the baseline, is always a candidate too", factory=list)
    configs: dict[str, TunedConfig] = key("derived config (`<family>_k<K>`) → its family and K", factory=dict)
    families: dict[str, TuneFamily] = key("family name → its configs and what serves them", factory=dict)
    suite: str | None = key("the suite file the derived suite was expanded from")
    result: TuneResult | None = key("the K chosen, written with the run (null: not written yet)")


@dataclass
class ScheduleFile(Record):
    """schedule.json: the schedules a tune run chose, and the suite they were tuned on."""

    FILE: ClassVar[str] = SCHEDULE
    suite: str | None = key("the suite file tuned (tune --verify reads its configs from it)")
    run: str | None = key("the tune run's directory")
    method: str | None = key("how the Ks not told apart were found (TuneResult.method)")
    schedules: list[Schedule] | None = key("one per family: concurrency → K and the flag that serves it")
    verify: str | None = key("the command that re-measures the schedule")


@dataclass
class ScheduleCheck(_KeywordKey):
    """``meta.schedule``: the schedule file ``tune --verify`` re-measures (``from``)."""

    FILE: ClassVar[str] = f"{META} schedule"
    from_: str | None = key("the schedule.json file re-measured")
