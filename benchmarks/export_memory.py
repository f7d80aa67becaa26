"""Peak memory and time of reading a long step log (issue 38 item 10), this checkout against an older one: `specbench
export` (``--what export``) and the run's results rebuilt from it (``--what results``: ``run.steplog.steplog_results``,
as the run does after every cell; timed twice, the launch parsed and then read from the cache).

A synthetic run directory: the HTML fixture run (tests/data/html/run: 3 configs × 2 data sets × 2 loads ×
3 repeats) with a phases.jsonl whose 36 timed passes each have a step-log window, and ``--launches`` launch
folders (one per config, or fewer) holding ``--steps`` engine steps in all (a sched and a gpu row each, the
``timing`` level, 1 ms apart), split evenly. Each variant exports it in a fresh child process under an
address-space limit (``--limit-gib``: a variant too large ends in MemoryError, reported as such, instead of
pushing other processes out); the child reports its peak RSS (``ru_maxrss``), its wall time and the rows of
the ``steps`` table it wrote (from the parquet footers) or, for the results, Σ ``steplog_steps`` over the cells and
the sha256 of every cell's step-log keys (equal before and after: the same numbers).

*before*: the code at ``--old`` (a git ref, extracted with ``git archive``): a list of dicts for every step of
every pass, then one DataFrame per table, every launch read kept by ``run.steplog``'s cache; *after*: this
checkout: one launch at a time, each pass written in 64k-row batches through pyarrow's ParquetWriter.

Usage: ``python benchmarks/export_memory.py --steps 1000000 2000000 --old d50a3c7`` (``--variants after`` for
this checkout only; ``--launches 3`` splits the steps over three launch folders; ``--what export results`` for
both; writes ``results/benchmarks/export_memory-<stamp>.{md,json}``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from specbench.run.servers import STEPLOG_DIR  # noqa: E402
from specbench.schemas.run_files import LOGS, META, PHASES, RESULTS  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "html" / "run"
WALL0 = 1_760_000_000.0
GIB = 1 << 30

SCHED = ('{{"step": {n}, "wall": {w:.3f}, "num_reqs": 8, "num_tokens": 32, "decode_reqs": 8, "spec_tokens": 24, '
         '"prefill_tokens": 0, "ctx_tokens": 4000, "running": 8, "waiting": 0, "kv_usage": 0.1, '
         '"hist": [0, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "drafts": 8, "draft_tokens": 24, "accepted": 9, '
         '"accepted_per_pos": [5, 3, 1], "graph_mode": "FULL", "padded_tokens": 32, "unpadded_tokens": 32}}\n')
GPU = ('{{"step": {n}, "wall": {w:.3f}, "t_fwd": 0.1, "t_fwd_end": 4.0, "t_lg0": 4.0, "t_lg1": 4.5, "t_samp": 4.5, '
       '"t_d0": 5.0, "t_d1": 7.0, "t_exec_end": 7.0, "t_end": 7.5, "since_prev_ms": 1.0}}\n')
HEADER = {"schema": "specbench.steplog/1", "pid": 1, "level": "timing", "vllm_version": "0.26.0", "runner": "v1",
          "clock": "cuda_event", "hooks": {}, "notes": [], "written_at": WALL0}

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
limit = int(float(sys.argv[4]) * (1 << 30))
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from pathlib import Path
import pyarrow.parquet as pq
from specbench.report.export import export_run
t0 = time.perf_counter()
try:
    export_run(Path(sys.argv[2]), Path(sys.argv[3]), gpu="bench")
    error = None
except MemoryError:
    error = "MemoryError"
wall = time.perf_counter() - t0
rows = sum(pq.ParquetFile(p).metadata.num_rows for p in Path(sys.argv[3], "steps").rglob("*.parquet")) if error is None else None
print(json.dumps({"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "wall_s": round(wall, 1),
                  "steps_rows": rows, "error": error}))
"""

RESULTS_CHILD = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
limit = int(float(sys.argv[4]) * (1 << 30))
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from pathlib import Path
from specbench.run.rundir import read_phases
from specbench.run.steplog import steplog_results
from specbench.schemas.row import ResultRow
run = Path(sys.argv[2])
phases = read_phases(run)
walls, rows = [], None
try:
    for _ in range(2):  # the first parses the launch, the second is a rebuild after a cell (read from the cache)
        t0 = time.perf_counter()
        found = steplog_results(run, phases)
        walls.append(round(time.perf_counter() - t0, 1))
    keys = {}
    for cell, got in found.items():
        row = ResultRow.start(cell.dataset, cell.config)
        got.add_to(row)
        keys[str(cell)] = row.to_dict(reference_first=False)
    rows = sum(k.get("steplog_steps") or 0 for k in keys.values())
    digest = hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]
    error = None
except MemoryError:
    error, digest = "MemoryError", None
