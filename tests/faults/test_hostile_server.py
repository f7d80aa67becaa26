"""Hostile and odd servers: a bad value costs one request, one cell's acceptance or one
config — never the run, never a measured request — and usage that contradicts the stream is caught.

Every server here is ``tests/support/scripted_server.py`` with one knob turned, so each number has a known answer.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tracemalloc
from pathlib import Path

import aiohttp
import pytest
import yaml

from specbench.cli import main
from specbench.client import RequestSpec, close_transport, open_transport, stream_request
from specbench.client.metrics import parse_metrics
from specbench.client.sse import SseLines
from specbench.errors import LaunchError
from specbench.launch import read_engine
from specbench.launch.process import ServerProcess
from specbench.measure.acceptance import ratio_acceptance
from specbench.measure.cache import counter_hit_rate
from specbench.measure.engine_counters import prefix_cache_window, read_acceptance
from specbench.measure.latency import latency_stats
from specbench.measure.summarize import summarize_cell
from specbench.report.notes import sentence
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from specbench.suite import read_suite
from tests.support import paths, suites
from tests.support.runs import run_suite

DATA = paths.DATA / "metrics"
PATTERN, K = [1, 2, 4], 3
MAX_TOKENS = 1 + 7 * 3  # prefill token + three cycles of the pattern: 9 decode steps, 22 tokens
SECRET = "sk-trust-9f8e7d"


@pytest.fixture
def serve(scripted):
    """Scripted servers at this module's pace (10 ms to the first token, 4 ms a step) unless a test says otherwise."""
    return lambda **script: scripted(**{"ttft_s": 0.01, "gap_s": 0.004, **script})


async def run(tmp_path: Path, prompts_file: Path, configs: list[dict], *, engine: str | None = None,
              extra: dict | None = None, **load):
    out = tmp_path / "out"
    suite = suites.write_suite(
        tmp_path, configs, name="trust", prompts=prompts_file, requests=4, engine=engine, endpoint="chat", **(extra or {}),
        load={"concurrency": 2, "max_tokens": MAX_TOKENS, "temperature": 0, "warmup": 0, "timeout_s": 30, **load})
    outcome = await run_suite(read_suite(suite), out)
    rows = {r["run"]: r for r in json.loads((out / "results.json").read_text())}
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()] \
        if (out / "requests.jsonl").exists() else []
    return outcome, rows, records, (out / "results.md").read_text(), out


def two(bad_url: str, good_url: str) -> list[dict]:
    """The odd server first (as the baseline), so the config after it shows the run went on."""
    return [{"name": "baseline", "url": bad_url},
            {"name": "spec", "url": good_url, "method": "ngram", "num_speculative_tokens": K}]


# ---- 1. one odd server value must not abort the run ------------------------------------------------

async def test_wrong_typed_spec_stats_fail_the_request_not_the_run(tmp_path, prompts_file, serve):
    _, bad = await serve(pattern=PATTERN, k=K, spec_stats=True,
                         final_extra={"metrics": {"speculative_decoding": {"num_spec_steps": "3"}}})
    _, good = await serve(pattern=PATTERN, k=K, spec_stats=True)
    outcome, rows, records, md, out = await run(tmp_path, prompts_file, two(bad, good))
    assert rows["spec"]["requests"] == 4 and rows["spec"]["status"] == "ok"
    base = rows["baseline"]
    assert base["requests"] == 0 and base["failed_requests"] == 4 and base["status"] == "failed"
    assert list(base["errors"]) == ["bad server value"]
    bad_records = [r for r in records if r["config"] == "baseline"]
    assert len(bad_records) == 4  # every measured request kept, with its reason
    assert all("num_spec_steps" in r["error"] and "'3'" in r["error"] for r in bad_records)
    assert outcome.exit_code == 1
    # --resume over the same dir reads those records back without a traceback
    code = await asyncio.to_thread(main, ["run", str(tmp_path / "suite.yaml"), "--resume", str(out), "--quiet"])
    assert code == 1


