"""Real vLLM on the CPU with its prefix cache: two prompts that share a long system prompt, two repeats, one at a
time. The first request finds nothing cached; every later one finds the system prompt (and, in the second repeat,
its own prompt) in whole 128-token blocks, which vLLM 0.32 reports in the final usage chunk as
``prompt_tokens_details.cached_tokens`` (``--enable-prompt-tokens-details``, in the launcher's args) and counts in
``vllm:prefix_cache_queries`` / ``_hits``.

Needs `specbench setup cpu` (CI runs it). Without the engine the test skips, unless SPECBENCH_REQUIRE_ENGINE=1."""

import json

import pytest
import yaml

from specbench.suite import read_suite
from tests.support.runs import run_suite

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("cpu_engine")]

#: 858 of SmolLM2's chat-template tokens every prompt begins with (its prompts: 880 and 919): six whole 128-token
#: blocks (the CPU's block size), so a prompt that shares them has 768 or more, 84 % and up, cached
SYSTEM = " ".join(["Answer with care and show each step of the reasoning before you give the final answer."] * 50)


async def test_real_vllm_reports_cached_prompt_tokens_and_the_split(tmp_path):
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({
        "name": "cache_cpu", "model": "smol", "endpoint": "chat", "engine": "vllm-cpu",
        "configs": [{"name": "baseline", "args": ["--enable-prefix-caching"]}],
        "datasets": [{"name": "builtin", "categories": ["math"], "requests": 2, "system": SYSTEM}],
        "load": {"concurrency": 1, "max_tokens": 8, "temperature": 0, "warmup": 0, "repeats": 2},
        "server": {"startup_timeout_s": 400},
    }))
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite_file), out)
    assert outcome.exit_code == 0 and outcome.failed_configs == {}
    meta = json.loads((out / "meta.json").read_text())
    assert "--enable-prompt-tokens-details" in meta["servers"]["baseline"]["argv"]
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if r["phase"] == "measure"]
    assert len(measured) == 4 and all(r["error"] is None for r in measured)
    # in sending order: repeat 0's first prompt is cold; the rest share the system prompt (or are the same prompt)
    cached = [r["cached_tokens"] for r in measured]
    assert cached[0] < measured[0]["prompt_tokens"] / 2, cached
    assert all(c >= r["prompt_tokens"] / 2 for c, r in zip(cached[1:], measured[1:])), cached
    (row,) = json.loads((out / "results.json").read_text())
    assert (row["cold_requests"], row["cached_requests"], row["cache_pairs"]) == (1, 3, 1)
    assert row["cached_ttft_mean_ms"] > 0 and row["cold_ttft_mean_ms"] > 0 and row["cache_paired_ttft_ratio"] > 0
    assert row["cached_itl_mean_ms"] > 0 and row["cold_itl_mean_ms"] > 0
    assert 0.5 < row["cached_prompt_share"] < 1
    # the engine's own counters over the timed passes (vllm:prefix_cache_hits ÷ queries) saw the same cache at work
    phases = [json.loads(line) for line in (out / "phases.jsonl").read_text().splitlines()]
    assert all(p["prefix_cache"]["hits"] > 0 and "error" not in p["prefix_cache"] for p in phases), phases
    assert 0.3 < row["prefix_cache_hit_rate"] <= 1
    assert "Prefix cache: cached vs cold" in (out / "results.md").read_text()


async def test_real_vllm_reset_empties_the_cache_before_each_timed_pass(tmp_path):
    """``load.prefix_cache: reset``: the launched server gets VLLM_SERVER_DEV_MODE=1, its /reset_prefix_cache answers
    {"success": true} after each warm-up, and the same prompt, sent by the warm-up and by the pass before, is found
    cold in every timed pass (kept, both measured requests would find all its whole blocks)."""
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({
        "name": "reset_cpu", "model": "smol", "endpoint": "chat", "engine": "vllm-cpu",
        "configs": [{"name": "baseline", "args": ["--enable-prefix-caching"]}],
        "datasets": [{"name": "builtin", "categories": ["math"], "requests": 1, "system": SYSTEM}],
        "load": {"concurrency": 1, "max_tokens": 8, "temperature": 0, "warmup": 1, "repeats": 2,
                 "prefix_cache": "reset"},
        "server": {"startup_timeout_s": 400},
    }))
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite_file), out)
    assert outcome.exit_code == 0 and outcome.failed_configs == {}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["servers"]["baseline"]["env"]["VLLM_SERVER_DEV_MODE"] == "1"
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if r["phase"] == "measure"]
    assert len(measured) == 2 and all(r["error"] is None for r in measured)
    assert [r["cached_tokens"] for r in measured] == [0, 0], measured
    phases = [json.loads(line) for line in (out / "phases.jsonl").read_text().splitlines()]
    assert [p["prefix_cache_reset"] for p in phases] == [True, True]
    assert all(p["prefix_cache"]["hits"] == 0 for p in phases), phases
