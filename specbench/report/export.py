"""`specbench export` (and ``report --format parquet``): a run in the layout of the public spec-decode profiling tables (``runs`` and ``requests``).

Paths are ``TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/RUN-rSTART.parquet``: one file per run and repeat
(``start``), named by ``part_path``, so exports of many runs (other loads, other machines) into one
root stack, and exporting a run again replaces only its own files, all or nothing (``export_files``). Every
file carries gpu, target, split, drafter, k, c, start and run, so ``pd.read_parquet(root / "runs")`` holds
them all apart.

GPU: each config's label is the slug of the accelerator its server recorded in meta.json
(``schemas.accelerator``: ``h200``, ``cpu`` when none was named); ``--gpu`` labels every row instead. A run
from before meta.json recorded it is labelled ``cpu``, as before, and the export says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import ResultsError
from ..run.readback import RunResults, read_requests, read_run
from ..schemas.accelerator import NO_ACCELERATOR
from ..schemas.cell import Cell
from ..schemas.meta import RunMeta
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from .export_files import replacing, run_id, slug
from .export_steps import export_steps, identities

RUN_COLUMNS = ["gpu", "target", "split", "drafter", "k", "c", "start", "mode", "throughput_tps", "output_tokens",
               "requests", "steps", "guessed_tokens", "accepted_tokens", "committed_tokens", "elapsed_s",
               "engine", "engine_version", "specbench_version", "run"]


@dataclass(frozen=True)
class GpuLabels:
    """Each config's ``gpu`` label (``default`` for a config with none), and what the export says about them."""

    by_config: dict[str, str]
    default: str = NO_ACCELERATOR
    notes: tuple[str, ...] = ()

    def of(self, config: str | None) -> str:
        return self.by_config.get(config or "", self.default)


def gpu_labels(meta: RunMeta | None, override: str | None, where: str) -> GpuLabels:
    """The labels of a run's configs: ``override`` (``--gpu``) for all, else each server's recorded accelerator;
    a note for a run that recorded none, a GPU server whose accelerator was not read, a config whose starts
    ran on different models."""
    if override is not None:
        return GpuLabels({}, override)
    servers = (meta.servers if meta else None) or {}
    recorded = {name: s.accelerator for name, s in servers.items() if s.accelerator is not None}
    if not recorded:
        return GpuLabels({}, notes=(f"{where}: meta.json records no accelerator (a run from before specbench recorded "
                                    f"it): labelled gpu={NO_ACCELERATOR}; --gpu names it",))
    notes = []
    for name, acc in recorded.items():
        if not acc.name and acc.count != 0:
            notes.append(f"{where}: config {name}: no accelerator named ({acc.why or 'not read'}): labelled "
                         f"gpu={NO_ACCELERATOR}; --gpu names it")
        starts = {s.accelerator.slug for s in ((meta.server_starts if meta else None) or {}).get(name, []) if s.accelerator}
        if len(starts) > 1:
            notes.append(f"{where}: config {name}: its server starts ran on {', '.join(sorted(starts))}: labelled "
                         f"{acc.slug}, its latest")
    return GpuLabels({name: acc.slug for name, acc in recorded.items()}, notes=tuple(notes))


@dataclass(frozen=True)
class Exported:
    """What an export wrote, and what it says (one line each)."""

    files: list[Path]
    notes: tuple[str, ...] = ()


def _drafter(row: ResultRow, meta: RunMeta) -> str:
    name = meta.raw.config(row.run).get("drafter") or row.method or "none"
    return slug(str(name).split("/")[-1]) if row.method not in (None, "baseline") else "none"


def tables(results: RunResults, requests: list[RequestRecord], gpu: GpuLabels | str,
           run: str = "run") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``runs`` (one row per cell) and ``requests`` (one row per measured request) frames; ``gpu``: each
    config's label (a text: every config's)."""
    labels = GpuLabels({}, gpu) if isinstance(gpu, str) else gpu
    meta = results.meta or RunMeta()
    target = meta.raw.model or "unknown"
    runs, key_of = [], {}
    for row in results.rows:
        k = row.num_speculative_tokens or 0
        c = row.concurrency or row.max_concurrency or 0
        ident = {"gpu": labels.of(row.run), "target": target, "split": row.dataset, "drafter": _drafter(row, meta),
                 "k": k, "c": c}
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


def export_run(run: Path, out: Path, gpu: str | None = None) -> Exported:
    """One run directory's rows, measured requests, steps, tokens and outputs as parquet files under ``out``,
    replacing the run's files of an earlier export all or nothing; ``gpu``: the label of every row (default: each
    config's recorded accelerator)."""
    results, requests = read_run(run), read_requests(Path(run)) or []
    labels = gpu_labels(results.meta, gpu, str(run))
    name = run_id(results.meta, results.path.parent.name if results.path else "run")
    with replacing(out, name) as rep:
        runs, reqs = tables(results, requests, labels, name)
        for table, frame in (("runs", runs), ("requests", reqs)):
            if not frame.empty:
                rep.frame(table, frame)
        export_steps(requests, Path(run), rep, identities(results, runs))
    return Exported(list(rep.new), labels.notes)


def write(paths: list[Path], output: Path | None, gpu: str | None = None) -> str:
    """The ``parquet`` report format: one run directory, ``--output`` the root of the tables."""
    if len(paths) != 1 or output is None:
        raise ResultsError("--format parquet: give one run directory and --output DIR (the root of TABLE/GPU/TARGET/...)")
    done = export_run(paths[0], output, gpu)
    return "\n".join([f"wrote {len(done.files)} parquet files under {output}", *(f"note: {n}" for n in done.notes)])