async def test_huge_completion_tokens_fail_the_request(tmp_path, prompts_file, serve):
    _, bad = await serve(pattern=PATTERN, final_usage={"completion_tokens": 1e30})
    _, good = await serve(pattern=PATTERN, k=K)
    outcome, rows, records, md, _ = await run(tmp_path, prompts_file, two(bad, good))
    assert rows["spec"]["requests"] == 4
    assert rows["baseline"]["output_tokens"] == 0 and rows["baseline"]["output_throughput_tps"] is None
    assert all("completion_tokens" in r["error"] for r in records if r["config"] == "baseline")


async def test_nan_counter_nulls_that_cells_acceptance(tmp_path, prompts_file, serve):
    _, base = await serve(pattern=[1])
    _, spec = await serve(pattern=PATTERN, k=K, counters={"spec_decode_num_accepted_tokens": "NaN"})
    outcome, rows, records, md, out = await run(tmp_path, prompts_file, [
        {"name": "baseline", "url": base}, {"name": "spec", "url": spec, "method": "ngram", "num_speculative_tokens": K}])
    row = rows["spec"]
    assert row["requests"] == 4 and row["status"] == "ok"  # the requests themselves are fine
    assert row["mean_acceptance_length"] is None and row["acceptance_rate"] is None and row["spec_drafts"] is None
    assert "vllm:spec_decode_num_accepted_tokens_total" in row["acceptance_error"] and "NaN" in row["acceptance_error"]
    assert row["stream_mean_acceptance_length"] == pytest.approx(21 / 9)  # the other source still stands
    assert rows["baseline"]["acceptance_error"] is None
    assert "spec / prompts" in md and "NaN" in md.split("| prompts | spec |")[-1]
    json.loads((out / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))


@pytest.mark.parametrize("text,why", [("+Inf", "inf"), ("-4.0", "negative")])
def test_infinite_or_negative_counter_is_named(text, why):
    before = parse_metrics((DATA / "vllm_before.txt").read_text())
    line = 'vllm:spec_decode_num_drafts_total{engine="1",model_name="smol"} '
    after_text = (DATA / "vllm_after.txt").read_text().replace(line + "52.0", line + text)
    out = read_acceptance(read_engine("vllm"), before, parse_metrics(after_text), 3)
    assert out.mean_acceptance_length is None and out.acceptance_source is None
    assert "vllm:spec_decode_num_drafts_total" in out.acceptance_error and why in out.acceptance_error


def test_counter_series_that_overflow_when_summed_null_acceptance():
    line = 'vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="smol"} '
    text = (DATA / "vllm_after.txt").read_text()
    text = text.replace(line + "156.0", line + "1.7e308").replace(line.replace('"1"', '"0"') + "318.0", line.replace('"1"', '"0"') + "1.7e308")
    out = read_acceptance(read_engine("vllm"), parse_metrics((DATA / "vllm_before.txt").read_text()), parse_metrics(text), 3)
    assert out.mean_acceptance_length is None and "overflows" in out.acceptance_error


def test_counter_that_went_backwards_nulls_acceptance():
    before = parse_metrics((DATA / "vllm_after.txt").read_text())
    after = parse_metrics((DATA / "vllm_before.txt").read_text())
    out = read_acceptance(read_engine("vllm"), before, after, 3)
    assert out.mean_acceptance_length is None and "went down" in out.acceptance_error


def _cache_page(queries: str, hits: str) -> str:
    return (f'vllm:prefix_cache_queries_total{{engine="0",model_name="smol"}} {queries}\n'
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="smol"}} {hits}\n')


@pytest.mark.parametrize(("after", "why"), [
    (_cache_page("200.0", "150.0"), "vllm:prefix_cache_hits_total rose by 140, more than vllm:prefix_cache_queries_total (100)"),
    (_cache_page("50.0", "10.0"), "vllm:prefix_cache_queries_total went down during the phase (100 → 50)"),
    (_cache_page("NaN", "10.0"), "vllm:prefix_cache_queries_total is NaN after the phase"),
])
def test_untrusted_prefix_cache_counters_give_a_reason_not_a_hit_rate(after, why):
    window = prefix_cache_window(read_engine("vllm"), parse_metrics(_cache_page("100.0", "10.0")), parse_metrics(after))
    assert window is not None and window.error.startswith(f"/metrics {why}") and window.hits is None
    phase = PhaseInfo(config="c", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=1.0,
                      prefix_cache=window.to_dict())
    assert counter_hit_rate([phase]) is None
    good = prefix_cache_window(read_engine("vllm"), parse_metrics(_cache_page("100.0", "10.0")),
                               parse_metrics(_cache_page("300.0", "110.0")))
    assert good is not None and good.to_dict() == {"queries": 200, "hits": 100}
    assert prefix_cache_window(read_engine("vllm"), parse_metrics(""), parse_metrics("")) is None  # not exported


