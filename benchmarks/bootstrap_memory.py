"""Memory of the paired bootstraps per cell (issue: trust, item 7), before and after resampling in blocks.

Each cell with a baseline runs ``paired_speedup`` and ``paired_decomposition`` (measure.add_comparisons)
and, when graded, ``paired_accuracy`` (quality.add_quality): 2000 resamples of the cell's n paired
prompts. *Before* draws the whole 2000 × n index matrix at once (``bootstrap.BLOCK_ELEMENTS`` set to
2000·n: one block, the old code path); *after* is the shipped block size.

Per (n, variant) one fresh child process builds n synthetic request pairs, then runs each function
with the peak RSS reset (``/proc/self/clear_refs`` ← 5) and ``tracemalloc`` restarted just before it:
"RSS added" = VmHWM after − VmRSS before, "traced peak" = tracemalloc's peak (numpy's buffers are
traced). A child runs under an address-space limit (``--limit-gib``), so a variant too large for the
machine ends in MemoryError, reported as such, instead of pushing other processes out. The CIs of
both variants are compared value for value.

Usage: ``python benchmarks/bootstrap_memory.py`` (about a minute on 2 cores); writes
``results/benchmarks/bootstrap_memory-<stamp>.{md,json}`` (git-ignored; evidence is copied into results/evidence/).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import numpy as np

from specbench.grade import paired_accuracy
from specbench.measure.compare import paired_decomposition, paired_speedup
from specbench.schemas.request import RequestRecord
from specbench.util import bootstrap

RESAMPLES = 2000
GIB = 1 << 30


def _status(key: str) -> int:
    """A /proc/self/status value in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def _pairs(n: int, chunks: int) -> list[tuple[RequestRecord, RequestRecord]]:
    rng = np.random.default_rng(0)

    def record(i: int, config: str) -> RequestRecord:
        sizes = [1, *rng.integers(1, 5, size=chunks - 1).tolist()]
        times = np.cumsum(rng.uniform(0.005, 0.03, size=chunks)).tolist()
        return RequestRecord(prompt_id=str(i), dataset="d", config=config, chunk_times=times, chunk_tokens=sizes,
                             output_tokens=sum(sizes), token_source="usage_continuous")

    return [(record(i, "spec"), record(i, "base")) for i in range(n)]


def child(n: int, variant: str, chunks: int) -> dict:
    if variant == "before":
        bootstrap.BLOCK_ELEMENTS = RESAMPLES * n
    pairs = _pairs(n, chunks)
    right = [(bool(i % 3), bool(i % 4)) for i in range(n)]
    calls = {"paired_speedup": lambda: paired_speedup(pairs),
             "paired_decomposition": lambda: list(paired_decomposition(pairs)),
             "paired_accuracy": lambda: paired_accuracy(right)}
    out: dict = {"n": n, "variant": variant, "block_elements": bootstrap.BLOCK_ELEMENTS,
                 "rss_inputs_bytes": _status("VmRSS"), "functions": {}}
    for name, call in calls.items():
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        rss0 = _status("VmRSS")
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            result, error = call(), None
        except MemoryError:
            result, error = None, "MemoryError"
        wall = time.perf_counter() - t0
        _, traced = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["functions"][name] = {"rss_added_bytes": _status("VmHWM") - rss0, "traced_peak_bytes": traced,
                                  "wall_s": wall, "error": error, "result": result}
    return out


def run_child(n: int, variant: str, args: argparse.Namespace) -> dict:
    limit = int(args.limit_gib * GIB)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, __file__, "--child", str(n), variant, "--chunks", str(args.chunks)],
                          capture_output=True, text=True, env=env, preexec_fn=cap, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child n={n} {variant} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


def _mib(b: float) -> str:
    return f"{b / (1 << 20):,.0f}"


def table(runs: list[dict]) -> str:
    lines = ["| n pairs | function | before: RSS added MiB | before: traced peak MiB | before s | "
             "after: RSS added MiB | after: traced peak MiB | after s | same CI |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    by = {(r["n"], r["variant"]): r for r in runs}
    for n in sorted({r["n"] for r in runs}):
        b, a = by[(n, "before")]["functions"], by[(n, "after")]["functions"]
        for name in a:
            fb, fa = b[name], a[name]
            before = ((f"{fb['error']} (limit)",) * 2 if fb["error"] else (_mib(fb["rss_added_bytes"]), _mib(fb["traced_peak_bytes"])))
            same = "—" if fb["error"] or fa["error"] else ("yes" if fb["result"] == fa["result"] else "NO")
            lines.append(f"| {n:,} | {name} | {before[0]} | {before[1]} | {fb['wall_s']:.2f} | {_mib(fa['rss_added_bytes'])} | "
                         f"{_mib(fa['traced_peak_bytes'])} | {fa['wall_s']:.2f} | {same} |")
    sizes = sorted({r["n"] for r in runs})
    lines += ["", "RSS of each child with its inputs built (n request pairs, before any bootstrap): "
              + ", ".join(f"n = {n:,}: {_mib(by[(n, 'after')]['rss_inputs_bytes'])} MiB" for n in sizes) + ".",
              "Before, the index matrix alone is 2000 · n · 8 bytes ("
              + ", ".join(f"{RESAMPLES * n * 8 / GIB:.2f} GiB at n = {n:,}" for n in sizes)
              + "); paired_speedup gathers 2 float columns through it (×2 that), paired_decomposition 8 (×8), "
              "paired_accuracy 1. MemoryError (limit): the variant needed more than the child's address-space limit."]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="20000,100000", help="paired prompts per cell, comma-separated")
    p.add_argument("--chunks", type=int, default=16, help="chunks per synthetic request")
    p.add_argument("--limit-gib", type=float, default=8.0, help="address-space limit of each child process")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    p.add_argument("--child", nargs=2, metavar=("N", "VARIANT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1], args.chunks)))
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.time()
    runs = []
    for n in (int(s) for s in args.sizes.split(",")):
        for variant in ("before", "after"):
            print(f"n={n:,} {variant} ...", flush=True)
            runs.append(run_child(n, variant, args))
    meta = {"started": started, "runtime_s": time.time() - t0, "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "numpy": np.__version__, "resamples": RESAMPLES, "block_elements": bootstrap.BLOCK_ELEMENTS,
            "chunks_per_request": args.chunks, "limit_gib": args.limit_gib, "argv": sys.argv[1:]}
    text = (f"Run {started}, {meta['cpus']} CPUs, Python {meta['python']}, numpy {meta['numpy']}, {meta['runtime_s']:.0f} s; "
            f"{RESAMPLES} resamples; after = blocks of {bootstrap.BLOCK_ELEMENTS:,} indices; each child limited to "
            f"{args.limit_gib:g} GiB of address space\n\n" + table(runs) + "\n\n"
            "RSS added = peak RSS during the call − RSS before it (inputs already built); traced peak = tracemalloc's "
            "peak over the call. Times are reported, not compared: one run on a shared machine.\n")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.out / f"bootstrap_memory-{stamp}.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    (args.out / f"bootstrap_memory-{stamp}.md").write_text(text)
    print("\n" + text + f"\nwritten: {args.out}/bootstrap_memory-{stamp}.{{json,md}}")


if __name__ == "__main__":
    main()