print(json.dumps({"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "wall_s": walls[0] if walls else None, "rebuild_s": walls[1] if len(walls) > 1 else None,
                  "steps_rows": rows, "sha256": digest, "error": error}))
"""


def _iso(wall: float) -> str:
    return dt.datetime.fromtimestamp(wall, dt.UTC).isoformat()


def make_run(folder: Path, steps: int, launches: int) -> int:
    """The synthetic run directory; returns the steps that fall in a timed pass's window."""
    shutil.copytree(FIXTURE, folder)
    meta = json.loads((FIXTURE / META).read_text())  # its time span holds the steps: rows outside it are not the run's
    meta.update(started_at=_iso(WALL0 - 1.0), finished_at=_iso(WALL0 + steps / 1000 + 1.0))
    (folder / META).write_text(json.dumps(meta))
    configs = ["baseline", "ngram_k3", "draft_k5"]
    rows = json.loads((FIXTURE / RESULTS).read_text())
    cells = [(r["run"], r["dataset"], r["concurrency"]) for r in rows]
    per_launch, phases, in_windows = steps // launches, [], 0
    for i in range(launches):
        d = folder / LOGS / STEPLOG_DIR / f"{configs[i]}-s0"
        d.mkdir(parents=True)
        (d / "header-1.json").write_text(json.dumps(HEADER))
        with (d / "sched-1.jsonl").open("w") as s, (d / "gpu-2.jsonl").open("w") as g:
            for n in range(1, per_launch + 1):
                w = WALL0 + n / 1000
                s.write(SCHED.format(n=n, w=w))
                g.write(GPU.format(n=n, w=w))
    mine = {c: i for i, c in enumerate(configs[:launches])}
    passes = [(cell, rep) for cell in cells for rep in range(3) if cell[0] in mine]
    by_launch: dict[str, list] = {}
    for cell, rep in passes:
        by_launch.setdefault(cell[0], []).append((cell, rep))
    for config, group in by_launch.items():
        span = per_launch / len(group)
        for j, ((cfg, dataset, c), rep) in enumerate(group):
            lo, hi = WALL0 + (j * span + 1) / 1000, WALL0 + ((j + 1) * span) / 1000
            in_windows += int(round((hi - lo) * 1000)) + 1
            phases.append({"config": cfg, "dataset": dataset, "concurrency": c, "request_rate": None, "repeat": rep,
                           "wall_s": 1.0, "scraped_before": lo, "scraped_after": hi, "steplog": f"{LOGS}/{STEPLOG_DIR}/{config}-s0"})
    (folder / PHASES).write_text("".join(json.dumps(p) + "\n" for p in phases))
    return in_windows


def old_code(ref: str, into: Path) -> Path:
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "specbench"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into


def measure(code: Path, run: Path, out: Path, limit_gib: float, what: str = "export") -> dict:
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-c", CHILD if what == "export" else RESULTS_CHILD, str(code), str(run), str(out),
                           str(limit_gib)], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"peak_rss_mib": None, "wall_s": None, "steps_rows": None, "error": last[:200]}
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[2_000_000])
    ap.add_argument("--launches", type=int, default=1, help="launch folders the steps are split over (1 to 3)")
    ap.add_argument("--old", default="d50a3c7", help="the git ref of the code before")
    ap.add_argument("--limit-gib", type=float, default=12.0)
    ap.add_argument("--variants", nargs="+", default=["before", "after"], choices=["before", "after"])
    ap.add_argument("--what", nargs="+", default=["export"], choices=["export", "results"],
                    help="the export, the run's results rebuilt from the step log, or both")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="export-memory-") as tmp:
        before = old_code(args.old, Path(tmp) / "old")
        for steps in args.steps:
            run = Path(tmp) / f"run-{steps}"
            t0 = time.perf_counter()
            windowed = make_run(run, steps, args.launches)
            made = time.perf_counter() - t0
            for what in args.what:
                for name, code in ((n, c) for n, c in (("before", before), ("after", ROOT)) if n in args.variants):
                    r = measure(code, run, Path(tmp) / "out", args.limit_gib, what)
                    results.append({"what": what, "steps": steps, "launches": args.launches, "variant": name,
                                    "in_windows": windowed, **r})
                    print(json.dumps(results[-1]), f"(run made in {made:.0f} s)", flush=True)
            shutil.rmtree(run)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = HERE.parent / "results" / "benchmarks" / f"export_memory-{stamp}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["| what | steps | launches | variant | peak RSS MiB | wall s | rebuild s | steps rows | keys sha256 | error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['what']} | {r['steps']:,} | {r['launches']} | {r['variant']} | {r['peak_rss_mib'] or '—'} | {r['wall_s'] or '—'} | "
              f"{r.get('rebuild_s') or '—'} | {r['steps_rows'] if r['steps_rows'] is not None else '—'} | {r.get('sha256') or '—'} | "
              f"{r['error'] or ''} |" for r in results]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
