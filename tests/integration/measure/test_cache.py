"""Cached vs cold end to end on scripted servers with a prefix cache (``Script.prefix_cache``): prompts that share
a long system prompt find it cached after the first, the same prompt's second repeat finds itself cached, and the
split, the pair and the counters' hit rate come out as the server counted them."""

import json

import pytest

from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.suites import baseline_and_spec, write_suite

SYSTEM = " ".join(f"rule{i}" for i in range(100))  # 100 words every prompt begins with
BLOCK, TTFT = 8, 0.2


async def test_cached_and_cold_split_pair_and_counters(tmp_path, prompts_file, scripted):
    base_server, base = await scripted(pattern=[1], ttft_s=TTFT, gap_s=0.004, paced=True, prefix_cache=BLOCK)
    spec_server, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=TTFT, gap_s=0.004, paced=True, prefix_cache=BLOCK)
    suite = write_suite(tmp_path, baseline_and_spec(base, spec), name="cache", endpoint="chat",
                        datasets=[{"name": "shared", "path": str(prompts_file), "system": SYSTEM}],
                        load={"concurrency": 1, "max_tokens": 8, "warmup": 0, "repeats": 2, "temperature": 0})
    outcome = await run_suite(read_suite(suite), tmp_path / "out")
    assert outcome.exit_code == 0
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    records = [json.loads(line) for line in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    for name, server in (("baseline", base_server), ("spec", spec_server)):
        row, mine = rows[name], [r for r in records if r["config"] == name]
        # the first request finds nothing; every later one finds the system prompt (and the second repeat all of
        # its own prompt but the last block): 6 prompts × 2 repeats, one cold
        assert [r["cached_tokens"] > 0 for r in mine] == [False] + [True] * 11
        assert (row["cold_requests"], row["cached_requests"], row["cache_pairs"]) == (1, 11, 1)
        assert row["cached_prompt_share"] == pytest.approx(server.cache.hits / server.cache.queries)
        assert row["prefix_cache_hit_rate"] == pytest.approx(row["cached_prompt_share"])  # the counters agree
        # a cached prompt's TTFT is the server's TTFT × its uncached share (8 of ~112 words): far below half the cold's
        assert row["cold_ttft_mean_ms"] >= 1000 * TTFT and row["cache_paired_ttft_ratio"] < 0.5
    assert rows["baseline"]["cached_acceptance_mean"] is None  # a plain config: no acceptance to split
    assert rows["spec"]["cached_acceptance_mean"] > 1 and rows["spec"]["cold_acceptance_mean"] > 1
    md = (tmp_path / "out" / "results.md").read_text()
    assert "Prefix cache: cached vs cold" in md and "| Req cached/cold |" in md and "| 11/1 |" in md
