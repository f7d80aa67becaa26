"""Real vLLM on the CPU, launched by specbench: baseline vs n-gram speculation on built-in prompts.

Needs `specbench setup cpu` (CI runs it). Without the engine the test skips, unless
SPECBENCH_REQUIRE_ENGINE=1 (set by .ci/run) turns that into a failure.
"""

import json

import pandas as pd
import pytest
import yaml

from specbench.cli import main
from specbench.launch.owned import group_members
from specbench.suite import read_suite
from tests.support.md_tables import tables_of
from tests.support.processes import alive
from tests.support.runs import run_suite

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("cpu_engine")]

GC_STEP = 70  # inside the timed pass: the warm-up request takes fewer than 48 steps


async def test_real_vllm_baseline_vs_ngram(tmp_path):
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({
        "name": "real_cpu", "model": "smol", "endpoint": "chat", "engine": "vllm-cpu",
        "configs": [{"name": "baseline"},
                    {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3,
                     "speculative": {"prompt_lookup_max": 4, "prompt_lookup_min": 2}, "steplog": "tokens",
                     "env": {"SPECBENCH_STEPLOG_TEST_GC_STEP": str(GC_STEP)}}],
        "datasets": [{"name": "builtin", "categories": ["math"], "requests": 3}],
        "load": {"concurrency": 1, "max_tokens": 48, "temperature": 0, "warmup": 1},
        "server": {"startup_timeout_s": 400},
    }))
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite_file), out)
    assert outcome.failed_configs == {}
    assert outcome.exit_code == 0

    meta = json.loads((out / "meta.json").read_text())
    for name in ("baseline", "ngram_k3"):
        server = meta["servers"][name]
        assert server["version"] == "0.32.0" and server["launched"] is True
        assert (out / "logs" / f"{name}.log").stat().st_size > 0
        assert not alive(server["pid"]), f"{name} server still running"
        assert group_members(server["pid"]) == [], f"{name} left processes in its group"
    assert "--speculative-config" in meta["servers"]["ngram_k3"]["argv"]
    assert "--speculative-config" not in meta["servers"]["baseline"]["argv"]

    rows = {r["run"]: r for r in json.loads((out / "results.json").read_text())}
    base, spec = rows["baseline"], rows["ngram_k3"]
    assert base["requests"] == spec["requests"] == 3
    assert base["mean_acceptance_length"] is None and base["acceptance_rate"] is None
    assert spec["spec_drafts"] > 0 and spec["spec_draft_tokens"] == 3 * spec["spec_drafts"]
    assert 1.0 <= spec["mean_acceptance_length"] <= 4.0
    assert spec["acceptance_source"].startswith("/metrics counters vllm:spec_decode_")
    # One chunk per engine step: the chunk sizes seen by the client account for the tokens the server's
    # counters say were accepted (n-gram drafts only on steps with a match, so steps >= drafts; a
    # request's last step can be cut by max_tokens, hence one token of slack per request).
    assert spec["stream_steps"] >= spec["spec_drafts"]
    assert abs(spec["stream_accepted_tokens"] - spec["spec_accepted_tokens"]) <= spec["requests"]
    assert spec["acceptance_sources_agree"] is True
    # vLLM's per-request stats (--per-request-spec-decode-metrics summary) sum to the same counters
    assert spec["request_stats_mean_acceptance_length"] == pytest.approx(spec["mean_acceptance_length"], rel=0.02)
    assert spec["token_count_source"] == {"usage_continuous": 3}
    for r in (base, spec):
        assert r["output_throughput_tps"] > 0 and r["ttft_mean_ms"] > 0 and r["tpot_mean_ms"] > 0
    assert spec["fidelity_identical"] is not None  # greedy n-gram is lossless; reported, not asserted equal
    check_step_log(out, meta, spec, base)
    main_table = tables_of((out / "results.md").read_text())[""]
    assert [row[:2] for row in main_table[1:]] == [["builtin", "baseline"], ["builtin", "ngram_k3"]]
    records = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    spec_records = [r for r in records if r["config"] == "ngram_k3" and r["phase"] == "measure"]
    assert all(sum(r["chunk_tokens"]) == r["output_tokens"] for r in spec_records)
    assert all(r["output_token_ids"] and len(r["output_token_ids"]) == r["output_tokens"] for r in spec_records)


