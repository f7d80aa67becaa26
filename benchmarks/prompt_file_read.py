"""Time and peak memory of loading prompts from a big JSONL file (issue 31, item 5).

A suite that asks for ``requests: 3`` of a 100 MB prompt file used to parse all of it (4.7 s, 641 MB
peak on the reporting machine). This generates such a file once (``--mb``, rows of about 1 KiB of
text, non-ASCII included) and loads it in a fresh child process per case with
``specbench.datasets.load_prompts``: wall time of the call, and the child's peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) minus its RSS just before the call (the interpreter
and imports, the same for every case).

Cases: ``first 3`` (the default selection), ``first 1000``, ``shuffle 3`` (a shuffle over the whole
file, which must read every row) and ``all``.

Usage: ``python benchmarks/prompt_file_read.py [--mb 100] [--keep] [--label after]``; prints a
markdown table and writes ``benchmarks/results/prompt_file_read-<stamp>[-label].{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import resource
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


def child(path: str, case: str) -> None:
    """One load in this process; prints {seconds, peak_mb, prompts} as JSON."""
    sys.path.insert(0, str(ROOT))
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
    parser.add_argument("--label", default="", help="appended to the result files' names (e.g. before, after)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    folder = Path(tempfile.mkdtemp(prefix="specbench-bigprompts-"))
    path = folder / "big.jsonl"
    rows = write_file(path, args.mb)
    results = {}
    for case in CASES:
        done = subprocess.run([sys.executable, __file__, "--child", str(path), case], capture_output=True, text=True, check=True)
        results[case] = json.loads(done.stdout)
    size_mb = path.stat().st_size / 1e6
    lines = [f"Prompt file: {size_mb:.0f} MB, {rows:,} rows (JSONL).", "",
             "| case | prompts | time | peak RSS added (MB) |", "| --- | --- | --- | --- |"]
    lines += [f"| {case} | {r['prompts']:,} | {r['seconds'] * 1000:,.1f} ms | {r['peak_mb']:.1f} |" for case, r in results.items()]
    table = "\n".join(lines) + "\n"
    print(table)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = HERE / "results" / f"prompt_file_read-{stamp}{'-' + args.label if args.label else ''}"
    out.with_suffix(".md").write_text(table)
    out.with_suffix(".json").write_text(json.dumps({"mb": size_mb, "rows": rows, "cases": results}, indent=1) + "\n")
    if args.keep:
        print(f"kept {path}")
    else:
        path.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