@pytest.mark.parametrize("body", ['[{"id": "smol"}]', "<html>oops</html>", '{"data": [{"id": 5}, "x"]}', '{"data": 3}'])
async def test_odd_models_answer_fails_that_config_only(tmp_path, prompts_file, serve, body):
    _, bad = await serve(pattern=[1], models_body=body)
    _, good = await serve(pattern=PATTERN, k=K)
    outcome, rows, _, md, _ = await run(tmp_path, prompts_file, two(bad, good))
    assert "baseline" in outcome.failed_configs and "/v1/models" in outcome.failed_configs["baseline"]
    assert "\n" not in outcome.failed_configs["baseline"]
    assert rows["spec"]["requests"] == 4 and outcome.exit_code == 1


@pytest.mark.parametrize("body", ['["1.0"]', "not json", '{"version": {"x": 1}}'])
async def test_odd_version_answer_is_null_with_its_reason(tmp_path, prompts_file, serve, body):
    _, bad = await serve(pattern=[1], version_body=body)
    _, good = await serve(pattern=PATTERN, k=K)
    outcome, rows, _, _, out = await run(tmp_path, prompts_file, two(bad, good))
    assert outcome.exit_code == 0 and not outcome.failed_configs
    assert rows["baseline"]["requests"] == 4 and rows["baseline"]["server_version"] is None
    meta = json.loads((out / "meta.json").read_text())
    assert meta["servers"]["baseline"]["version"] is None and "/version" in meta["servers"]["baseline"]["version_error"]
    assert meta["servers"]["spec"]["version"] == "scripted-1.0"


async def test_odd_server_info_nulls_sglang_acceptance_with_reason(tmp_path, prompts_file, serve):
    """SGLang without the counters falls back to /get_server_info: a list there is a reason, not a crash."""
    _, spec = await serve(pattern=PATTERN, k=K, metrics_format="none", version_body='[{"avg_spec_accept_length": 3}]')
    outcome, rows, _, _, _ = await run(tmp_path, prompts_file, [
        {"name": "spec", "url": spec, "method": "eagle", "num_speculative_tokens": K, "baseline": True}], engine="sglang")
    row = rows["spec"]
    assert row["requests"] == 4 and row["mean_acceptance_length"] is None and row["acceptance_error"]


@pytest.mark.parametrize("body", ['[{"id": "smol"}]', "{not json"])
async def test_odd_models_answer_during_launch_readiness_is_a_launch_error(tmp_path, serve, body):
    _, url = await serve(models_body=body)
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    proc = ServerProcess("odd", sleeper, {}, tmp_path / "odd.log", url, "/health", "/v1/models", "smol", 20)
    proc.start()
    try:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(LaunchError, match="/v1/models"):
                await proc.wait_ready(session)
    finally:
        proc.stop(grace_s=1)


# ---- 2. usage that contradicts the stream -----------------------------------------------------------

async def test_final_usage_larger_than_the_stream_is_flagged_and_the_stream_used(tmp_path, prompts_file, serve):
    _, bad = await serve(pattern=PATTERN, final_usage={"completion_tokens": 99999})
    _, good = await serve(pattern=PATTERN, k=K)
    outcome, rows, records, md, _ = await run(tmp_path, prompts_file, two(bad, good))
    base = rows["baseline"]
    assert base["output_tokens"] == 4 * MAX_TOKENS  # the per-chunk counts, which agree with the stream
    assert base["token_count_warnings"] == {"final usage disagrees with per-chunk usage": 4}
    assert all(r["token_warning"] and r["output_tokens"] == MAX_TOKENS for r in records if r["config"] == "baseline")
    assert "final usage disagrees" in md and "4 requests" in md


