"""The export's ``steps``, ``tokens``, ``events`` and ``outputs`` tables (``../shared/reference/profilings_layout.md``): one row per
engine step of each timed pass (from the step log, docs/steplog.md), and each measured request's output
token ids. Same ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/`` layout and identity columns as ``export.py``'s
runs and requests, timed passes only.

A step log can hold millions of steps: a launch folder is read once, by the run's own checked reader
(``run.steplog_read``, in columns: the rows the run's results count, what was left out said once), one launch at a
time, and its steps and tokens go to their files pass by pass, ``BATCH_ROWS`` rows at a time
(``export_files.TableWriter``), with one arrow schema per table, so every file of a table has the same column types
(a column all null in one file is still typed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..measure.stalls import PassStalls, pass_stalls
from ..measure.step_columns import NONE, Array, RowColumns
from ..measure.steplog import StepColumns
from ..run.readback import RunResults
from ..run.rundir import read_phases
from ..run.steplog import read_once
from ..run.steplog_read import LaunchRead
from ..schemas.cell import Cell
from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.steplog import TIME_POINTS, TokenRow
from .export_files import Replacement, table_writer
from .export_steplog import event_batch, step_batch, token_batch

IDENTITY = ["gpu", "target", "split", "drafter", "k", "c", "start"]
BATCH_ROWS = 65_536  # rows handed to the parquet writer at a time
_STR, _INT, _FLOAT, _BOOL = pa.string(), pa.int64(), pa.float64(), pa.bool_()
IDENTITY_TYPES = [_STR, _STR, _STR, _STR, _INT, _INT, _INT]
STEP_SCHEMA = pa.schema(list(zip(IDENTITY, IDENTITY_TYPES, strict=True)) + [
    ("wall", _FLOAT), ("num_reqs", _INT), ("num_tokens", _INT), ("decode_reqs", _INT), ("spec_tokens", _INT),
    ("prefill_tokens", _INT), ("ctx_tokens", _INT), ("full_graph", _BOOL), ("padded_tokens", _INT),
    ("hist", pa.list_(_INT)), ("since_prev_ms", _FLOAT), *((f"t_{p}", _FLOAT) for p in TIME_POINTS if p != "exec_end"),
    ("stall", _BOOL), ("stall_causes", _STR)])
#: what the recorder saw happen during each timed pass (docs/steplog.md: events-<pid>.jsonl)
EVENT_SCHEMA = pa.schema(list(zip(IDENTITY, IDENTITY_TYPES, strict=True)) + [
    ("kind", _STR), ("wall", _FLOAT), ("ms", _FLOAT), ("step", _INT), ("one_time", _BOOL), ("detail", _STR)])
TOKEN_FIELDS = ("step", "wall", "batch", "draft_pos", "ctx", "out_pos", "token", "target_top", "accepted",
                "t_prob", "t_entropy", "t_margin", "d_prob", "d_entropy", "d_margin")
TOKEN_SCHEMA = pa.schema(list(zip(IDENTITY, IDENTITY_TYPES, strict=True)) + [
    ("step", _INT), ("wall", _FLOAT), ("req", _INT), ("batch", _INT), ("draft_pos", _INT), ("ctx", _INT), ("out_pos", _INT),
    ("token", _INT), ("target_top", _INT), ("accepted", _BOOL), *((k, _FLOAT) for k in TOKEN_FIELDS[9:])])
STEP_COLUMNS, TOKEN_COLUMNS, EVENT_COLUMNS = STEP_SCHEMA.names, TOKEN_SCHEMA.names, EVENT_SCHEMA.names
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


def launches(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> Iterator[tuple[LaunchRead, list[tuple[PhaseInfo, TableKey]]]]:
    """Each launch folder with a logged pass, read and checked (``run.steplog.read_once``), with its logged passes
    (in phases.jsonl's order): the export holds one launch's read at a time."""
    by: dict[Path, list[tuple[PhaseInfo, TableKey]]] = {}
    for p, key, folder in logged_passes(run, phases, identity):
        by.setdefault(folder, []).append((p, key))
    for folder, passes in by.items():
        yield read_once(run, phases, folder), passes


def pass_window(steps: StepColumns, phase: PhaseInfo) -> Array:
    """The indices of the pass's steps (``run.steplog.pass_steps``: none where it has no recorded window)."""
    if phase.scraped_before is None or phase.scraped_after is None:
        return np.zeros(0, dtype=np.int64)
    return steps.window_index(phase.scraped_before, phase.scraped_after)


def step_batches(read: LaunchRead, passes: Sequence[tuple[PhaseInfo, TableKey]]) -> Batches:
    """One row per engine step of each of the launch's complete timed passes, pass by pass, in batches; a stall
    (``measure.stalls``: as the results name it) carries its causes."""
    for p, key in passes:
        part = {**asdict(key), "start": p.repeat}
        idx = pass_window(read.steps, p)
        named = {s.step: "; ".join(s.causes) for s in pass_stalls_of(read, p, idx).stalls} if len(idx) else {}
        for at in range(0, len(idx), BATCH_ROWS):
            yield part, step_batch(read.steps, idx[at:at + BATCH_ROWS], part, STEP_SCHEMA, named)


def pass_stalls_of(read: LaunchRead, phase: PhaseInfo, idx: Array) -> PassStalls:
    """One pass's stalls from its steps as records (one pass at a time) and the launch's events."""
    window = (phase.scraped_before or 0.0, phase.scraped_after or 0.0)
    return pass_stalls(read.steps.take(idx).records(), read.events, phase.wall_s, phase.repeat, phase.server_start, window)


def event_batches(read: LaunchRead, passes: Sequence[tuple[PhaseInfo, TableKey]]) -> Batches:
    """The events inside each timed pass's window (its two /metrics scrapes), pass by pass."""
    for p, key in passes:
        if p.scraped_before is None or p.scraped_after is None:
            continue
        inside = [e for e in read.events if p.scraped_before <= e.wall <= p.scraped_after]
        if inside:
            part = {**asdict(key), "start": p.repeat}
            yield part, event_batch(inside, part, EVENT_SCHEMA)


def _request_of(kept: list[tuple[int, int]], candidates: dict[int, RequestRecord]) -> int | None:
    """The request (index in requests.jsonl) whose output holds every kept guess (``(out_pos, token)``) of one vLLM
    request at its position; None unless exactly one request of the pass agrees (the engine's request id is its own)."""

    def agrees(out: list[int]) -> bool:  # guesses kept past max_tokens were cut from the output: not evidence
        inside = [(pos, tok) for pos, tok in kept if pos < len(out)]
        return bool(inside) and all(out[pos] == tok for pos, tok in inside)

    found = [i for i, rec in candidates.items() if rec.output_token_ids and agrees(rec.output_token_ids)]
    return found[0] if len(found) == 1 else None


def requests_of(tokens: RowColumns[TokenRow], rows: Array, candidates: dict[int, RequestRecord]) -> Array:
    """Each of the token rows ``rows``' request in requests.jsonl (``NONE``: none found), one engine request id at
    a time, found by the guesses it kept."""
    ids, which = np.unique(tokens["req_id"][rows], return_inverse=True)
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(ids) + 1))
    req = np.full(len(rows), NONE, dtype=np.int64)
    for a, b in zip(bounds[:-1], bounds[1:]):
        mine = rows[order[a:b]]
        kept = (tokens["accepted"][mine] == 1) & (tokens["out_pos"][mine] >= 0)
        found = _request_of(list(zip(tokens["out_pos"][mine][kept].tolist(), tokens["token"][mine][kept].tolist())), candidates)
        req[order[a:b]] = NONE if found is None else found
    return req


