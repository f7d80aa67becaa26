"""Reading the step log a launched server wrote (docs/steplog.md): a launch folder's files, checked and in
columns (``steplog_read``), and each cell's timed passes cut from it by their /metrics scrapes.

Every value came from the engine's processes, a killed one included: each line goes through the
strict typed reader (``schemas.steplog``); a bad line is skipped and counted with its reason, never
an error of the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..measure.server_batch import batch_note, server_batch
from ..measure.stalls import PassStalls, pass_stalls, stall_stats, steady_warmup
from ..measure.steplog import PassSteps, PassTokens, StepColumns, StepLog, cell_stats, cut, pass_tokens, token_stats
from ..schemas.cell import Cell
from ..schemas.notes import Note
from ..schemas.phase import PhaseInfo
from ..schemas.row import ResultRow
from ..schemas.row_steplog import ServerBatch, StallStats, SteadyWarmup, StepLogSource, StepStats, TokenLogStats
from ..schemas.steplog import EventRow
from .say import say_once
from .steplog_read import LaunchRead, LaunchScope, check_folder, clock, read_events_only, read_folder

WINDOW = "/metrics scrapes"  # a pass is cut by the wall times of its two scrapes (phases.jsonl scraped_*)


def _say(folder: Path, read: LaunchRead) -> None:
    line = read.line(folder)
    if line is not None:
        say_once(line)


def read_launch(folder: Path) -> StepLog:
    """One launch's steps (``header-*.json``, ``sched-*.jsonl``, ``gpu-*.jsonl``), rows joined on ``step``, only
    the launch's own (``steplog_read``; what was left out said once on stderr; read again only when a file changed)."""
    read = read_folder(folder, LaunchScope.of_folder(folder))
    _say(folder, read)
    return read.log


def read_once(run_dir: Path, phases: Sequence[PhaseInfo], folder: Path) -> LaunchRead:
    """One launch folder of a run read and checked as the run's results read it, not kept (the export reads one
    launch at a time); what was left out said once on stderr."""
    read = check_folder(folder, LaunchScope.of_run(run_dir, phases, folder))
    _say(folder, read)
    return read


def read_events(folder: Path) -> tuple[list[EventRow], dict[str, int]]:
    """A launch's events (``events-*.jsonl`` of every process: collections, compiles, captures, autotunes,
    allocator growth, preemptions, the recorder's flushes), in wall-time order, and the lines skipped by reason."""
    return read_events_only(folder, LaunchScope.of_folder(folder, passes=False))


def pass_steps(log: StepLog, phase: PhaseInfo) -> StepColumns | None:
    """The steps of one timed pass, or None where the pass has no recorded window."""
    if phase.scraped_before is None or phase.scraped_after is None:
        return None
    return cut(log, phase.scraped_before, phase.scraped_after)


@dataclass(frozen=True)
class CellStepLog:
    """One cell's step-log keys: its numbers (None: no timed pass could be cut), then where they came from; the batch
    the server ran, and its note where that was not the cell's load point."""

    stats: StepStats | None
    source: StepLogSource
    tokens: TokenLogStats | None = None
    stalls: StallStats | None = None
    warmup: SteadyWarmup | None = None
    batch: ServerBatch | None = None
    batch_note: Note | None = None

    def add_to(self, row: ResultRow) -> None:
        if self.stats is not None:
            row.add(self.stats)
        if self.batch is not None:
            row.add(self.batch)
        if self.batch_note is not None:  # a new list: a row copied from another (LiveRows) must not share it
            row.notes = [*(row.notes or []), self.batch_note]
        row.add(self.source)
        if self.tokens is not None:
            row.add(self.tokens)
        if self.stalls is not None:
            row.add(self.stalls)
        if self.warmup is not None:
            row.add(self.warmup)


def _cut_before(read: LaunchRead, kind: str, p: PhaseInfo) -> str | None:
    """Why the ``kind`` rows of pass ``p`` are not all there: a file of the launch cut in the middle of a line
    before the pass ended (its later rows are gone); None when they are."""
    name, wall = read.cut.get(kind, ("", float("inf")))
    if p.scraped_after is None or wall >= p.scraped_after:
        return None
    return (f"{p.steplog}/{name} is cut in the middle of a line (its rows after {clock(wall)} are gone), before "
            f"repeat {p.repeat} ended")