async def test_final_usage_beyond_max_tokens_without_chunk_counts_fails_the_request(serve):
    _, url = await serve(pattern=PATTERN, usage_per_chunk=False, final_usage={"completion_tokens": 99999})
    rec = await _one(url)
    assert rec.error and "99999" in rec.error and f"max_tokens {MAX_TOKENS}" in rec.error
    assert not rec.ok


async def test_final_usage_below_the_content_chunks_fails_the_request(serve):
    _, url = await serve(pattern=PATTERN, usage_per_chunk=False, final_usage={"completion_tokens": 3})
    rec = await _one(url)
    assert rec.error and "10 content chunks" in rec.error


async def test_final_usage_contradiction_falls_back_to_token_ids(serve):
    _, url = await serve(pattern=PATTERN, usage_per_chunk=False, token_ids=True, final_usage={"completion_tokens": 99999})
    rec = await _one(url)
    assert rec.ok and rec.output_tokens == MAX_TOKENS and rec.token_source == "token_ids"
    assert rec.chunk_tokens == [1] + PATTERN * 3 and "99999" in rec.token_warning


@pytest.mark.parametrize(("details", "why"), [
    ({"cached_tokens": "lots"}, "usage.prompt_tokens_details.cached_tokens = 'lots' is not a token count"),
    ({"cached_tokens": -1}, "usage.prompt_tokens_details.cached_tokens = -1 is not a token count"),
    ({"cached_tokens": True}, "usage.prompt_tokens_details.cached_tokens = True is not a token count"),
    ({"cached_tokens": 99999}, "usage.prompt_tokens_details.cached_tokens = 99999 exceeds usage.prompt_tokens = "),
    ("cached", "usage.prompt_tokens_details.cached_tokens = 'cached' is not a token count"),
])
async def test_a_bad_cached_token_count_costs_that_field_only(serve, details, why):
    _, url = await serve(pattern=PATTERN, final_usage={"prompt_tokens_details": details})
    rec = await _one(url)
    assert rec.ok and rec.error is None and rec.output_tokens == MAX_TOKENS  # the request's timing and tokens stand
    assert rec.cached_tokens is None and "cached_tokens" not in rec.to_dict()
    assert rec.token_warning.startswith(f"bad server value: {why}") and rec.token_warning.endswith("cached_tokens left null")


def test_token_ids_beyond_max_tokens_give_way_to_a_plausible_total():
    from specbench.client import ResponseStream

    s = ResponseStream(RequestRecord("p", "d", "c"), "completions", token_limit=4)
    s.feed(b'{"choices": [{"text": "a", "token_ids": [1]}]}', 1.0)
    s.feed(b'{"choices": [{"text": "b", "token_ids": [2, 3, 4, 5, 6]}]}', 1.1)
    s.feed(b'{"choices": [], "usage": {"completion_tokens": 4}}', 1.2)
    rec = s.finish()
    assert rec.ok and rec.output_tokens == 4 and rec.token_source == "usage_total_spread"
    assert rec.token_warning.startswith("streamed token ids exceed max_tokens: 6 > 4")


async def test_per_chunk_usage_going_backwards_is_not_used(tmp_path, prompts_file, serve):
    _, bad = await serve(pattern=PATTERN, chunk_usage={3: 2})  # chunk 3 claims 2 tokens so far, after 4
    _, good = await serve(pattern=PATTERN, k=K)
    outcome, rows, records, md, _ = await run(tmp_path, prompts_file, two(bad, good))
    base = [r for r in records if r["config"] == "baseline"]
    assert all(r["token_source"] == "usage_total_spread" and r["chunk_tokens"] == [] for r in base)
    assert all(r["output_tokens"] == MAX_TOKENS and "went down" in r["token_warning"] for r in base)
    assert rows["baseline"]["token_count_warnings"] == {"per-chunk usage went down": 4}
    assert rows["baseline"]["itl_mean_ms"] > 0 and rows["baseline"]["itl_p50_ms"] > 0


# ---- 3. exact numbers when the server sends only a final usage total ---------------------------------

