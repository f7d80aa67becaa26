"""What a derived suite's run found, computed once from its rows and plan: the break-even curves of a
`whatif` grid, a profile's replay (`whatif --profile`), the choice of K of a `tune` run (stored in meta.json
when the run was written). The report formats an ``Explained``; it computes none of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..schemas.meta import RunMeta
from ..schemas.plans import TuneResult
from ..schemas.row import ResultRow
from .best_k import analysis_of
from .break_even import Curve, whatif_curves
from .replay import Replay, replay_of


@dataclass(frozen=True)
class Explained:
    curves: list[Curve] = field(default_factory=list)  # a whatif grid's, per data set, config and load
    replay: Replay | None = None  # a profile's replay
    tune: TuneResult | None = None  # a tune run's choice of K


def explain(records: Sequence[ResultRow], meta: RunMeta | None) -> Explained:
    """The analyses of the run's derived suite (empty for a run of another command)."""
    return Explained(whatif_curves(records, meta), replay_of(records, meta), analysis_of(records, meta))