def check_step_log(out, meta, spec, base):
    """The recorder ran inside the real engine (issue 33): the spec config's step log holds every step of its
    timed pass, whose accepted tokens equal the /metrics counter delta exactly, and the Why table used it."""
    assert "steplog" not in meta["servers"]["baseline"]
    assert meta["servers"]["ngram_k3"]["steplog"] == "logs/steplog/ngram_k3-s0"
    headers = [json.loads(p.read_text()) for p in (out / "logs/steplog/ngram_k3-s0").glob("header-*.json")]
    hooks = {k: v for h in headers for k, v in h["hooks"].items()}
    assert {"scheduler.schedule", "scheduler.update_from_output", "runner_v1.execute_model",
            "tokens.rejection_sampler"} <= {k for k, v in hooks.items() if v == "installed"}, hooks
    assert {h["runner"] for h in headers} >= {"v1"} and {h["clock"] for h in headers} >= {"perf_counter"}
    assert spec["steplog_steps"] > 0 and spec["steplog_error"] is None and spec["steplog_skipped_rows"] is None
    assert spec["steplog_accepted"] == spec["steplog_counter_accepted"] == spec["spec_accepted_tokens"]
    assert spec["steplog_hist_accepted"] == spec["steplog_accepted"] and spec["steplog_accepted_agree"] is True
    assert spec["steplog_drafter_ms"] is not None and spec["steplog_fwd_ms"] > 0
    # issue 39: the collection the worker was made to run inside step GC_STEP is recorded by the gc hook in the
    # engine's own process, and names the stall it caused
    events = [json.loads(line) for p in (out / "logs/steplog/ngram_k3-s0").glob("events-*.jsonl")
              for line in p.read_text().splitlines()]
    assert any(e["kind"] == "gc" and e["step"] == GC_STEP and e["detail"].startswith("generation 2") for e in events)
    assert "events.gc" in {k for k, v in hooks.items() if v == "installed"}
    stalls = [s for p in spec["steplog_stall_passes"] for s in p["longest"] if s["step"] == GC_STEP]
    assert stalls and any(c.startswith("gc:") and "generation 2" in c for c in stalls[0]["causes"]), spec["steplog_stall_passes"]
    assert spec["steplog_stall_causes"]["gc"] > 0 and spec["steplog_stalls"] >= 1
    # the token log, cut by the pass's step numbers, holds every accepted guess of the step log (issue 38)
    assert spec["steplog_token_accepted"] == spec["steplog_accepted"] and spec["steplog_token_agree"] is True
    assert spec["steplog_token_unplaced"] is None and spec["steplog_token_guesses"] >= spec["steplog_token_accepted"]
    assert base.get("step_source") is None and base.get("steplog_steps") is None  # no log on the baseline: chunk gaps
    assert spec["step_source"] == "chunk gaps"  # the decomposition needs both sides' step times
    prof = out / "export"
    assert main(["export", str(out), "-o", str(prof)]) == 0
    tokens, outputs = pd.read_parquet(prof / "tokens"), pd.read_parquet(prof / "outputs")
    assert int(tokens.accepted.sum()) == spec["steplog_accepted"] and tokens.req.notna().all()
    assert set(tokens.req) <= set(outputs.req) and tokens.d_prob.isna().all()  # n-gram has no probabilities


async def test_real_vllm_steady_warm_up_waits_out_the_first_compile(tmp_path):
    """Issue 39 item 3 on the real engine: vLLM's n-gram proposer compiles its numba kernel at the first real decode
    step, which the recorder sees as a one-time event; `warmup: steady` runs a second pass that holds none, then
    times. The warm-up passes and what each saw are in the results."""
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({
        "name": "steady_cpu", "model": "smol", "endpoint": "chat", "engine": "vllm-cpu",
        "configs": [{"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3,
                     "speculative": {"prompt_lookup_max": 4, "prompt_lookup_min": 2}, "steplog": "steps",
                     "baseline": True}],
        "datasets": [{"name": "builtin", "categories": ["math"], "requests": 2}],
        "load": {"concurrency": 1, "max_tokens": 16, "temperature": 0, "warmup": "steady", "warmup_max_passes": 3},
        "server": {"startup_timeout_s": 400},
    }))
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite_file), out)
    assert outcome.exit_code == 0
    (row,) = json.loads((out / "results.json").read_text())
    events = [json.loads(line) for p in (out / "logs/steplog/ngram_k3-s0").glob("events-*.jsonl")
              for line in p.read_text().splitlines()]
    compiles = [e for e in events if e["kind"] == "compile" and "numba" in (e["detail"] or "")]
    assert compiles, events
    seen = row["warmup_steady_events"][0]
    assert seen[0] >= 1 and seen[-1] == 0 and row["warmup_steady"] is True and row["warmup_steady_passes"] == [len(seen)]
    assert row["steplog_one_time_events"] == 0  # the timed pass held none
