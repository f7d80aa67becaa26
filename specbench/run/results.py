"""Derived results: rows for every cell measured so far (``build_rows`` from a run's raw records; ``LiveRows``
keeps them current a cell at a time while the run measures), and the notes printed under the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..measure.accepted import from_steplog
from ..measure.cache import add_resent_notes
from ..measure.quality import add_quality, mark_dummy_weights, suite_notes, weights_notes
from ..measure.repeat_spread import RepeatPlan, add_spread
from ..measure.steplog import steplog_decomposition
from ..measure.summarize import add_comparisons, add_o200k, summarize_cell
from ..schemas.cell import Cell
from ..schemas.notes import Note, NoteCode
from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..suite import Suite
from ..util.redact import redact_mapping
from .o200k_file import find_o200k
from .preflight import load_points
from .steplog import CellStepLog, steplog_results


def build_rows(suite: Suite, phases: list[PhaseInfo], records: list[RequestRecord],
               run_dir: Path | None = None) -> list[ResultRow]:
    """Results rows for every cell measured so far, in suite order (data set, then config), with the notes on prompts
    an earlier pass sent (across load points); with ``run_dir``, the step log of every cell that ran with one."""
    rows = measured_rows(suite, phases, records)
    add_resent_notes(rows, phases, records)
    if run_dir is not None:
        add_steplog(rows, steplog_results(run_dir, phases), suite.baseline.name if suite.baseline else None)
    return rows


def measured_rows(suite: Suite, phases: list[PhaseInfo], records: list[RequestRecord]) -> list[ResultRow]:
    """``build_rows`` but the step log: every key a cell's row takes from its own records and phases and from its
    baseline's at the same data set and load point, so the cells of one (data set, load point) are built alone."""
    configs = {c.name: c for c in suite.configs}
    by_cell: dict[Cell, list[PhaseInfo]] = {}
    for p in phases:
        by_cell.setdefault(p.cell, []).append(p)
    rec_by: dict[Cell, list[RequestRecord]] = {}
    for r in records:
        rec_by.setdefault(Cell.of_record(r), []).append(r)
    rows = []
    for spec in suite.datasets:
        for point in load_points(suite):
            for config in suite.configs:
                cell = Cell.at(config.name, spec.name, point)
                if cell not in by_cell:
                    continue
                c = configs[config.name]
                rows.append(summarize_cell(by_cell[cell], rec_by.get(cell, []), method=c.label_method,
                                           k=c.num_speculative_tokens))
    add_comparisons(rows, [r for r in records], suite.baseline.name if suite.baseline else None)
    add_quality(rows, phases, records, suite)
    mark_dummy_weights(rows, suite)
    add_o200k(rows, phases, records, find_o200k(suite.load.tiktoken_file))
    add_spread(rows, phases, records, suite.baseline.name if suite.baseline else None,
               RepeatPlan(suite.load.target_ci, suite.load.first_stage))
    return rows


def group_of(cell: Cell) -> Cell:
    """The (data set, load point) a cell shares with its baseline: every cross-cell key stays inside it."""
    return cell.with_config("")