def token_batches(read: LaunchRead, passes: Sequence[tuple[PhaseInfo, TableKey]], requests: Sequence[RequestRecord]) -> Batches:
    """One row per verified guess of each of the launch's complete timed passes run at the ``tokens`` level — the
    rows of the pass's steps, by step number, as the results' ``steplog_token_*`` keys take them; ``req`` matches
    ``outputs``' (found by the guesses kept: they are the output's tokens at their positions). In batches."""
    if not len(read.tokens):
        return
    for p, key in passes:
        rows = np.flatnonzero(np.isin(read.tokens["step"], read.steps.step[pass_window(read.steps, p)]))
        candidates = {i: r for i, r in enumerate(requests)
                      if r.phase == "measure" and r.repeat == p.repeat and Cell.of_record(r) == p.cell}
        req, part = requests_of(read.tokens, rows, candidates), {**asdict(key), "start": p.repeat}
        for at in range(0, len(rows), BATCH_ROWS):
            yield part, token_batch(read.tokens, rows[at:at + BATCH_ROWS], req[at:at + BATCH_ROWS], part, TOKEN_SCHEMA)


def frame_of(batches: Batches, schema: pa.Schema) -> pd.DataFrame:
    """The batches as one frame (the tests' view; the export writes them as they come)."""
    tables = [t for _, t in batches]
    return (pa.concat_tables(tables) if tables else schema.empty_table()).to_pandas()


def steps_frame(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> pd.DataFrame:
    """``step_batches`` of every launch as one frame."""
    return frame_of((b for read, passes in launches(run, phases, identity) for b in step_batches(read, passes)), STEP_SCHEMA)


def tokens_frame(run: Path, phases: Sequence[PhaseInfo], requests: Sequence[RequestRecord], identity: Identity) -> pd.DataFrame:
    """``token_batches`` of every launch as one frame."""
    return frame_of((b for read, passes in launches(run, phases, identity) for b in token_batches(read, passes, requests)),
                    TOKEN_SCHEMA)


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
    its key in the tables. Steps and tokens go to their files batch by batch as each launch is read."""
    phases = read_phases(Path(run))
    with (table_writer(rep, "steps", STEP_SCHEMA) as steps, table_writer(rep, "tokens", TOKEN_SCHEMA) as tokens,
          table_writer(rep, "events", EVENT_SCHEMA) as events):
        for read, passes in launches(Path(run), phases, identity):
            for part, batch in step_batches(read, passes):
                steps.write(part, batch)
            for part, batch in token_batches(read, passes, requests):
                tokens.write(part, batch)
            for part, batch in event_batches(read, passes):
                events.write(part, batch)
            del read  # before the next launch is read
    outputs = outputs_frame(requests, identity)
    if not outputs.empty:
        rep.frame("outputs", outputs.assign(run=rep.run))
