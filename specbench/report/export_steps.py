"""The export's ``steps``, ``tokens`` and ``outputs`` tables (``../shared/reference/profilings_layout.md``): one row per
engine step of each timed pass (from the step log, docs/steplog.md), and each measured request's output
token ids. Same ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/`` layout and identity columns as ``export.py``'s
runs and requests, timed passes only.

A step log can hold millions of steps: steps and tokens are read one launch folder at a time and go to their
files pass by pass, ``BATCH_ROWS`` rows at a time (``export_files.TableWriter``), with one arrow schema per table,
so every file of a table has the same column types (a column all null in one file is still typed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..run.readback import RunResults
from ..run.rundir import read_phases
from ..run.steplog import read_tokens
from ..schemas.cell import Cell
from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.steplog import TIME_POINTS, TokenRow
from .export_files import Replacement, table_writer
from .export_steplog import LaunchColumns, read_columns, step_batch

IDENTITY = ["gpu", "target", "split", "drafter", "k", "c", "start"]
BATCH_ROWS = 65_536  # rows handed to the parquet writer at a time
_STR, _INT, _FLOAT, _BOOL = pa.string(), pa.int64(), pa.float64(), pa.bool_()
IDENTITY_TYPES = [_STR, _STR, _STR, _STR, _INT, _INT, _INT]
STEP_SCHEMA = pa.schema(list(zip(IDENTITY, IDENTITY_TYPES, strict=True)) + [
    ("wall", _FLOAT), ("num_reqs", _INT), ("num_tokens", _INT), ("decode_reqs", _INT), ("spec_tokens", _INT),
    ("prefill_tokens", _INT), ("ctx_tokens", _INT), ("full_graph", _BOOL), ("padded_tokens", _INT),
    ("hist", pa.list_(_INT)), ("since_prev_ms", _FLOAT), *((f"t_{p}", _FLOAT) for p in TIME_POINTS if p != "exec_end")])
TOKEN_FIELDS = ("step", "wall", "batch", "draft_pos", "ctx", "out_pos", "token", "target_top", "accepted",
                "t_prob", "t_entropy", "t_margin", "d_prob", "d_entropy", "d_margin")
TOKEN_SCHEMA = pa.schema(list(zip(IDENTITY, IDENTITY_TYPES, strict=True)) + [
    ("step", _INT), ("wall", _FLOAT), ("req", _INT), ("batch", _INT), ("draft_pos", _INT), ("ctx", _INT), ("out_pos", _INT),
    ("token", _INT), ("target_top", _INT), ("accepted", _BOOL), *((k, _FLOAT) for k in TOKEN_FIELDS[9:])])
STEP_COLUMNS, TOKEN_COLUMNS = STEP_SCHEMA.names, TOKEN_SCHEMA.names
OUTPUT_COLUMNS = IDENTITY + ["req", "question_id", "category", "prompt_tokens", "output_ids"]


@dataclass(frozen=True)
class TableKey:
    """A cell's identity columns in every exported table but ``start``, as ``export.tables`` names them."""

    gpu: str
    target: str
    split: str
    drafter: str
    k: int
    c: int


#: a cell's key in the tables; None for a cell the ``runs`` table does not have
Identity = Callable[[Cell], TableKey | None]
#: a table's rows in batches, each with the part (file) it goes to
Batches = Iterator[tuple[dict[str, Any], pa.Table]]


def logged_passes(run: Path, phases: Sequence[PhaseInfo],
                  identity: Identity) -> Iterator[tuple[PhaseInfo, TableKey, Path]]:
    """Each complete timed pass that ran with a step log, its cell's key in the tables, and its launch
    folder (one inside the run directory: phases.jsonl is a file like any other)."""
    for p in phases:
        key = identity(p.cell)
        if not p.steplog or not p.complete or key is None:
            continue
        folder = (run / p.steplog).resolve()
        if folder.is_relative_to(run.resolve()) and folder.is_dir():
            yield p, key, folder


