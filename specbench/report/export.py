"""`specbench export` (and ``report --format parquet``): a run in the layout of the public spec-decode profiling tables (``runs`` and ``requests``).

Paths are ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/RUN-rSTART.parquet``: one file per run and repeat
(``start``), named by ``part_path``, so exports of many runs (other loads, other machines) into one
root stack, and exporting a run again replaces only its own files. Every file carries gpu, target,
split, drafter, k, c, start and run, so ``pd.read_parquet(root / "runs")`` holds them all apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd

from ..errors import ResultsError
from ..schemas.cell import Cell
from ..schemas.meta import RunMeta
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from .load import RunResults, load_run, read_requests

RUN_COLUMNS = ["gpu", "target", "split", "drafter", "k", "c", "start", "mode", "throughput_tps", "output_tokens",
               "requests", "steps", "guessed_tokens", "accepted_tokens", "committed_tokens", "elapsed_s",
               "engine", "engine_version", "specbench_version", "run"]
#: the columns a file is per: one directory per (gpu, target, split, drafter, k), one file per (run, start)
PART_KEYS = ("gpu", "target", "split", "drafter", "k", "start")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "none"


def _drafter(row: ResultRow, meta: RunMeta) -> str:
    name = meta.raw.config(row.run).get("drafter") or row.method or "none"
    return _slug(str(name).split("/")[-1]) if row.method not in (None, "baseline") else "none"


def run_id(meta: RunMeta | None, fallback: str) -> str:
    """A run's name in file names, the same wherever its directory is copied or moved: the suite, the
    time it started and a hash of what meta.json recorded first (suite file, host), so two runs started
    in the same second elsewhere still differ. Without meta.json: ``fallback`` (the directory's name)."""
    if meta is None or not meta.started_at:
        return _slug(fallback)
    first = {"started_at": meta.started_at, "suite": meta.suite_name,
             "suite_file": meta.suite_file.sha256 if meta.suite_file else None,
             "host": meta.host.to_dict() if meta.host else None}
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()[:8]
    stamp = re.sub(r"[^0-9T]", "", meta.started_at.split("+")[0])
    return f"{_slug(meta.suite_name or 'run')}-{stamp}-{digest}"


def part_path(out: Path, table: str, part: dict[str, object], run: str) -> Path:
    """The file of one run's rows of ``table`` for one (gpu, target, split, drafter, k, start): the one
    naming rule of every table, so files of different runs never collide and a re-export overwrites."""
    folder = out / table / _slug(str(part["gpu"])) / _slug(str(part["target"])) / _slug(str(part["split"]))
    return folder / f"{part['drafter']}-k{part['k']}" / f"{run}-r{part['start']}.parquet"


def write_table(out: Path, table: str, frame: pd.DataFrame, run: str) -> list[Path]:
    """``frame`` (with the ``PART_KEYS`` columns) as one file per ``part_path``; first removes every
    file ``run`` has under ``out/table`` from an earlier export (cells or repeats since superseded),
    never another run's."""
    for old in list((out / table).rglob(f"{run}-r*.parquet")):
        if re.fullmatch(rf"{re.escape(run)}-r\d+\.parquet", old.name):
            old.unlink()
    written = []
    for key, part in frame.groupby(list(PART_KEYS), sort=False):
        path = part_path(out, table, dict(zip(PART_KEYS, key, strict=True)), run)
        path.parent.mkdir(parents=True, exist_ok=True)
        part.to_parquet(path, index=False)
        written.append(path)
    return written


def tables(results: RunResults, requests: list[RequestRecord], gpu: str,
           run: str = "run") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``runs`` (one row per cell) and ``requests`` (one row per measured request) frames."""
    meta = results.meta or RunMeta()
    target = meta.raw.model or "unknown"
    runs, key_of = [], {}
    for row in results.rows:
        k = row.num_speculative_tokens or 0
        c = row.concurrency or row.max_concurrency or 0
        ident = {"gpu": gpu, "target": target, "split": row.dataset, "drafter": _drafter(row, meta), "k": k, "c": c}
        key_of[Cell.of_row(row)] = ident
        runs.append({**ident, "start": 0, "mode": "load", "throughput_tps": row.output_throughput_tps,
                     "output_tokens": row.output_tokens, "requests": row.requests,
                     "steps": row.stream_steps, "guessed_tokens": row.spec_draft_tokens,
                     "accepted_tokens": row.spec_accepted_tokens, "committed_tokens": row.output_tokens,
                     "elapsed_s": row.duration_s, "engine": row.engine,
                     "engine_version": row.server_version, "specbench_version": meta.specbench_version,
                     "run": run})
    reqs = []
    for r in requests:
        cell_ident = key_of.get(Cell.of_record(r))
        if r.phase != "measure" or cell_ident is None:
            continue
        reqs.append({**cell_ident, "start": r.repeat, "question_id": f"{r.prompt_id}#{r.turn}" if r.turn else r.prompt_id,
                     "category": r.category, "prompt_tokens": r.prompt_tokens, "chunks": list(r.chunk_tokens),
                     "times": [t - r.send_time for t in r.chunk_times], "output_ids": r.output_token_ids,
                     "error": r.error, "run": run})
    return pd.DataFrame(runs, columns=RUN_COLUMNS), pd.DataFrame(reqs)


def export(results: RunResults, requests: list[RequestRecord], out: Path, gpu: str = "cpu") -> list[Path]:
    run = run_id(results.meta, results.path.parent.name if results.path else "run")
    written = []
    for name, frame in zip(("runs", "requests"), tables(results, requests, gpu, run), strict=True):
        if not frame.empty:
            written += write_table(out, name, frame, run)
    return written


def export_run(run: Path, out: Path, gpu: str = "cpu") -> list[Path]:
    """One run directory's rows and measured requests as parquet files under ``out``."""
    return export(load_run(run), read_requests(Path(run)) or [], out, gpu=gpu)


def write(paths: list[Path], output: Path | None) -> str:
    """The ``parquet`` report format: one run directory, ``--output`` the root of the tables."""
    if len(paths) != 1 or output is None:
        raise ResultsError("--format parquet: give one run directory and --output DIR (the root of TABLE/GPU/TARGET/...)")
    return f"wrote {len(export_run(paths[0], output))} parquet files under {output}"
