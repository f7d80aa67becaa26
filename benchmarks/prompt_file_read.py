"""Time and peak memory of loading prompts from a big JSONL file (issue 31, item 5).

A suite that asks for ``requests: 3`` of a 100 MB prompt file used to parse all of it (4.7 s, 641 MB
peak on the reporting machine). This generates such a file once (``--mb``, rows of about 1 KiB of
text, non-ASCII included) and loads it in a fresh child process per case with
``specbench.datasets.load_prompts``: wall time of the call, and the child's peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) minus its RSS just before the call (the interpreter
and imports, the same for every case).

Cases: ``first 3`` (the default selection), ``first 1000``, ``shuffle 3`` (a shuffle over the whole
file, which must read every row) and ``all``. ``--code DIR`` measures the specbench of another
checkout (e.g. the commit before the change, unpacked with ``git archive``) against the same file,
the two interleaved case by case so both see the same machine load; each case runs ``--repeats``
times and the table gives the median time (the peak RSS does not vary).

Usage: ``python benchmarks/prompt_file_read.py [--mb 100] [--repeats 3] [--code OLD_CHECKOUT] [--keep]``;
prints a markdown table and writes ``results/benchmarks/prompt_file_read-<stamp>.{md,json}`` (git-ignored; evidence is copied into results/evidence/).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = {"first 3": {"requests": 3}, "first 1000": {"requests": 1000},
         "shuffle 3": {"requests": 3, "selection": "shuffle", "seed": 1}, "all": {"requests": "all"}}


def write_file(path: Path, mb: int) -> int:
    """About ``mb`` MB of JSONL prompts; the number of rows."""
    text = ("Explain the difference between speculative and plain decoding — in detail, with examples. " * 11)[:1000]
    rows, size = 0, 0
    with path.open("w", encoding="utf-8") as f:
        while size < mb * 1_000_000:
            line = json.dumps({"id": f"q{rows}", "prompt": f"{rows}: {text}", "category": f"c{rows % 7}"},
                              ensure_ascii=False) + "\n"
            f.write(line)
            size += len(line.encode())
            rows += 1
    return rows


def child(path: str, case: str, code: str) -> None:
    """One load in this process with the specbench under ``code``; prints {seconds, peak_mb, prompts} as JSON."""
    sys.path.insert(0, code)
    from specbench.datasets import DatasetSpec, load_prompts

    spec = DatasetSpec.from_mapping({"name": "big", "path": path, **CASES[case]}, "bench", Path("."))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    prompts = load_prompts(spec)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "peak_mb": (peak - before) / 1024, "prompts": len(prompts)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the generated file (printed)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--code", help="another checkout's root, measured beside this one (as 'before')")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    folder = Path(tempfile.mkdtemp(prefix="specbench-bigprompts-"))
    path = folder / "big.jsonl"
    rows = write_file(path, args.mb)
    codes = {**({"before": str(Path(args.code).resolve())} if args.code else {}), "this checkout": str(ROOT)}
    results: dict[str, dict[str, list[dict]]] = {label: {case: [] for case in CASES} for label in codes}
    for case in CASES:
        for _ in range(args.repeats):
            for label, code in codes.items():
                done = subprocess.run([sys.executable, __file__, "--child", str(path), case, code],
                                      capture_output=True, text=True, check=True)
                results[label][case].append(json.loads(done.stdout))
    size_mb = path.stat().st_size / 1e6
    lines = [f"Prompt file: {size_mb:.0f} MB, {rows:,} rows (JSONL); median of {args.repeats} runs per case.", "",
             "| code | case | prompts | time | peak RSS added (MB) |", "| --- | --- | --- | --- | --- |"]
    for label, cases in results.items():
        for case, runs in cases.items():
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = max(r["peak_mb"] for r in runs)
            lines.append(f"| {label} | {case} | {runs[0]['prompts']:,} | {seconds * 1000:,.1f} ms | {peak:.1f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = HERE.parent / "results" / "benchmarks" / f"prompt_file_read-{stamp}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table)
    out.with_suffix(".json").write_text(json.dumps({"mb": size_mb, "rows": rows, "cases": results}, indent=1) + "\n")
    if args.keep:
        print(f"kept {path}")
    else:
        path.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
