"""`specbench export` (and ``report --format parquet``): a run in the layout of the public spec-decode profiling tables (``runs`` and ``requests``).

Paths are ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/RUN-rSTART.parquet``: one file per run and repeat
(``start``), named by ``part_path``, so exports of many runs (other loads, other machines) into one
root stack, and exporting a run again replaces only its own files. Every file carries gpu, target,
split, drafter, k, c, start and run, so ``pd.read_parquet(root / "runs")`` holds them all apart.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import ResultsError
from ..run.readback import RunResults, load_run, read_requests
from ..schemas.cell import Cell
from ..schemas.meta import RunMeta
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..util.diskio import all_or_none
from .export_files import run_id, slug, write_table
from .export_steps import export_steps, identities

RUN_COLUMNS = ["gpu", "target", "split", "drafter", "k", "c", "start", "mode", "throughput_tps", "output_tokens",
               "requests", "steps", "guessed_tokens", "accepted_tokens", "committed_tokens", "elapsed_s",
               "engine", "engine_version", "specbench_version", "run"]


def _drafter(row: ResultRow, meta: RunMeta) -> str:
    name = meta.raw.config(row.run).get("drafter") or row.method or "none"
    return slug(str(name).split("/")[-1]) if row.method not in (None, "baseline") else "none"


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
    with all_or_none() as written:  # a failed export leaves none of its files: some of a run's would read as all of it
        for name, frame in zip(("runs", "requests"), tables(results, requests, gpu, run), strict=True):
            if not frame.empty:
                written += write_table(out, name, frame, run)
    return written


def export_run(run: Path, out: Path, gpu: str = "cpu") -> list[Path]:
    """One run directory's rows and measured requests as parquet files under ``out``."""
    results, requests = load_run(run), read_requests(Path(run)) or []
    with all_or_none() as written:
        written += export(results, requests, out, gpu=gpu)
        written += export_steps(requests, Path(run), out, identities(results, tables(results, [], gpu)[0]),
                                run_id(results.meta, results.path.parent.name if results.path else "run"))
    return written


def write(paths: list[Path], output: Path | None) -> str:
    """The ``parquet`` report format: one run directory, ``--output`` the root of the tables."""
    if len(paths) != 1 or output is None:
        raise ResultsError("--format parquet: give one run directory and --output DIR (the root of TABLE/GPU/TARGET/...)")
    return f"wrote {len(export_run(paths[0], output))} parquet files under {output}"
