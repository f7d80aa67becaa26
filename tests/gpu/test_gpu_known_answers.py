"""Known answers on a real GPU (``-m gpu``): suites/gpu_known_answers.yaml on vLLM with CUDA.

Self-speculation (the target drafts for itself, greedy) must accept every draft token; vLLM's
synthetic rejection sampler must give the per-position rates it was set to and a length of
1 + Σ rates. Skips unless the engine's Python (SPECBENCH_ENGINE_PYTHON, else python3) imports
vLLM with a CUDA device, so CI (no GPU) skips it. ``SPECBENCH_GPU_RUN_DIR=DIR`` checks a run
already made (benchmarks/gpu/run_h200.sh does that) instead of running the suite.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from tests.support.gpu import gpu_run_dir
from tests.support.paths import ROOT, RUNS

SUITE = ROOT / "suites" / "gpu_known_answers.yaml"
SET_RATES = {"dspark_k3": [0.8, 0.6, 0.4], "dspark_k7": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]}
RATE_TOL = 0.04          # "within a few points" of the set per-position rate
LENGTH_TOL = 0.02        # mean acceptance length within 2 % of 1 + Σ rates ...
SIGMAS = 3               # ... or 3 standard errors of the mean, whichever is wider
SELF_DRAFT_K = 3


def length_sd(rates: list[float]) -> float:
    """Standard deviation of accepted tokens per draft when position i is accepted with
    unconditional probability rates[i] and acceptance stops at the first rejection."""
    mean = sum(rates)
    second = sum(rates) + 2 * sum(j * r for j, r in enumerate(rates))  # E[L²] = Σ_i Σ_j r_max(i,j)
    return math.sqrt(max(second - mean * mean, 0.0))


def known_answer_problems(rows: list[dict]) -> list[str]:
    """Every way a gpu_known_answers run misses its known answers (empty: all met)."""
    problems = []
    by = {(r.get("run"), r.get("concurrency")): r for r in rows}
    points = sorted({c for _, c in by if c is not None})
    if points != [1, 16, 64]:
        problems.append(f"load points {points}, expected [1, 16, 64]")
    for (run, c), r in sorted(by.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        cell = f"{run}@C={c}"
        if r.get("status") != "ok" or r.get("failed_requests"):
            problems.append(f"{cell}: status {r.get('status')}, failed {r.get('failed_requests')}")
        rate, length = r.get("acceptance_rate"), r.get("mean_acceptance_length")
        if run == "baseline":
            if rate is not None:
                problems.append(f"{cell}: baseline has an acceptance rate {rate}")
        elif run == "self_draft_k3":
            want_rate = 1.0 if c == 1 else 0.98
            if rate is None or rate < want_rate - 1e-9:
                problems.append(f"{cell}: self-draft acceptance {rate}, expected ≥ {want_rate}")
            if c == 1 and (length is None or abs(length - (SELF_DRAFT_K + 1)) > 0.005):
                problems.append(f"{cell}: self-draft length {length}, expected {SELF_DRAFT_K + 1}")
        elif run in SET_RATES:
            want = SET_RATES[run]
            got = r.get("acceptance_per_position") or []
            drafts = r.get("spec_drafts") or 0
            if len(got) != len(want):
                problems.append(f"{cell}: {len(got)} per-position rates, expected {len(want)}")
            for i, (g, w) in enumerate(zip(got, want), 1):
                tol = max(RATE_TOL, SIGMAS * math.sqrt(w * (1 - w) / drafts)) if drafts else RATE_TOL
                if g is None or abs(g - w) > tol:
                    problems.append(f"{cell}: p{i} = {g}, set to {w} (± {tol:.3f})")
            expect = 1 + sum(want)
            tol = max(LENGTH_TOL * expect, SIGMAS * length_sd(want) / math.sqrt(drafts)) if drafts else LENGTH_TOL * expect
            if length is None or abs(length - expect) > tol:
                problems.append(f"{cell}: length {length}, expected {expect:.2f} ± {tol:.3f} ({drafts} drafts)")
        elif run == "ngram_k3":
            if rate is None or not 0 < rate <= 1:
                problems.append(f"{cell}: n-gram acceptance {rate} not in (0, 1]")
    missing = {"baseline", "self_draft_k3", "dspark_k3", "dspark_k7", "ngram_k3"} - {run for run, _ in by}
    if missing:
        problems.append(f"configs missing from the run: {sorted(missing)}")
    return problems


@pytest.mark.gpu
def test_gpu_known_answers(tmp_path: Path) -> None:
    run_dir = gpu_run_dir("SPECBENCH_GPU_RUN_DIR", "vllm", ["SmolLM2-135M-Instruct", "dspark-random-smollm2"],
                          ["run", str(SUITE)], tmp_path)
    rows = json.loads(Path(run_dir, "results.json").read_text())
    problems = known_answer_problems(rows)
    assert not problems, "\n".join(problems)


def _row(run, c, rate=None, length=None, per_pos=None, drafts=None):
    return {"run": run, "concurrency": c, "status": "ok", "failed_requests": {}, "acceptance_rate": rate,
            "mean_acceptance_length": length, "acceptance_per_position": per_pos, "spec_drafts": drafts}


def _good_rows() -> list[dict]:
    rows = []
    for c in (1, 16, 64):
        rows += [_row("baseline", c), _row("self_draft_k3", c, 1.0 if c == 1 else 0.997, 4.0 if c == 1 else 3.99),
                 _row("dspark_k3", c, 0.6, 2.81, [0.802, 0.609, 0.399]),
                 _row("dspark_k7", c, 0.6, 5.17, [0.9, 0.8, 0.69, 0.6, 0.5, 0.4, 0.28]),
                 _row("ngram_k3", c, 0.45, 2.3, [0.6, 0.45, 0.3])]
    return rows


def test_known_answer_checker_accepts_a_run_that_meets_them() -> None:
    assert known_answer_problems(_good_rows()) == []


def test_known_answer_checker_names_each_miss() -> None:
    rows = _good_rows()
    rows[1]["acceptance_rate"] = 0.97                        # self-draft below 100 % at C=1
    rows[2]["acceptance_per_position"] = [0.8, 0.5, 0.4]     # p2 ten points off
    rows[3]["mean_acceptance_length"] = 5.5                  # 5.8 % above 5.2, no draft count: 2 %
    rows = [r for r in rows if not (r["run"] == "ngram_k3" and r["concurrency"] == 64)]
    problems = known_answer_problems(rows)
    assert any(p.startswith("self_draft_k3@C=1: self-draft acceptance 0.97") for p in problems), problems
    assert any(p.startswith("dspark_k3@C=1: p2 = 0.5") for p in problems), problems
    assert any(p.startswith("dspark_k7@C=1: length 5.5") for p in problems), problems
    assert len(problems) == 3, problems


def test_length_tolerance_widens_to_three_standard_errors() -> None:
    """H200, dspark_k7 at C=64 with 64 prompts × 128 tokens: 5.052 from 1639 drafts is 2.8 % under
    5.2, but within 3 standard errors (0.18); the same cell with 256 prompts gave 5.142."""
    assert abs(length_sd([0.8, 0.6, 0.4]) - math.sqrt(1.36)) < 1e-12
    rows = _good_rows()
    k7 = next(r for r in rows if r["run"] == "dspark_k7" and r["concurrency"] == 64)
    k7.update(mean_acceptance_length=5.052, spec_drafts=1639)
    assert known_answer_problems(rows) == []
    k7.update(spec_drafts=100_000)
    assert [p.split(",")[0] for p in known_answer_problems(rows)] == ["dspark_k7@C=64: length 5.052"]


def test_the_committed_h200_run_meets_the_known_answers() -> None:
    rows = json.loads((RUNS / "gpu_known_answers" / "known_answers.json").read_text())  # the keys the checks read
    assert known_answer_problems(rows) == []


def test_dspark_k_below_the_checkpoint_block_size_is_refused_before_launch(tmp_path: Path) -> None:
    """vLLM 0.26 exits at start-up for k < dspark_block_size; specbench says why before launching."""
    from specbench.errors import LaunchError
    from specbench.launch import read_engine
    from specbench.suite import ServerConfig

    blocked, plain = tmp_path / "blocked", tmp_path / "plain"
    for folder, cfg in ((blocked, {"dspark_block_size": 7}), (plain, {"block_size": 7})):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
    engine = read_engine("vllm")

    def argv(drafter, k):
        config = ServerConfig(name="dspark_k3", method="dspark", drafter=str(drafter), num_speculative_tokens=k)
        return engine.argv(config=config, model="m", model_path="/m", host="127.0.0.1", port=8000)

    with pytest.raises(LaunchError, match=r"^config 'dspark_k3': num_speculative_tokens 3 < dspark_block_size 7 in .*blocked/config.json"):
        argv(blocked, 3)
    assert "--speculative-config" in argv(blocked, 7)
    assert "--speculative-config" in argv(plain, 3)          # block_size alone: vLLM accepts k=3 (the H200 run)


def test_drafter_paths_with_a_tilde_are_expanded() -> None:
    """The GPU suites name the drafter as ~/.cache/...; vLLM would take the literal string for a hub id."""
    from specbench.launch import read_engine
    from specbench.suite import ServerConfig

    config = ServerConfig(name="self", method="draft_model", drafter="~/.cache/specbench/models/x", num_speculative_tokens=3)
    args = read_engine("vllm").argv(config=config, model="m", model_path="/m", host="127.0.0.1", port=8000)
    body = json.loads(args[args.index("--speculative-config") + 1])
    assert body["model"] == os.path.expanduser("~/.cache/specbench/models/x")


# ------------------------------------------------------------------ SGLang 0.5.16 (suites/gpu_sglang.yaml)

SGLANG_SUITE = ROOT / "suites" / "gpu_sglang.yaml"
SGLANG_SELF_DRAFT_FLOOR = 0.85   # measured 0.90-0.91 on the H200: SGLang's draft and verify passes flip bf16 near-ties


def sglang_problems(rows: list[dict]) -> list[str]:
    """What an SGLang gpu_sglang run must show. SGLang has no accepted-token counter, so the known
    answer is that its counters and the stream tell the same story: (Δgeneration_tokens − Δfinished)
    ÷ Δverify_calls equals the stream's tokens per decode chunk, and the step count matches; the
    self-draft accepts nearly everything (not 100 %: see docs/gpu.md) and GPU energy is measured."""
    problems = []
    runs = {r.get("run") for r in rows}
    for need in ("baseline", "self_draft_k3"):
        if need not in runs:
            problems.append(f"config {need} missing from the run")
    for r in rows:
        cell = f"{r.get('run')}@C={r.get('concurrency')}"
        if r.get("status") != "ok" or r.get("failed_requests"):
            problems.append(f"{cell}: status {r.get('status')}, failed {r.get('failed_requests')}")
        if not (r.get("joules_per_output_token") or 0) > 0:
            problems.append(f"{cell}: no GPU energy ({r.get('telemetry_error')})")
        if r.get("run") == "baseline":
            continue
        counters, stream = r.get("mean_acceptance_length"), r.get("stream_mean_acceptance_length")
        if counters is None or stream is None or abs(counters - stream) > 0.01 * stream:
            problems.append(f"{cell}: counter length {counters} vs stream {stream}: the sources disagree")
        if "sglang:spec_verify_calls_total" not in str(r.get("acceptance_source")):
            problems.append(f"{cell}: acceptance not from SGLang's counters ({r.get('acceptance_source')})")
        rate, k = r.get("acceptance_rate"), r.get("num_speculative_tokens")
        if r.get("run") == "self_draft_k3" and (rate is None or rate < SGLANG_SELF_DRAFT_FLOOR):
            problems.append(f"{cell}: self-draft acceptance {rate} < {SGLANG_SELF_DRAFT_FLOOR}")
        if rate is not None and counters is not None and k and abs(1 + k * rate - counters) > 1e-6:
            problems.append(f"{cell}: length {counters} ≠ 1 + k × rate ({1 + k * rate})")
    return problems


@pytest.mark.gpu
def test_gpu_sglang_known_answers(tmp_path: Path) -> None:
    run_dir = gpu_run_dir("SPECBENCH_GPU_SGLANG_RUN_DIR", "sglang", ["SmolLM2-135M-Instruct"], ["run", str(SGLANG_SUITE)], tmp_path)
    problems = sglang_problems(json.loads(Path(run_dir, "results.json").read_text()))
    assert not problems, "\n".join(problems)


def test_the_committed_sglang_run_meets_its_checks_and_a_drift_is_named() -> None:
    rows = json.loads((RUNS / "gpu_known_answers" / "sglang_known_answers.json").read_text())
    assert sglang_problems(rows) == []
    spec = next(r for r in rows if r["run"] == "self_draft_k3" and r["concurrency"] == 1)
    spec["stream_mean_acceptance_length"] = spec["mean_acceptance_length"] * 1.05     # the stream saw other steps
    base = next(r for r in rows if r["run"] == "baseline")
    base["joules_per_output_token"] = None
    problems = sglang_problems(rows)
    assert [p.split(":")[0] for p in problems] == ["baseline@C=1", "self_draft_k3@C=1"], problems
    assert "the sources disagree" in problems[1]
