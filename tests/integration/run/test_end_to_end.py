"""The whole pipeline against scripted servers whose schedules give known answers."""

import json
import re

import pytest

from specbench.cli import main
from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import write_e2e_suite as write_suite

# pattern 1,2,4 with k=3: 3 steps carry 7 tokens with 0+1+3 accepted
PATTERN, K = [1, 2, 4], 3
MAX_TOKENS = 1 + 7 * 3  # prefill token + three full cycles = 9 decode steps per request


@pytest.fixture
async def servers():
    base, base_runner, base_url = await start(Script(pattern=[1], ttft_s=0.02, gap_s=0.01))
    spec, spec_runner, spec_url = await start(Script(pattern=PATTERN, k=K, ttft_s=0.02, gap_s=0.01, spec_stats=True))
    yield {"baseline": base_url, "spec": spec_url, "base_server": base, "spec_server": spec}
    await base_runner.cleanup()
    await spec_runner.cleanup()


async def test_known_answers(tmp_path, prompts_file, servers):
    suite = read_suite(write_suite(tmp_path, prompts_file, servers))
    outcome = await run_suite(suite, tmp_path / "out")
    assert outcome.exit_code == 0
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    base, spec = rows["baseline"], rows["ngram_k3"]

    assert base["requests"] == spec["requests"] == 6
    assert base["output_tokens"] == spec["output_tokens"] == 6 * MAX_TOKENS
    # 9 drafts per request, 3 draft tokens each, 12 accepted; position j accepted in steps with >= j+1 tokens
    assert spec["mean_acceptance_length"] == pytest.approx(1 + 12 / 9)
    assert spec["acceptance_rate"] == pytest.approx(12 / 27)
    assert [spec["acceptance_pos_1"], spec["acceptance_pos_2"], spec["acceptance_pos_3"]] == pytest.approx([6 / 9, 3 / 9, 3 / 9])
    assert spec["spec_drafts"] == 6 * 9  # warm-up excluded by the /metrics window
    assert spec["stream_mean_acceptance_length"] == pytest.approx(21 / 9)
    assert spec["acceptance_sources_agree"] is True
    assert spec["request_stats_mean_acceptance_length"] == pytest.approx(1 + 12 / 9)  # per-request stats source
    assert base["request_stats_mean_acceptance_length"] is None
    lo, hi = spec["ci95"]["speedup_vs_baseline"]
    assert lo <= spec["speedup_vs_baseline"] * 1.0001 and spec["speedup_vs_baseline"] <= hi * 1.0001
    assert spec["speedup_ci_method"].startswith("bootstrap over 6 paired prompts")
    assert spec["paired_prompts"] == 6 and spec["fidelity_identical"] == 1.0  # same prompt → same scripted tokens
    assert spec["stream_tokens_per_step_histogram"] == {"1": 18, "2": 18, "4": 18}
    assert base["mean_acceptance_length"] is None and base["acceptance_rate"] is None  # missing, never 0
    assert base["speedup_vs_baseline"] == pytest.approx(1.0)
    assert spec["speedup_vs_baseline"] == pytest.approx(spec["output_throughput_tps"] / base["output_throughput_tps"])
    # 9 steps instead of 21 at the same gap: ideally (0.02 + 21 × 0.01) / (0.02 + 9 × 0.01) = 2.1x
    assert spec["speedup_vs_baseline"] > 1.5, (spec["output_throughput_tps"], base["output_throughput_tps"])
    # per-token ITL: a chunk of 4 tokens after ~4 ms gives four ~1 ms samples, so ITL ~ TPOT, not the step gap
    assert spec["itl_mean_ms"] == pytest.approx(spec["tpot_mean_ms"], rel=0.05)
    assert spec["step_mean_ms"] > 2 * spec["itl_mean_ms"]
    assert spec["token_count_source"] == {"usage_continuous": 6}
    assert set(spec["categories"]) == {"cat0", "cat1"}

    records = [json.loads(l) for l in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if r["phase"] == "measure" and r["config"] == "ngram_k3"]
    assert len(measured) == 6 and all(r["chunk_tokens"] == [1] + PATTERN * 3 for r in measured)
    assert len([r for r in records if r["phase"] == "warmup"]) == 2
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| prompts | ngram_k3 | 6 |" in md and "| prompts | baseline | 6 |" in md
    assert re.search(r"\| \d\.\d+x \[\d\.\d+–\d\.\d+\] \|", md) and "| Same output |" in md  # the speedup with its CI
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["servers"]["ngram_k3"]["version"] == "scripted-1.0"
    # the request asked for per-chunk usage
    body = servers["spec_server"].bodies[-1]
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["temperature"] == 0 and body["max_tokens"] == MAX_TOKENS