async def _records(url: str, n: int = 6, **spec) -> list[RequestRecord]:
    spec_ = RequestSpec(base_url=url, model="smol", max_tokens=MAX_TOKENS, **spec)
    transport = open_transport(url)
    try:
        return list(await asyncio.gather(*[
            stream_request(transport, spec_, [{"role": "user", "content": f"q{i}"}], RequestRecord(f"p{i}", "d", "c"))
            for i in range(n)]))
    finally:
        await close_transport(transport)


async def _one(url: str, **spec) -> RequestRecord:
    return (await _records(url, 1, **spec))[0]


async def test_final_total_only_gives_exact_ttft_latency_tpot_and_itl_mean(serve):
    _, url = await serve(pattern=PATTERN, usage_per_chunk=False, gap_s=0.006)
    records = await _records(url)
    assert all(r.ok and r.token_source == "usage_total_spread" and r.output_tokens == MAX_TOKENS for r in records)
    stats = latency_stats(records)
    decode_s = sum(r.latency - r.ttft for r in records)
    assert stats.itl_mean_ms == pytest.approx(1000 * decode_s / sum(r.output_tokens - 1 for r in records), rel=1e-12)
    assert stats.ttft_mean_ms == pytest.approx(1000 * sum(r.ttft for r in records) / len(records), rel=1e-12)
    assert stats.tpot_mean_ms == pytest.approx(
        1000 * sum((r.latency - r.ttft) / (MAX_TOKENS - 1) for r in records) / len(records), rel=1e-12)
    row = summarize_cell([PhaseInfo("c", "d", 2, None, 0, 1.0)], records, method="ngram", k=K)
    assert row.itl_percentiles_estimated is True
    assert any("ITL percentiles are estimates" in sentence(n) for n in row.notes or [])


async def test_per_chunk_usage_keeps_itl_percentiles_exact(serve):
    _, url = await serve(pattern=PATTERN)
    records = await _records(url, 2)
    row = summarize_cell([PhaseInfo("c", "d", 2, None, 0, 1.0)], records, method="ngram", k=K)
    # the only note is the steady window's: two requests sent at once at C=2 are one wave, with no steady state
    assert row.itl_percentiles_estimated is False and row.notes == [row.steady_note]
    assert row.steady_note == ("no steady window: one wave: 2 requests at C=2; no request was sent as a replacement, "
                               "so there is no steady state")


# ---- 4. SGLang acceptance from counters: the prefill token is not a verify step ----------------------

def test_sglang_counter_acceptance_subtracts_one_prefill_token_per_request():
    before, after = (parse_metrics((DATA / f"sglang_{w}.txt").read_text()) for w in ("before", "after"))
    out = read_acceptance(read_engine("sglang"), before, after, 3)
    # Δgeneration 2800, Δnum_requests 16, Δverify 800
    assert out.mean_acceptance_length == pytest.approx((2800 - 16) / 800)
    assert out.acceptance_rate == pytest.approx(((2800 - 16) / 800 - 1) / 3)
    assert "num_requests_total" in out.acceptance_source
    assert ratio_acceptance(before, after, "sglang:generation_tokens_total", "sglang:spec_verify_calls_total") == pytest.approx(3.5)


def test_sglang_without_a_request_counter_uses_the_phases_completed_requests():
    drop = lambda t: "\n".join(l for l in t.splitlines() if "num_requests" not in l) + "\n"  # noqa: E731
    before, after = (parse_metrics(drop((DATA / f"sglang_{w}.txt").read_text())) for w in ("before", "after"))
    window = read_acceptance(read_engine("sglang"), before, after, 3)
    recs = [RequestRecord(f"p{i}", "d", "c", send_time=0.0, chunk_times=[0.1, 0.2], chunk_tokens=[1, 3],
                          output_tokens=4, token_source="usage_continuous") for i in range(20)]
    row = summarize_cell([PhaseInfo("c", "d", 2, None, 0, 1.0, acceptance=window)], recs, method="eagle", k=3)
    assert row.mean_acceptance_length == pytest.approx((2800 - 20) / 800)
    assert "completed requests" in (row.acceptance_source or "")


