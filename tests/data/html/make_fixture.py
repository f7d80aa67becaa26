"""Regenerate the run directory under ``tests/data/html/run`` (used by tests/integration/report/test_html.py).

A simulated but realistic sweep: 2 data sets × 3 configs (baseline, ngram k=3, draft model k=5)
× 2 concurrency levels × 3 repeats of 8 prompts (closed loop: a lane sends its next
request when the previous one ends). Each decode step commits 1 + accepted draft
tokens; a spec step costs more than a plain one and the overhead grows with concurrency, so the
draft-model config crosses below 1.0 at concurrency 8 on gsm8k. Two deliberate gaps:

- ngram_k3 on mtbench at c=8 has no /metrics counters (acceptance not measured);
- draft_k5 on mtbench at c=8 failed (every request lost its connection), so no speed-up.

Rows are assembled by specbench's own ``summarize_cell``/``add_comparisons``, so the keys are the
real ones. Run ``python tests/data/html/make_fixture.py`` from the repository root.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specbench.measure.summarize import add_comparisons, summarize_cell
from specbench.schemas.acceptance import AcceptanceWindow
from specbench.schemas.cell import Cell
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from specbench.schemas.row import ResultRow

OUT = Path(__file__).resolve().parent / "run"
CONFIGS = [("baseline", "baseline", None), ("ngram_k3", "ngram", 3), ("draft_k5", "draft_model", 5)]
DATASETS = {"gsm8k": ["math", "math", "reasoning", "reasoning", "math", "reasoning", "math", "reasoning"],
            "mtbench": ["writing", "coding", "writing", "coding", "roleplay", "roleplay", "writing", "coding"]}
CONCURRENCY = (1, 8)
REPEATS = 3
# conditional acceptance of draft position j given 1..j-1 accepted, per (config, category)
ACCEPT = {
    "ngram_k3": {"math": [0.55, 0.6, 0.65], "reasoning": [0.45, 0.55, 0.6], "writing": [0.2, 0.4, 0.5],
                 "coding": [0.5, 0.6, 0.7], "roleplay": [0.15, 0.35, 0.45]},
    "draft_k5": {"math": [0.8, 0.78, 0.75, 0.7, 0.66], "reasoning": [0.72, 0.7, 0.66, 0.6, 0.55],
                 "writing": [0.6, 0.55, 0.5, 0.45, 0.4], "coding": [0.75, 0.72, 0.68, 0.62, 0.58],
                 "roleplay": [0.55, 0.5, 0.45, 0.4, 0.35]},
}
# cost of one target step relative to a plain decode step: (config, concurrency) -> factor
STEP_COST = {("baseline", 1): 1.0, ("baseline", 8): 1.0, ("ngram_k3", 1): 1.12, ("ngram_k3", 8): 1.45,
             ("draft_k5", 1): 1.6, ("draft_k5", 8): 3.3}
BASE_STEP_S = {1: 0.0112, 8: 0.0175}
NO_COUNTERS = {("ngram_k3", "mtbench", 8)}
FAILED = {("draft_k5", "mtbench", 8)}


def simulate() -> tuple[list[PhaseInfo], list[RequestRecord]]:
    rng = np.random.default_rng(7)
    phases, records = [], []
    clock = 1000.0
    for dataset, cats in DATASETS.items():
        for conc in CONCURRENCY:
            for config, _method, k in CONFIGS:
                for repeat in range(REPEATS):
                    start = clock
                    drafts = draft_tokens = accepted_total = 0
                    pos_hits = np.zeros(k or 0)
                    phase_recs = []
                    lanes = [start + 0.003 * j for j in range(conc)]
                    for i, cat in enumerate(cats):
                        lane = int(np.argmin(lanes))
                        send = lanes[lane]
                        rec = RequestRecord(prompt_id=f"{dataset}-{i:02d}", dataset=dataset, config=config,
                                            category=cat, phase="measure", send_time=round(send, 6),
                                            token_source="usage_continuous", prompt_tokens=int(rng.integers(40, 160)),
                                            concurrency=conc, repeat=repeat, finish_reason="length",
                                            text=f"answer {dataset} {i}")
                        if (config, dataset, conc) in FAILED:
                            rec.error = "ServerDisconnectedError: Server disconnected"
                            rec.finish_reason = None
                            lanes[lane] += 0.05
                            phase_recs.append(rec)
                            continue
                        t = send + rng.lognormal(np.log(0.14 * (1 + 0.15 * conc)), 0.25)
                        times, tokens = [t], [1]
                        n_out, target = 1, int(rng.integers(48, 65))
                        while n_out < target:
                            n = 1
                            if k:
                                acc = 0
                                for j, p in enumerate(ACCEPT[config][cat]):
                                    if rng.random() < p:
                                        acc += 1
                                        pos_hits[j] += 1
                                    else:
                                        break
                                drafts += 1
                                draft_tokens += k
                                accepted_total += acc
                                n = 1 + acc
                            n = min(n, target - n_out)
                            step = BASE_STEP_S[conc] * STEP_COST[(config, conc)] * rng.lognormal(0, 0.12)
                            if rng.random() < 0.01:
                                step += rng.uniform(0.2, 0.5)  # a scheduler hiccup: the long ITL tail
                            t += step
                            times.append(round(t, 6))
                            tokens.append(n)
                            n_out += n
                        rec.chunk_times, rec.chunk_tokens, rec.output_tokens = times, tokens, n_out
                        lanes[lane] = t + 0.002
                        phase_recs.append(rec)
                    end = max((r.chunk_times[-1] for r in phase_recs if r.chunk_times), default=start + 5.0)
                    acceptance: dict = {}
                    if k and drafts and (config, dataset, conc) not in NO_COUNTERS:
                        per_pos = [float(h / drafts) for h in pos_hits]
                        acceptance = {"spec_drafts": drafts, "spec_draft_tokens": draft_tokens,
                                      "spec_accepted_tokens": accepted_total,
                                      "acceptance_rate": accepted_total / draft_tokens,
                                      "mean_acceptance_length": 1 + accepted_total / drafts,
                                      "acceptance_per_position": per_pos,
                                      "acceptance_source": "/metrics counters vllm:spec_decode_* (delta over the measured phase)"}
                        acceptance.update({f"acceptance_pos_{j}": v for j, v in enumerate(per_pos, start=1)})
                    server = {"engine": "vllm", "version": "0.11.0", "url": "http://127.0.0.1:8000"}
                    phases.append(PhaseInfo(config=config, dataset=dataset, concurrency=conc, request_rate=None,
                                            repeat=repeat, wall_s=round(end - start, 6),
                                            acceptance=AcceptanceWindow.from_dict(acceptance),
                                            server=server))
                    records += phase_recs
                    clock = end + 2.0
    return phases, records


def build_rows(phases: list[PhaseInfo], records: list[RequestRecord]) -> list[ResultRow]:
    rows = []
    methods = {c: (m, k) for c, m, k in CONFIGS}
    for dataset in DATASETS:
        for conc in CONCURRENCY:
            for config, _m, _k in CONFIGS:
                cell_phases = [p for p in phases if p.cell == Cell(config, dataset, conc)]
                cell_recs = [r for r in records if (r.config, r.dataset, r.concurrency) == (config, dataset, conc)]
                method, k = methods[config]
                rows.append(summarize_cell(cell_phases, cell_recs, method=method, k=k))
    add_comparisons(rows, records, "baseline")
    return rows


def main() -> None:
    phases, records = simulate()
    rows = build_rows(phases, records)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    with (OUT / "requests.jsonl").open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_dict()) + "\n")
    meta = {
        "specbench_version": "0.1.0",
        "suite": {"name": "html_fixture", "path": "suites/html_fixture.yaml",
                  "raw": {"name": "html_fixture", "model": "Qwen/Qwen2.5-7B-Instruct",
                          "description": "baseline vs n-gram k=3 vs draft model k=5 at concurrency 1 and 8",
                          "configs": [{"name": "baseline", "baseline": True},
                                      {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3},
                                      {"name": "draft_k5", "method": "draft_model", "num_speculative_tokens": 5}],
                          "datasets": [{"name": d} for d in DATASETS],
                          "load": {"concurrency": list(CONCURRENCY), "max_tokens": 64, "temperature": 0,
                                   "repeats": REPEATS}}},
        "comparability": {"suite": "html_fixture", "model": "Qwen/Qwen2.5-7B-Instruct", "max_tokens": 64,
                          "temperature": 0.0},
        "started_at": "2026-11-30T09:00:00+00:00",
        "finished_at": "2026-11-30T09:41:12+00:00",
        "host": {"platform": "Linux-6.1-x86_64", "python": "3.11.7", "cpus": 32},
        "failed_configs": {},
    }
    (OUT / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    for r in rows:
        print(f"{r.dataset:8} c={r.concurrency} {r.run:9} tps={r.output_throughput_tps} "
              f"speedup={r.speedup_vs_baseline} ci={r.ci95} L={r.mean_acceptance_length} status={r.status}")


if __name__ == "__main__":
    main()
