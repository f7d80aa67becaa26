"""A row's spread over its repeats against the baseline: the per-repeat speedups, whether they ran on
fresh server starts, the heterogeneity flag, and the adaptive target (``spread.py`` has the rules).

Its keys are ``schemas.row_baseline.RepeatSpread``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..schemas.cell import Cell
from ..schemas.notes import Note, NoteCode, Notes
from ..schemas.phase import PhaseInfo, by_cell
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from .compare import paired_requests, paired_speedup, ratio
from .latency import throughput
from .spread import HETEROGENEITY_P, heterogeneity, planned_repeats, ratio_ci95


@dataclass(frozen=True)
class RepeatPlan:
    """What the suite asked of repeats: ``target`` (relative half-width, or None) and the first stage."""

    target: float | None = None
    stage: int = 1


def _per_repeat(phases: Sequence[PhaseInfo], measured: Sequence[RequestRecord]) -> dict[int, tuple[float | None, int | None]]:
    """repeat → (output tokens/s of that pass, the server start it ran on)."""
    out: dict[int, tuple[float | None, int | None]] = {}
    for p in phases:
        tps = throughput([r for r in measured if r.repeat == p.repeat], p.wall_s).output_throughput_tps
        out[p.repeat] = (tps, p.server_start)
    return out


def _label(fresh: bool) -> str:
    return "server starts" if fresh else "passes on one server"


def add_spread(rows: list[ResultRow], phases: Sequence[PhaseInfo], records: Sequence[RequestRecord],
               baseline: str | None, plan: RepeatPlan) -> None:
    """Per-repeat speedups and the flag for every non-baseline row with two or more paired repeats."""
    if baseline is None:
        return
    measured, cell_phases = by_cell(phases, records)
    for row in rows:
        cell = Cell.of_row(row)
        base = cell.with_config(baseline)
        if row.run == baseline or base not in cell_phases or len(cell_phases[cell]) < 2:
            continue
        mine, theirs = _per_repeat(cell_phases[cell], measured[cell]), _per_repeat(cell_phases[base], measured[base])
        reps = sorted(set(mine) & set(theirs))
        if len(reps) < 2:
            continue
        speedups = [ratio(mine[i][0], theirs[i][0]) for i in reps]
        starts = [(mine[i][1], theirs[i][1]) for i in reps]
        fresh = all(a is not None and b is not None for a, b in starts) and all(
            len({pair[side] for pair in starts}) == len(starts) for side in (0, 1))  # every pass on its own start, both sides
        intervals = []
        for i in reps:
            pairs = paired_requests([r for r in measured[cell] if r.repeat == i], [r for r in measured[base] if r.repeat == i])
            boot = paired_speedup(pairs)
            intervals.append((boot.paired_speedup_ci_low, boot.paired_speedup_ci_high))
        p = heterogeneity(speedups, intervals)
        ci = ratio_ci95(speedups, plan.stage if plan.target is not None else None)
        if ci is not None and (fresh or plan.target is not None):  # else: add_comparisons' Student-t over repeats stands
            row.ci95 = {**(row.ci95 or {}), "speedup_vs_baseline": [ci[1], ci[2]]}
            how = f" (two-stage: count planned from the first {plan.stage})" if plan.target is not None else ""
            row.speedup_ci_method = f"Student-t on the log scale over {len(reps)} paired {_label(fresh)}{how}"
        row.speedup_repeats = speedups
        row.speedup_repeats_fresh_servers = fresh
        row.speedup_between_p = p
        varies = None if p is None else p < HETEROGENEITY_P
        row.speedup_varies = varies
        notes: Notes = list(row.notes or [])
        known = [s for s in speedups if s is not None]
        if varies and known:
            notes.append(Note.of(NoteCode.SPEEDUP_VARIES, fresh=fresh, low=min(known), high=max(known), repeats=len(reps),
                                 p=p))
        if plan.target is not None:
            half = None if ci is None else (ci[2] - ci[1]) / 2 / ci[0]
            row.repeats_target = plan.target
            row.repeats_target_met = None if half is None else half <= plan.target
            notes.append(Note.of(NoteCode.REPEATS_TARGET, repeats=len(reps), fresh=fresh, target=plan.target,
                                 half_width=half))
        row.notes = notes or None


def planned_counts(rows: Sequence[ResultRow], baseline: str, target: float, stage: int, maximum: int) -> dict[Cell, int]:
    """Repeats each (data set, load point) runs, keyed by its baseline cell: the most any config's
    first-stage speedups plan (``spread.planned_repeats``); a cell without them keeps ``stage``."""
    out: dict[Cell, int] = {}
    for row in rows:
        if row.run == baseline:
            continue
        key = Cell.of_row(row).with_config(baseline)
        first = (row.speedup_repeats or [])[:stage]
        planned = planned_repeats(first, target, maximum) if len(first) == stage else stage
        out[key] = max(out.get(key, stage), planned)
    return out
