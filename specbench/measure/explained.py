"""What a run found beyond its rows, computed once from its rows and plan: the speedup-vs-load sweep and
its crossover, the break-even curves of a `whatif` grid, a profile's replay (`whatif --profile`), the
choice of K of a `tune` run (stored in meta.json when the run was written). The run stage makes an
``Explained`` when it writes the run (``run.session``) and when it reads one back (``run.readback``);
the report formats it and computes none of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..schemas.meta import RunMeta
from ..schemas.plans import TuneResult
from ..schemas.row import ResultRow
from .best_k import analysis_of
from .break_even import Curve, whatif_curves
from .compare import crossover
from .replay import Replay, replay_of


@dataclass(frozen=True)
class SweepLine:
    """One data set and config over the run's concurrencies: its speedup at each, and the lowest one
    from which speculation stops paying off (None: it pays off at every load)."""

    dataset: str
    run: str
    speedups: dict[int, float | None]
    crossover: float | None


@dataclass(frozen=True)
class Sweep:
    loads: list[int]
    lines: list[SweepLine]


@dataclass(frozen=True)
class Explained:
    sweep: Sweep | None = None  # two or more concurrencies: speedup vs load
    curves: list[Curve] = field(default_factory=list)  # a whatif grid's, per data set, config and load
    replay: Replay | None = None  # a profile's replay
    tune: TuneResult | None = None  # a tune run's choice of K


def sweep_of(rows: Sequence[ResultRow]) -> Sweep | None:
    """Speedup vs concurrency per data set and config (the baseline itself left out), with the crossover."""
    loads = sorted({c for r in rows if (c := r.concurrency) is not None})
    if len(loads) < 2:
        return None
    lines = []
    for dataset, run in dict.fromkeys((r.dataset, r.run) for r in rows if r.speedup_vs_baseline is not None):
        by_c = {r.concurrency: r.speedup_vs_baseline for r in rows if r.dataset == dataset and r.run == run
                and r.concurrency is not None}
        if all(v == 1.0 for v in by_c.values() if v is not None):
            continue
        lines.append(SweepLine(dataset, run, by_c, crossover([(c, by_c.get(c)) for c in loads])))
    return Sweep(loads, lines)


def explain(rows: Sequence[ResultRow], meta: RunMeta | None) -> Explained:
    """The run's analyses: its sweep, and those of its derived suite (none for a run of another command)."""
    return Explained(sweep_of(rows), whatif_curves(rows, meta), replay_of(rows, meta), analysis_of(rows, meta))