def _stalls(read: LaunchRead, steps: StepColumns, p: PhaseInfo) -> PassStalls:
    """``pass_stalls`` of pass ``p`` (``steps``: its steps), made once per launch read (results are rebuilt after every
    cell, and a finished launch's passes do not change): ``measure.stalls`` reads records, made for this pass only."""
    assert p.scraped_before is not None and p.scraped_after is not None  # pass_steps returned steps
    key = (p.scraped_before, p.scraped_after, p.wall_s, p.repeat, p.server_start)
    if key not in read.pass_stalls:
        read.pass_stalls[key] = pass_stalls(steps.records(), read.events, p.wall_s, p.repeat, p.server_start,
                                            (p.scraped_before, p.scraped_after))
    return read.pass_stalls[key]


def steplog_results(run_dir: Path, phases: Sequence[PhaseInfo]) -> dict[Cell, CellStepLog]:
    """The ``steplog_*`` results keys of every cell whose timed passes ran with the step log on (and, where the
    launch kept a token log, the ``steplog_token_*`` keys: its rows cut by the same step numbers). Only the
    launch's own rows count (``steplog_read``): what was left out is in ``steplog_skipped_rows``, and a pass whose
    rows a cut file lost is left out of the numbers it lost them for, said in ``steplog_error``."""
    reads: dict[str, LaunchRead] = {}
    cells: dict[Cell, list[PhaseInfo]] = {}
    for p in phases:
        if p.steplog and p.complete:
            cells.setdefault(p.cell, []).append(p)
    out = {}
    for cell, ps in cells.items():
        passes, token_passes, skipped, errors, orphans = [], [], Counter[str](), [], 0
        stalls, walls, said = [], [], set()
        for p in ps:
            assert p.steplog is not None
            folder = (run_dir / p.steplog).resolve()
            if not folder.is_relative_to(run_dir.resolve()) or not folder.is_dir():
                errors.append(f"{p.steplog}: no such folder in the run directory")
                continue
            if p.steplog not in reads:
                reads[p.steplog] = read = read_folder(folder, LaunchScope.of_run(run_dir, phases, folder))
                if read.has_tokens:
                    orphans += int((~np.isin(read.tokens["step"], read.steps.step)).sum())
            read = reads[p.steplog]
            if p.steplog not in said:  # each cell says what its launches left out
                said.add(p.steplog)
                skipped.update(read.skipped)
                errors += [f"{p.steplog}: {n}" for n in read.notes]
            if not len(read.steps):
                errors.append(f"{p.steplog}: no step of this launch left to cut repeat {p.repeat} from")
                continue
            steps = pass_steps(read.log, p)
            if steps is None:
                errors.append(f"repeat {p.repeat}: no /metrics scrape times in phases.jsonl")
                continue
            lost = _cut_before(read, "sched", p)
            if lost is not None:
                errors.append(f"{lost}: its steps are not counted")
                continue
            if (lost := _cut_before(read, "gpu", p)) is not None:
                errors.append(f"{lost}: its runner times are not used")
                steps = steps.without_gpu()
            counter = p.acceptance.spec_accepted_tokens
            passes.append(PassSteps(steps, counter if isinstance(counter, int) and not isinstance(counter, bool) else None))
            if read.has_tokens:
                if (lost := _cut_before(read, "tokens", p)) is None:
                    token_passes.append(PassTokens(steps, pass_tokens(read.tokens, steps)))
                else:
                    errors.append(f"{lost}: its token rows are not counted")
            if (lost := _cut_before(read, "events", p)) is not None:
                errors.append(f"{lost}: its stalls are not named")
                continue
            stalls.append(_stalls(read, steps, p))
            walls.append(p.wall_s)
        batch = server_batch([p.steps for p in passes]) if passes else None
        out[cell] = CellStepLog(cell_stats(passes) if passes else None,
                                StepLogSource(steplog_window=WINDOW if passes else None, steplog_skipped_rows=dict(skipped) or None,
                                              steplog_error="; ".join(errors) or None),
                                token_stats(token_passes, orphans) if token_passes else None,
                                stall_stats(stalls, walls) if stalls else None,
                                steady_warmup([p.warmup_one_time for p in ps]), batch,
                                batch_note(batch, cell.concurrency, cell.request_rate is None) if batch else None)
    return out