async def test_sglang_end_to_end_acceptance_equals_the_streams(tmp_path, prompts_file, serve):
    _, spec = await serve(pattern=PATTERN, k=K, metrics_format="sglang")
    outcome, rows, _, md, _ = await run(tmp_path, prompts_file, [
        {"name": "spec", "url": spec, "method": "eagle", "num_speculative_tokens": K, "baseline": True}], engine="sglang")
    row = rows["spec"]
    assert row["mean_acceptance_length"] == pytest.approx(21 / 9)  # (22 − 1) tokens over 9 verify steps
    assert row["mean_acceptance_length"] == pytest.approx(row["stream_mean_acceptance_length"])
    assert row["acceptance_rate"] == pytest.approx((21 / 9 - 1) / K)
    assert "one prefill token per finished request" in md


# ---- 5. the API key goes with every request and into no file -----------------------------------------

def _files_containing(root: Path, needle: str) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.parametrize("client", ["auto", "openai"])
async def test_api_key_on_every_path_and_scrubbed_from_echoed_errors(tmp_path, prompts_file, serve, monkeypatch, client):
    monkeypatch.setenv("TRUST_KEY", SECRET)
    base, base_url = await serve(pattern=[1], api_key=SECRET, fault="http401echo", fault_on=(2,))
    spec, spec_url = await serve(pattern=PATTERN, k=K, api_key=SECRET)
    outcome, rows, records, md, out = await run(tmp_path, prompts_file, [
        {"name": "baseline", "url": base_url}, {"name": "spec", "url": spec_url, "method": "ngram", "num_speculative_tokens": K}],
        extra={"api_key_env": "TRUST_KEY"}, client=client)
    assert not outcome.failed_configs
    assert rows["spec"]["requests"] == 4 and rows["spec"]["mean_acceptance_length"] == pytest.approx(1 + 12 / 9)
    assert rows["baseline"]["failed_requests"] == 1
    for server in (base, spec):
        paths = {p for p, _ in server.probe_headers}
        assert {"/v1/models", "/metrics", "/version"} <= paths
        assert all(h.get("Authorization") == f"Bearer {SECRET}" for _, h in server.probe_headers)
    failed = [r for r in records if r["error"]]
    assert len(failed) == 1 and "HTTP 401" in failed[0]["error"] and "Bearer ***" in failed[0]["error"]
    assert all(h.get("Authorization") == f"Bearer {SECRET}" for h in spec.headers)
    assert _files_containing(out, SECRET) == []


async def test_api_key_reaches_launch_readiness(tmp_path, prompts_file, launchers, monkeypatch):
    """A launched server started with --api-key answers nothing without it, /health and /v1/models included."""
    (launchers / "keyed.yaml").write_text(yaml.safe_dump({
        "extends": "vllm", "name": "keyed", "python": sys.executable, "gpu_env": None,
        "command": ["{python}", str(paths.SCRIPTED)],
        "args": ["--port", "{port}", "--model", "{model}"]}))
    monkeypatch.setenv("TRUST_KEY", SECRET)
    outcome, rows, _, _, out = await run(tmp_path, prompts_file, [{"name": "baseline", "args": ["--api-key", SECRET]}],
                                         engine="keyed", extra={"api_key_env": "TRUST_KEY", "server": {"startup_timeout_s": 20}})
    assert not outcome.failed_configs and rows["baseline"]["requests"] == 4
    assert rows["baseline"]["server_version"] == "scripted-1.0"
    assert _files_containing(out, SECRET) == []


# ---- 6. SSE edge cases, the same on both transports ---------------------------------------------------

@pytest.mark.parametrize("client", ["socket", "aiohttp", "openai"])
async def test_empty_data_line_is_ignored(serve, client):
    """As the SSE spec says; the openai SDK parses the empty line as JSON and fails the request instead
    (what an SDK user would get; specbench/client/sdk.py names it as what that path cannot check)."""
    _, url = await serve(pattern=PATTERN, empty_data=True)
    rec = await _via(url, client)
    if client == "openai":
        assert rec.error == "malformed SSE data: Expecting value" and not rec.ok
        return
    assert rec.ok and rec.output_tokens == MAX_TOKENS and rec.chunk_tokens == [1] + PATTERN * 3


@pytest.mark.parametrize("client", ["socket", "aiohttp", "openai"])
async def test_gzip_stream_is_refused_with_one_line_on_both_transports(serve, client):
    server, url = await serve(pattern=PATTERN, gzip=True)
    rec = await _via(url, client)
    assert server.headers[-1].get("Accept-Encoding") == "identity"
    assert rec.error == ("response is gzip-encoded although identity was asked (Accept-Encoding: identity): refused, "
                         "chunk times would include the compressor's buffering")


