"""Issue 39's tables from a run directory with the step log on (``suites/gpu_stalls_8b.yaml``): per config and
server start, the timed pass's throughput, stalls and their causes, and where the time between starts went — the
decode-only steps against the steps that carried a prefill, whose excess is over the pass's stall basis (the
decode-only steps' median, ``measure.stalls``) — with how much of the between-start variance of the
pass time each part holds.

    python benchmarks/gpu/stall_table.py RUN_DIR            # markdown on stdout

A pass's time is the sum of its steps' times (start to the next start; the idle rest is printed) and splits into
decode-only steps and prefill-carrying steps; over a config's starts, var(total) = var(decode) + var(prefill) +
2 cov: the share of each part is its variance plus its covariance with the other, over var(total)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specbench.measure.stalls import durations, pass_stalls  # noqa: E402
from specbench.run.rundir import read_phases  # noqa: E402
from specbench.run.steplog import pass_steps, read_events, read_launch  # noqa: E402
from specbench.schemas.run_files import REQUESTS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    run = ap.parse_args().run
    tokens: dict[tuple[str, int], int] = {}
    for line in (run / REQUESTS).read_text().splitlines():
        r = json.loads(line)
        if r.get("phase") == "measure":
            key = (r["config"], r["dataset"], r.get("concurrency"), r.get("repeat") or 0)
            tokens[key] = tokens.get(key, 0) + (r.get("output_tokens") or 0)
    rows, parts = [], {}
    for p in read_phases(run):
        if not p.steplog:
            continue
        folder = run / p.steplog
        cols = pass_steps(read_launch(folder), p)
        steps = cols.records() if cols is not None else ()
        events, _ = read_events(folder)
        st = pass_stalls(steps, events, p.wall_s, p.repeat, p.server_start, (p.scraped_before or 0, p.scraped_after or 0))
        d = np.array([np.nan if x is None else x for x in durations(steps)])
        pre = np.array([s.sched.prefill_tokens > 0 for s in steps])
        ok = ~np.isnan(d)
        dec_ms, pre_ms = float(np.nansum(d[ok & ~pre])), float(np.nansum(d[ok & pre]))
        parts.setdefault(str(p.cell), []).append((dec_ms, pre_ms))  # a cell over its server starts
        causes = ", ".join(f"{k} {v:.0f}" for k, v in sorted(st.causes_ms.items(), key=lambda kv: -kv[1])) or "—"
        tps = tokens.get((p.config, p.dataset, p.concurrency, p.repeat), 0) / p.wall_s if p.wall_s else float("nan")
        rows.append(f"| {p.cell} | s{p.server_start} | {tps:,.0f} | {len(steps)} | {np.nanmedian(d):.2f} | "
                    f"{np.nanmean(d[ok & ~pre]):.2f} | {int(pre.sum())} / {sum(s.sched.prefill_tokens for s in steps):,} | "
                    f"{pre_ms - st.median_ms * int((ok & pre).sum()):.0f} | {1000 * p.wall_s - dec_ms - pre_ms:.0f} | "
                    f"{st.median_ms:.2f} ({st.basis}) | "
                    f"{len(st.stalls)} / {st.stall_ms:.0f} / {100 * (st.share or 0):.1f}% | {causes} | {st.one_time_events} |")
    print("| Cell | Start | tok/s | Steps | Median step ms | Decode-only step ms | Prefill steps / tokens | "
          "Prefill steps' excess ms | Idle ms | Stall basis ms | Stalls n / ms / share | Stall causes (ms) | One-time events |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    print("\nShare of the between-start variance of the pass's step time (decode-only steps | prefill-carrying steps):\n")
    for config, values in parts.items():
        dec, pre = np.array(values).T
        total = dec + pre
        var = np.var(total, ddof=1) if len(total) > 1 else 0.0
        if not var:
            continue
        cov = np.cov(dec, pre, ddof=1)[0, 1]
        print(f"- {config}: pass step time {', '.join(f'{t:.0f}' for t in total)} ms; decode-only "
              f"{(np.var(dec, ddof=1) + cov) / var:.0%}, prefill-carrying {(np.var(pre, ddof=1) + cov) / var:.0%}")


if __name__ == "__main__":
    main()
