"""The export's ``steps``, ``tokens`` and ``outputs`` tables (``../shared/reference/profilings_layout.md``): one row per
engine step of each timed pass (from the step log, docs/steplog.md), and each measured request's output
token ids. Same ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/`` layout and identity columns as ``export.py``'s
runs and requests, timed passes only."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..measure.steplog import StepLog, pass_tokens
from ..run.readback import RunResults
from ..run.rundir import read_phases
from ..run.steplog import pass_steps, read_launch, read_tokens
from ..schemas.cell import Cell
from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.steplog import TIME_POINTS, TokenRow
from .export_files import write_table

IDENTITY = ["gpu", "target", "split", "drafter", "k", "c", "start"]
STEP_COLUMNS = IDENTITY + ["wall", "num_reqs", "num_tokens", "decode_reqs", "spec_tokens", "prefill_tokens",
                           "ctx_tokens", "full_graph", "padded_tokens", "hist", "since_prev_ms",
                           *(f"t_{p}" for p in TIME_POINTS if p not in ("exec_end",))]
OUTPUT_COLUMNS = IDENTITY + ["req", "question_id", "category", "prompt_tokens", "output_ids"]
TOKEN_COLUMNS = IDENTITY + ["step", "wall", "req", "batch", "draft_pos", "ctx", "out_pos", "token", "target_top", "accepted",
                            "t_prob", "t_entropy", "t_margin", "d_prob", "d_entropy", "d_margin"]


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


def steps_frame(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> pd.DataFrame:
    """One row per engine step of every complete timed pass run with the step log."""
    rows: list[dict[str, Any]] = []
    logs: dict[str, StepLog] = {}
    for p, key, folder in logged_passes(run, phases, identity):
        assert p.steplog is not None
        log = logs.get(p.steplog) or logs.setdefault(p.steplog, read_launch(folder))
        for s in pass_steps(log, p) or ():
            g, sc = s.gpu, s.sched
            times = {f"t_{t}": getattr(g, f"t_{t}") if g else None for t in TIME_POINTS if t != "exec_end"}
            rows.append({**asdict(key), "start": p.repeat, "wall": sc.wall, "num_reqs": sc.num_reqs,
                         "num_tokens": sc.num_tokens, "decode_reqs": sc.decode_reqs, "spec_tokens": sc.spec_tokens,
                         "prefill_tokens": sc.prefill_tokens, "ctx_tokens": sc.ctx_tokens,
                         "full_graph": None if sc.graph_mode is None else sc.graph_mode == "FULL",
                         "padded_tokens": sc.padded_tokens, "hist": list(sc.hist),
                         "since_prev_ms": g.since_prev_ms if g else None, **times})
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def _request_of(rows: Sequence[TokenRow], candidates: dict[int, RequestRecord]) -> int | None:
    """The request (index in requests.jsonl) whose output holds every kept guess of ``rows`` (one vLLM request)
    at its position; None unless exactly one request of the pass agrees (the engine's request id is its own)."""
    kept = [(r.out_pos, r.token) for r in rows if r.accepted and r.out_pos is not None and r.out_pos >= 0]

    def agrees(out: list[int]) -> bool:  # guesses kept past max_tokens were cut from the output: not evidence
        inside = [(pos, tok) for pos, tok in kept if pos < len(out)]
        return bool(inside) and all(out[pos] == tok for pos, tok in inside)

    found = [i for i, rec in candidates.items() if rec.output_token_ids and agrees(rec.output_token_ids)]
    return found[0] if len(found) == 1 else None


def tokens_frame(run: Path, phases: Sequence[PhaseInfo], requests: Sequence[RequestRecord], identity: Identity) -> pd.DataFrame:
    """One row per verified guess of every complete timed pass run at the ``tokens`` level — the rows of the
    pass's steps, by step number, as the results' ``steplog_token_*`` keys take them; ``req`` matches
    ``outputs``' (found by the guesses kept: they are the output's tokens at their positions)."""
    rows: list[dict[str, Any]] = []
    logs: dict[Path, tuple[StepLog, list[TokenRow]]] = {}
    for p, key, folder in logged_passes(run, phases, identity):
        if folder not in logs:
            logs[folder] = (read_launch(folder), read_tokens(folder)[0])
        log, launch_tokens = logs[folder]
        tokens = pass_tokens(launch_tokens, pass_steps(log, p) or ())
        candidates = {i: r for i, r in enumerate(requests)
                      if r.phase == "measure" and r.repeat == p.repeat and Cell.of_record(r) == p.cell}
        by_req: dict[str | None, list[TokenRow]] = {}
        for t in tokens:
            by_req.setdefault(t.req_id, []).append(t)
        req_of = {rid: _request_of(ts, candidates) for rid, ts in by_req.items()}
        rows += [{**asdict(key), "start": p.repeat, **{k: getattr(t, k) for k in TOKEN_COLUMNS[len(IDENTITY):] if k != "req"},
                  "req": req_of[t.req_id]} for t in tokens]
    return pd.DataFrame(rows, columns=TOKEN_COLUMNS)


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


def export_steps(requests: Sequence[RequestRecord], run: Path, out: Path, identity: Identity, run_name: str) -> list[Path]:
    """``steps/`` and ``outputs/`` under ``out``; ``identity`` maps a cell to its key in the tables;
    files named per ``run_name`` as every exported table is (``export_files.write_table``)."""
    written = []
    phases = read_phases(Path(run))
    for name, frame in (("steps", steps_frame(Path(run), phases, identity)),
                        ("tokens", tokens_frame(Path(run), phases, requests, identity)),
                        ("outputs", outputs_frame(requests, identity))):
        if not frame.empty:
            written += write_table(out, name, frame.assign(run=run_name), run_name)
    return written