class LiveRows:
    """The rows of a run in the making, kept current a cell at a time: a finished pass's phase and records (as
    its written lines read back) join those in memory, and only its (data set, load point) is built again
    (``measured_rows``); the step log, whose launches span load points and whose files a Ray node sends later,
    is read for every cell at each ``rows``. The same rows ``build_rows`` makes from the files."""

    def __init__(self, suite: Suite, run_dir: Path) -> None:
        self.suite, self.run_dir = suite, run_dir
        self.phases: list[PhaseInfo] = []
        self.records: list[RequestRecord] = []
        self.groups: dict[Cell, tuple[list[PhaseInfo], list[RequestRecord]]] = {}
        self.built: dict[Cell, list[ResultRow]] = {}

    def reset(self, phases: list[PhaseInfo], records: list[RequestRecord]) -> None:
        """Start over from what the files hold (a resumed run, or one that set passes aside)."""
        self.phases, self.records, self.groups, self.built = [], [], {}, {}
        self.add(phases, records)

    def add(self, phases: list[PhaseInfo], records: list[RequestRecord]) -> None:
        """Phases and records measured since, their groups built again."""
        self.phases += phases
        self.records += records
        for p in phases:
            self.groups.setdefault(group_of(p.cell), ([], []))[0].append(p)
        for r in records:
            self.groups.setdefault(group_of(Cell.of_record(r)), ([], []))[1].append(r)
        for key in {group_of(p.cell) for p in phases} | {group_of(Cell.of_record(r)) for r in records}:
            self.built[key] = measured_rows(self.suite, *self.groups[key])

    def rows(self) -> list[ResultRow]:
        """Every row in suite order (copies: what the caller adds stays out of the next ones), with the step log's
        keys."""
        order = [group_of(Cell.at("", spec.name, point)) for spec in self.suite.datasets for point in load_points(self.suite)]
        rows = [r.copy() for key in dict.fromkeys(order) for r in self.built.get(key, [])]
        add_resent_notes(rows, self.phases, self.records)  # across load points: a pass's history is its server start's
        add_steplog(rows, steplog_results(self.run_dir, self.phases), self.suite.baseline.name if self.suite.baseline else None)
        return rows


def add_steplog(rows: list[ResultRow], stats: dict[Cell, CellStepLog], baseline: str | None) -> None:
    """Each cell's step-log keys, then the Why table's decomposition from them where a log exists."""
    if not stats:
        return
    for row in rows:
        cell = stats.get(Cell.of_row(row))
        if cell is not None:
            cell.add_to(row)
            spec = row.num_speculative_tokens is not None or row.method != "baseline"
            steps = from_steplog(row.steplog_hist, row.accepted_per_step_categories) if spec else None
            if steps is not None:  # a speculative cell's steps as the engine took them, over the chunks'
                row.add(steps)
    base_rows = {Cell.of_row(r): r for r in rows if r.run == baseline}
    for row in rows:
        if baseline is not None and (row.has("steplog_steps") or Cell.of_row(row).with_config(baseline) in stats):
            decomposition = steplog_decomposition(row, base_rows.get(Cell.of_row(row).with_config(baseline)))
            if decomposition is not None:
                row.add(decomposition)


def redact_raw(raw: Any) -> Any:
    """The suite as written, minus secrets (see ``specbench.util.redact``)."""
    return redact_mapping(raw)


def weights_meta(suite: Suite) -> dict[str, str | list[str]]:
    """meta.json's ``weights``: "dummy" (every config on random weights) or "mixed", with the configs
    that were; nothing for a run on the model's weights."""
    dummy = suite.dummy_configs
    if not dummy:
        return {}
    return {"weights": "dummy" if len(dummy) == len(suite.configs) else "mixed", "dummy_weight_configs": dummy}


def run_notes(suite: Suite, clocks: dict[str, str] | None = None) -> list[Note]:
    """meta.json's notes that the suite decides: how the numbers were taken (``report/notes.py`` words them)."""
    arrival = suite.load.arrival.note() if suite.load.request_rate else None
    return weights_notes(suite) + [
        Note.of(NoteCode.SPEEDUP_DEFINED),
        Note.of(NoteCode.ITL_DEFINED, clocks=sorted(set((clocks or {}).values()))),
        Note.of(NoteCode.ACCEPTANCE_DEFINED),
        Note.of(NoteCode.SAMPLING, temperature=suite.load.temperature, max_tokens=suite.load.max_tokens,
                warmup=suite.load.warmup),
    ] + ([Note.of(NoteCode.PREFIX_CACHE_RESET)] if suite.load.prefix_cache == "reset" else []) \
        + ([arrival] if arrival else []) + suite_notes(suite)
