"""Where a speculative step's time goes, pass by pass and server start by server start (issues 33/34).

Reads a run directory made with ``server.steplog: timing`` (e.g. suites/gpu_swing_8b.yaml) and prints one
markdown row per timed pass: its server start, throughput, the engine's step time (mean / p50 / p95), the
mean of each part of a step (target forward, LM head, verify, drafter, gap), the drafter's total time, and its
longest calls over ``--slow-ms`` with when they came (a one-off stall, e.g. a kernel compiled for a shape the
warm-up did not run, is one long call; a slow server is slow in every step).

    python benchmarks/gpu/swing_table.py RUN_DIR [--config dspark_k7]   # e.g. results/evidence/h200/swing_8b.tar.xz unpacked
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specbench.run.steplog import pass_steps, read_launch  # noqa: E402
from specbench.schemas.phase import PhaseInfo  # noqa: E402
from specbench.schemas.run_files import PHASES, RESULTS  # noqa: E402


def part(steps, a, b):
    vals = [getattr(s.gpu, b) - getattr(s.gpu, a) for s in steps
            if s.gpu is not None and getattr(s.gpu, a) is not None and getattr(s.gpu, b) is not None]
    return statistics.fmean(vals) if vals else None


def fmt(x, d=2):
    return "—" if x is None else f"{x:.{d}f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--config", action="append", help="configs to show (default: every one with a step log)")
    p.add_argument("--slow-ms", type=float, default=20.0, help="list drafter calls longer than this (ms)")
    a = p.parse_args()
    phases = [PhaseInfo.from_dict(json.loads(line)) for line in (a.run / PHASES).read_text().splitlines()]
    rows = {(r["run"], r["dataset"]): r for r in json.loads((a.run / RESULTS).read_text())}
    print("| Config | Start | Pass | Speedup (this start) | Steps | Step ms mean/p50/p95 | Fwd | LM head | Verify "
          "| Drafter | Gap | Drafter Σ ms | Longest drafter calls ms (s into the pass) |")
    print("| --- " * 13 + "|")  # one per header cell, or the markdown is no table
    for ph in sorted(phases, key=lambda q: (q.config, q.server_start or 0, q.dataset)):
        if not ph.steplog or not ph.complete or (a.config and ph.config not in a.config):
            continue
        cut = pass_steps(read_launch(a.run / ph.steplog), ph)
        steps = [s for s in (cut.records() if cut is not None else ()) if s.gpu is not None]
        times = [s.gpu.since_prev_ms for s in steps[1:] if s.gpu.since_prev_ms is not None]
        q = statistics.quantiles(times, n=20) if len(times) > 2 else [None] * 19
        draft = [(s.gpu.t_d1 - s.gpu.t_d0) if s.gpu.t_d0 is not None and s.gpu.t_d1 is not None else 0.0 for s in steps]
        t0 = steps[0].sched.wall if steps else 0.0
        top = sorted(((d, s.sched.wall - t0) for d, s in zip(draft, steps)), reverse=True)[:2]
        longest = ", ".join(f"{d:.0f} ({t:.2f})" for d, t in top if d > a.slow_ms) or "none"
        gaps = [steps[i].gpu.since_prev_ms - steps[i - 1].gpu.t_end for i in range(1, len(steps))
                if steps[i].gpu.since_prev_ms is not None and steps[i - 1].gpu.t_end is not None]
        speed = rows.get((ph.config, ph.dataset), {}).get("speedup_repeats")
        sp = speed[ph.repeat] if isinstance(speed, list) and ph.repeat < len(speed) else None
        mean = statistics.fmean(times) if times else None
        print(f"| {ph.config} | s{ph.server_start} | {ph.dataset} | {fmt(sp, 3)} | {len(steps)} | {fmt(mean)}/{fmt(q[9])}/{fmt(q[18])} "
              f"| {fmt(part(steps, 't_fwd', 't_fwd_end'))} | {fmt(part(steps, 't_lg0', 't_lg1'))} "
              f"| {fmt(part(steps, 't_samp', 't_d0') if ph.config != 'baseline' else part(steps, 't_samp', 't_end'))} "
              f"| {fmt(part(steps, 't_d0', 't_d1'))} | {fmt(statistics.fmean(gaps) if gaps else None)} "
              f"| {sum(draft):.0f} | {longest} |")


if __name__ == "__main__":
    main()
