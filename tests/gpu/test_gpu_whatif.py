"""The break-even map on a real GPU (``-m gpu``): ``specbench whatif suites/gpu_whatif.yaml`` on CUDA vLLM.

The known answers: vLLM's synthetic rejection sampler gives each derived config the acceptance length it
was set to (counters within 2 %) at every load, the random-weight DSpark drafter's own acceptance stays
near 1 (nothing it drafts is right), and every load point gets a break-even. Skips unless the engine's
Python imports a CUDA vLLM; ``SPECBENCH_GPU_WHATIF_RUN_DIR=DIR`` checks a run already made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.measure.break_even import verdict, whatif_curves
from specbench.schemas.meta import RunMeta
from specbench.schemas.row_read import rows_from
from tests.support.gpu import gpu_run_dir
from tests.support.paths import ROOT, RUNS

SUITE = ROOT / "suites" / "gpu_whatif.yaml"
COMMITTED = RUNS / "gpu_whatif_map"  # results/evidence/h200/whatif_dspark_k3: its results.json and meta.json
LENGTHS = "1.5,2.5,3.5"
LENGTH_TOL = 0.02
RANDOM_DRAFTER_CEILING = 1.1


def whatif_problems(rows: list[dict], meta: dict) -> list[str]:
    """Every way a gpu_whatif run misses its known answers (empty: all met)."""
    problems = []
    plan = (meta.get("whatif") or {}).get("configs") or {}
    for r in rows:
        cell = f"{r.get('run')}@C={r.get('concurrency')}"
        if r.get("status") != "ok" or r.get("failed_requests"):
            problems.append(f"{cell}: status {r.get('status')}, failed {r.get('failed_requests')}")
        length, target = r.get("mean_acceptance_length"), (plan.get(r.get("run")) or {}).get("acceptance_length")
        if target is not None and (length is None or abs(length - target) > LENGTH_TOL * target):
            problems.append(f"{cell}: counter acceptance length {length}, set to {target}")
        if r.get("run") == "dspark_k3" and (length is None or length > RANDOM_DRAFTER_CEILING):
            problems.append(f"{cell}: the random drafter accepts {length} per step, expected ≤ {RANDOM_DRAFTER_CEILING}")
    curves = whatif_curves(rows_from(rows), RunMeta.from_dict(meta))
    loads = sorted(c.load.value or 0 for c in curves)
    if loads != [1, 16, 64]:
        problems.append(f"what-if curves at loads {loads}, expected [1, 16, 64]")
    for c in curves:
        if len(c.grid) != len(LENGTHS.split(",")) or c.break_even is None:
            problems.append(f"{c.config}@{c.load.value}: {len(c.grid)} synthetic points, break-even {c.break_even}")
    return problems


def _committed() -> tuple[list[dict], dict]:
    return (json.loads((COMMITTED / "results.json").read_text()), json.loads((COMMITTED / "meta.json").read_text()))


@pytest.mark.gpu
def test_gpu_whatif_map(tmp_path: Path) -> None:
    run_dir = gpu_run_dir("SPECBENCH_GPU_WHATIF_RUN_DIR", "vllm", ["SmolLM2-135M-Instruct", "dspark-random-smollm2"],
                          ["whatif", str(SUITE), "--lengths", LENGTHS], tmp_path)
    problems = whatif_problems(json.loads(Path(run_dir, "results.json").read_text()),
                               json.loads(Path(run_dir, "meta.json").read_text()))
    assert not problems, "\n".join(problems)


def test_the_committed_h200_map_meets_its_known_answers_and_a_drift_is_named() -> None:
    rows, meta = _committed()
    assert whatif_problems(rows, meta) == []
    next(r for r in rows if r["run"] == "dspark_k3_al2.5" and r["concurrency"] == 16)["mean_acceptance_length"] = 2.3
    assert whatif_problems(rows, meta) == ["dspark_k3_al2.5@C=16: counter acceptance length 2.3, set to 2.5"]


def test_the_committed_h200_map_places_the_random_drafter() -> None:
    """The random drafter loses at every load; C=64 is bracketed by the grid, C=1 and C=16 only through its own point."""
    rows, meta = _committed()
    said = {c.load.value: verdict(c) for c in whatif_curves(rows_from(rows), RunMeta.from_dict(meta))}
    assert said[64].startswith("needs 1.76 at C=64, has 1.02 → loses")
    assert said[1].startswith("needs ≈1.18 at C=1 (interpolated between its own 1.02 at 0.909x")
    assert said[16].startswith("needs ≈1.49 at C=16") and said[16].endswith("→ loses")