# ---- 7. bounds on what a server sends, the same on both transports --------------------------------------

LONG = (4 << 20) + 1  # one character past the longest SSE line accepted


async def test_an_overlong_sse_line_fails_that_request_not_the_run(tmp_path, prompts_file, serve):
    _, bad = await serve(pattern=PATTERN, k=K, long_line=LONG)
    _, good = await serve(pattern=PATTERN, k=K)
    outcome, rows, records, md, out = await run(tmp_path, prompts_file, two(bad, good))
    assert rows["spec"]["requests"] == 4 and rows["spec"]["status"] == "ok"
    assert rows["baseline"]["failed_requests"] == 4 and list(rows["baseline"]["errors"]) == ["server sent too much"]
    bad_records = [r for r in records if r["config"] == "baseline"]
    assert [r["error"] for r in bad_records] == ["server sent too much: an SSE line over 4 MiB"] * 4
    assert all(not r["chunk_times"] for r in bad_records), "the long line is not stored as a chunk"
    assert outcome.exit_code == 1


@pytest.mark.parametrize("client", ["socket", "aiohttp", "openai"])
@pytest.mark.parametrize(("script", "error"), [
    ({"long_line": LONG}, "server sent too much: an SSE line over 4 MiB"),
    ({"bulk": 160 << 20}, "server sent too much: a response body over 128 MiB"),
])
async def test_stream_bounds_fail_the_request_with_one_line(serve, client, script, error):
    server, url = await serve(pattern=PATTERN, **script)
    rec = await _via(url, client, timeout_s=20)
    assert rec.error == error and not rec.ok
    if "bulk" in script:
        assert await body_outcome(server) == "client left", "the client stops reading at the bound"


@pytest.mark.parametrize("client", ["socket", "aiohttp", "openai"])
async def test_a_long_error_body_is_cut_at_its_limit(serve, client):
    """Only the first 4 KiB of a non-200 body are read (its first 200 characters are shown): the
    client leaves a 64 MiB body long before its end."""
    server, url = await serve(pattern=PATTERN, fault="http500long", fault_on=(1,))
    rec = await _via(url, client, timeout_s=20)
    assert rec.error == "HTTP 500: scripted failure " + "x" * 183
    assert await body_outcome(server) == "client left"


async def body_outcome(server) -> str:
    """How the server's long body ended, once its handler knows (it may still be writing into buffers)."""
    for _ in range(3000):
        if server.hung_up or server.sent_whole:
            return "client left" if server.hung_up else "read whole"
        await asyncio.sleep(0.01)
    return "server still writing"


def test_a_line_split_over_many_reads_costs_linear_work():
    """A line spanning reads is joined once, at its end, not re-joined on every read: what the
    parser allocates while fed a 3 MiB line in 4 KiB reads stays within a few bytes per byte
    received (re-joining on each read allocated ~n² / 2·read: 1,100 bytes per byte here)."""
    got: list[int] = []
    sse = SseLines(lambda data, stamp: got.append(len(data)) or True)
    text = b"x" * (3 << 20)
    body = b'data: {"t": "' + text + b'"}\n\ndata: [DONE]\n\n'
    pieces = [body[i:i + 4096] for i in range(0, len(body), 4096)]
    allocated = 0
    tracemalloc.start()
    try:
        for piece in pieces:
            current = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            sse.feed(piece, 0.0)
            allocated += tracemalloc.get_traced_memory()[1] - current
    finally:
        tracemalloc.stop()
    assert got == [len(text) + 9, len(b"[DONE]")]
    assert allocated < 4 * len(body)


async def _via(url: str, client: str, **spec_kw) -> RequestRecord:
    spec = RequestSpec(base_url=url, model="smol", max_tokens=MAX_TOKENS, **spec_kw)
    transport = open_transport(url, client)
    try:
        return await stream_request(transport, spec, [{"role": "user", "content": "q"}], RequestRecord("p", "d", "c"))
    finally:
        await close_transport(transport)
