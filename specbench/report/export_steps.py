"""The export's ``steps`` and ``outputs`` tables (``../shared/reference/profilings_layout.md``): one row per
engine step of each timed pass (from the step log, docs/steplog.md), and each measured request's output
token ids. Same ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/`` layout and identity columns as ``export.py``'s
runs and requests, timed passes only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..measure.steplog import StepLog
from ..run.rundir import PHASES, scan_lines
from ..run.steplog import pass_steps, read_launch
from ..schemas.cell import Cell
from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.steplog import TIME_POINTS
from .export_files import write_table
from .load import RunResults

IDENTITY = ["gpu", "target", "split", "drafter", "k", "c", "start"]
STEP_COLUMNS = IDENTITY + ["wall", "num_reqs", "num_tokens", "decode_reqs", "spec_tokens", "prefill_tokens",
                           "ctx_tokens", "full_graph", "padded_tokens", "hist", "since_prev_ms",
                           *(f"t_{p}" for p in TIME_POINTS if p not in ("exec_end",))]
OUTPUT_COLUMNS = IDENTITY + ["req", "question_id", "category", "prompt_tokens", "output_ids"]

#: the cell's identity columns but start (gpu, target, split, drafter, k, c), as export.tables names them
Identity = Callable[[Cell], dict[str, Any] | None]


def read_phases(run: Path) -> list[PhaseInfo]:
    return [PhaseInfo.from_dict(d) for _, d in scan_lines(run / PHASES, PHASES)[0]]


def steps_frame(run: Path, phases: Sequence[PhaseInfo], identity: Identity) -> pd.DataFrame:
    """One row per engine step of every complete timed pass run with the step log."""
    rows: list[dict[str, Any]] = []
    logs: dict[str, StepLog] = {}
    for p in phases:
        ident = identity(p.cell)
        if not p.steplog or not p.complete or ident is None:
            continue
        folder = (run / p.steplog).resolve()
        if not folder.is_relative_to(run.resolve()) or not folder.is_dir():
            continue
        log = logs.get(p.steplog) or logs.setdefault(p.steplog, read_launch(folder))
        for s in pass_steps(log, p) or ():
            g, sc = s.gpu, s.sched
            times = {f"t_{t}": getattr(g, f"t_{t}") if g else None for t in TIME_POINTS if t != "exec_end"}
            rows.append({**ident, "start": p.repeat, "wall": sc.wall, "num_reqs": sc.num_reqs,
                         "num_tokens": sc.num_tokens, "decode_reqs": sc.decode_reqs, "spec_tokens": sc.spec_tokens,
                         "prefill_tokens": sc.prefill_tokens, "ctx_tokens": sc.ctx_tokens,
                         "full_graph": None if sc.graph_mode is None else sc.graph_mode == "FULL",
                         "padded_tokens": sc.padded_tokens, "hist": list(sc.hist),
                         "since_prev_ms": g.since_prev_ms if g else None, **times})
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def outputs_frame(requests: Sequence[RequestRecord], identity: Identity) -> pd.DataFrame:
    """Each measured request's output token ids; ``req`` is its index in requests.jsonl."""
    rows = []
    for i, r in enumerate(requests):
        ident = identity(Cell.of_record(r))
        if r.phase != "measure" or ident is None:
            continue
        rows.append({**ident, "start": r.repeat, "req": i,
                     "question_id": f"{r.prompt_id}#{r.turn}" if r.turn else r.prompt_id,
                     "category": r.category, "prompt_tokens": r.prompt_tokens, "output_ids": r.output_token_ids})
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)


def identities(results: RunResults, runs: pd.DataFrame) -> Identity:
    """Each cell's identity columns as the ``runs`` frame (one row per results row, in order) has them."""
    key_of = {Cell.of_row(row): {k: rec[k] for k in IDENTITY[:-1]}
              for row, rec in zip(results.rows, runs.to_dict("records"))}
    return key_of.get


def export_steps(requests: Sequence[RequestRecord], run: Path, out: Path, identity: Identity, run_name: str) -> list[Path]:
    """``steps/`` and ``outputs/`` under ``out``; ``identity`` maps a cell to export's identity columns;
    files named per ``run_name`` as every exported table is (``export_files.write_table``)."""
    written = []
    for name, frame in (("steps", steps_frame(Path(run), read_phases(Path(run)), identity)),
                        ("outputs", outputs_frame(requests, identity))):
        if not frame.empty:
            written += write_table(out, name, frame.assign(run=run_name), run_name)
    return written