async def test_two_load_processes_give_the_same_known_answers(tmp_path, prompts_file, servers):
    suite = read_suite(write_suite(tmp_path, prompts_file, servers, client_processes=2))
    outcome = await run_suite(suite, tmp_path / "out")
    assert outcome.exit_code == 0
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    spec = rows["ngram_k3"]
    assert spec["requests"] == rows["baseline"]["requests"] == 6 and spec["concurrency"] == 2
    assert spec["spec_drafts"] == 6 * 9 and spec["acceptance_sources_agree"] is True
    assert spec["stream_tokens_per_step_histogram"] == {"1": 18, "2": 18, "4": 18}
    assert spec["token_count_source"] == {"usage_continuous": 6} and spec["shared_read_share"] == 0


async def test_fallback_without_per_chunk_usage(tmp_path, prompts_file):
    srv, runner, url = await start(Script(pattern=[2], k=1, usage_per_chunk=False, token_ids=True))
    try:
        suite = read_suite(write_suite(tmp_path, prompts_file, {"baseline": url, "spec": url}, warmup=0))
        await run_suite(suite, tmp_path / "out")
    finally:
        await runner.cleanup()
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert rows[0]["token_count_source"] == {"token_ids": 6}
    # 21 decode tokens: ten steps of 2, then max_tokens cuts the last step to 1
    assert rows[0]["stream_tokens_per_step_histogram"] == {"1": 6, "2": 60}


async def test_cli_run_and_report(tmp_path, prompts_file, servers, capsys):
    suite = write_suite(tmp_path, prompts_file, servers)
    out = tmp_path / "cli"
    import asyncio
    code = await asyncio.to_thread(main, ["run", str(suite), "--output", str(out), "--quiet"])
    assert code == 0
    assert (out / "results.json").exists() and (out / "results.md").exists()
    capsys.readouterr()
    assert main(["report", str(out), "--format", "csv"]) == 0
    csv_out = capsys.readouterr().out.splitlines()
    assert csv_out[0].startswith("dataset,run,method,num_speculative_tokens,requests")
    assert len(csv_out) == 3
    # the markdown report of a specbench run carries the same method notes as results.md
    assert main(["report", str(out), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.strip() == (out / "results.md").read_text().strip()
    assert "Chunk times: kernel receive time (SO_TIMESTAMPNS)" in md


async def test_fidelity_flags_divergent_output(tmp_path, prompts_file):
    base, r1, base_url = await start(Script(pattern=[1], token_ids=True))
    spec, r2, spec_url = await start(Script(pattern=[2], k=1, token_ids=True, diverge_at=5))
    try:
        suite = read_suite(write_suite(tmp_path, prompts_file, {"baseline": base_url, "spec": spec_url}, warmup=0))
        await run_suite(suite, tmp_path / "out")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    spec_row = rows["ngram_k3"]
    assert spec_row["fidelity_identical"] == 0.0 and spec_row["fidelity_compared"] == 6
    assert spec_row["fidelity_unit"] == "token" and spec_row["fidelity_first_divergence_median"] == 5
    assert "| 0.00% |" in (tmp_path / "out" / "results.md").read_text()


async def test_meta_reports_harness_overhead(tmp_path, prompts_file, servers):
    await run_suite(read_suite(write_suite(tmp_path, prompts_file, servers)), tmp_path / "out")
    timing = json.loads((tmp_path / "out" / "meta.json").read_text())["timing"]
    assert timing["measured_s"] > 0 and timing["warmup_s"] > 0
    parts = timing["measured_s"] + timing["warmup_s"] + timing["servers_s"] + timing["harness_s"]
    assert parts == pytest.approx(timing["total_s"], abs=0.01)
    assert 0 <= timing["harness_share"] < 1