def launches(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> Iterator[tuple[Path, list[tuple[PhaseInfo, TableKey]]]]:
    """Each launch folder with its logged passes (in phases.jsonl's order): the export reads one launch at a time."""
    by: dict[Path, list[tuple[PhaseInfo, TableKey]]] = {}
    for p, key, folder in logged_passes(run, phases, identity):
        by.setdefault(folder, []).append((p, key))
    yield from by.items()


class Columns:
    """Rows gathered column by column, handed on as an arrow table every ``BATCH_ROWS``."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.cols: dict[str, list[Any]] = {name: [] for name in schema.names}

    def add(self, row: dict[str, Any]) -> bool:
        """Add a row; True when a batch is full."""
        for name, col in self.cols.items():
            col.append(row[name])
        return len(self.cols[self.schema.names[0]]) >= BATCH_ROWS

    def take(self) -> pa.Table:
        table = pa.Table.from_pydict(self.cols, schema=self.schema)
        self.cols = {name: [] for name in self.schema.names}
        return table


def step_batches(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> Batches:
    """One row per engine step of every complete timed pass run with the step log, pass by pass, in batches;
    one launch's log held at a time, in columns (``export_steplog``)."""
    for folder, passes in launches(run, phases, identity):
        cols = read_columns(folder)
        for p, key in passes:
            part = {**asdict(key), "start": p.repeat}
            idx = pass_window(cols, p)
            for at in range(0, len(idx), BATCH_ROWS):
                yield part, step_batch(cols, idx[at:at + BATCH_ROWS], part, STEP_SCHEMA)
        del cols


def pass_window(cols: LaunchColumns, phase: PhaseInfo) -> np.ndarray:
    """The pass's steps (``run.steplog.pass_steps``: none where it has no recorded window)."""
    if phase.scraped_before is None or phase.scraped_after is None:
        return np.zeros(0, dtype=np.int64)
    return cols.window(phase.scraped_before, phase.scraped_after)


def frame_of(batches: Batches, schema: pa.Schema) -> pd.DataFrame:
    """The batches as one frame (the tests' view; the export writes them as they come)."""
    tables = [t for _, t in batches]
    return (pa.concat_tables(tables) if tables else schema.empty_table()).to_pandas()


def steps_frame(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> pd.DataFrame:
    """``step_batches`` as one frame."""
    return frame_of(step_batches(run, phases, identity), STEP_SCHEMA)


def _request_of(rows: Sequence[TokenRow], candidates: dict[int, RequestRecord]) -> int | None:
    """The request (index in requests.jsonl) whose output holds every kept guess of ``rows`` (one vLLM request)
    at its position; None unless exactly one request of the pass agrees (the engine's request id is its own)."""
    kept = [(r.out_pos, r.token) for r in rows if r.accepted and r.out_pos is not None and r.out_pos >= 0]

    def agrees(out: list[int]) -> bool:  # guesses kept past max_tokens were cut from the output: not evidence
        inside = [(pos, tok) for pos, tok in kept if pos < len(out)]
        return bool(inside) and all(out[pos] == tok for pos, tok in inside)

    found = [i for i, rec in candidates.items() if rec.output_token_ids and agrees(rec.output_token_ids)]
    return found[0] if len(found) == 1 else None


def token_batches(run: Path, phases: Sequence[PhaseInfo], requests: Sequence[RequestRecord], identity: Identity) -> Batches:
    """One row per verified guess of every complete timed pass run at the ``tokens`` level — the rows of the
    pass's steps, by step number, as the results' ``steplog_token_*`` keys take them; ``req`` matches
    ``outputs``' (found by the guesses kept: they are the output's tokens at their positions). In batches, one
    launch's logs read at a time."""
    for folder, passes in launches(run, phases, identity):
        launch_tokens = read_tokens(folder)[0]
        if not launch_tokens:
            continue
        cols = read_columns(folder)
        for p, key in passes:
            numbers = set(cols.step[pass_window(cols, p)].tolist())
            tokens = [t for t in launch_tokens if t.step in numbers]  # measure.steplog.pass_tokens: by step number
            candidates = {i: r for i, r in enumerate(requests)
                          if r.phase == "measure" and r.repeat == p.repeat and Cell.of_record(r) == p.cell}
            by_req: dict[str | None, list[TokenRow]] = {}
            for t in tokens:
                by_req.setdefault(t.req_id, []).append(t)
            req_of = {rid: _request_of(ts, candidates) for rid, ts in by_req.items()}
            part, rows = {**asdict(key), "start": p.repeat}, Columns(TOKEN_SCHEMA)
            for t in tokens:
                if rows.add({**part, **{k: getattr(t, k) for k in TOKEN_FIELDS}, "req": req_of[t.req_id]}):
                    yield part, rows.take()
            yield part, rows.take()
        del cols, launch_tokens


def tokens_frame(run: Path, phases: Sequence[PhaseInfo], requests: Sequence[RequestRecord], identity: Identity) -> pd.DataFrame:
    """``token_batches`` as one frame."""
    return frame_of(token_batches(run, phases, requests, identity), TOKEN_SCHEMA)


def outputs_frame(requests: Sequence[RequestRecord], identity: Identity) -> pd.DataFrame:
    """Each measured request's output token ids; ``req`` is its index in requests.jsonl."""
    rows = []
    for i, r in enumerate(requests):
        key = identity(Cell.of_record(r))
        if r.phase != "measure" or key is None:
            continue
        rows.append({**asdict(key), "start": r.repeat, "req": i,
                     "question_id": f"{r.prompt_id}#{r.turn}" if r.turn else r.prompt_id,
                     "category": r.category, "prompt_tokens": r.prompt_tokens, "output_ids": r.output_token_ids})
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)


def identities(results: RunResults, runs: pd.DataFrame) -> Identity:
    """Each cell's key as the ``runs`` frame (one row per results row, in order) has it."""
    key_of = {Cell.of_row(row): TableKey(**{k: rec[k] for k in IDENTITY[:-1]})
              for row, rec in zip(results.rows, runs.to_dict("records"))}
    return key_of.get


def export_steps(requests: Sequence[RequestRecord], run: Path, rep: Replacement, identity: Identity) -> None:
    """``steps/``, ``tokens/`` and ``outputs/`` into the run's replacement of its files; ``identity`` maps a cell to
    its key in the tables. Steps and tokens go to their files batch by batch as they are read."""
    phases = read_phases(Path(run))
    for table, schema, batches in (("steps", STEP_SCHEMA, step_batches(Path(run), phases, identity)),
                                   ("tokens", TOKEN_SCHEMA, token_batches(Path(run), phases, requests, identity))):
        with table_writer(rep, table, schema) as writer:
            for part, batch in batches:
                writer.write(part, batch)
    outputs = outputs_frame(requests, identity)
    if not outputs.empty:
        rep.frame("outputs", outputs.assign(run=rep.run))
