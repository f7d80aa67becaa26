"""``load.prefix_cache: reset`` against servers that cannot or will not reset: a server at a URL without the endpoint
fails that config in one line naming the URL and what to enable, before any of its warm-ups or passes; a server that
keeps refusing ({"success": false}) is asked again briefly, then the pass fails naming the reason; an answer that says
neither is not taken for a reset. The other configs' cells, and the cells measured before, are kept."""

from __future__ import annotations

import asyncio

import pytest

from specbench.cli import main
from tests.support.rundirs import cell, check_run_dir
from tests.support.suites import write_fault_suite

TRIES = 4


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr("specbench.run.prefix_reset.RESET_TRIES", TRIES)
    monkeypatch.setattr("specbench.run.prefix_reset.RESET_WAIT_S", 0.01)


def cli(*args: str) -> int:
    return main(["run", *args, "--quiet"])


def flat(text: str) -> str:
    return " ".join(text.split())  # the terminal wraps long lines


async def test_a_url_server_without_the_endpoint_fails_in_one_line_before_any_pass(tmp_path, prompts_file, scripted,
                                                                                  capsys):
    base, base_url = await scripted(reset="vllm")
    bare, bare_url = await scripted()  # a vLLM started without VLLM_SERVER_DEV_MODE=1: no /reset_prefix_cache
    configs = [{"name": "baseline", "url": base_url},
               {"name": "spec", "url": bare_url, "method": "ngram", "num_speculative_tokens": 3}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, concurrency=[1, 2], warmup=2,
                              prefix_cache="reset")
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 1
    assert bare.requests == 0, "no warm-up and no pass is sent to a server that cannot reset"
    assert base.resets == 3 and base.requests == 2 * (2 + 6)
    rows, records, phases, meta = check_run_dir(out)
    assert {r["run"] for r in rows} == {"baseline"} and all(r["status"] == "ok" for r in rows)
    assert {p["config"] for p in phases} == {"baseline"} and all(p["prefix_cache_reset"] for p in phases)
    said = meta["failed_configs"]["spec"]
    assert said == (f"config 'spec': load.prefix_cache reset: POST {bare_url}/reset_prefix_cache?reset_external=true: "
                    "HTTP 404: the server has no prefix-cache reset; start the server with VLLM_SERVER_DEV_MODE=1 "
                    "(specbench sets it on the servers it launches), or set load.prefix_cache: keep")
    assert f"config spec failed: {said}" in flat(capsys.readouterr().err)
    assert said in flat((out / "results.md").read_text())


async def test_refused_resets_are_retried_then_the_pass_fails_naming_why(tmp_path, prompts_file, scripted):
    """Reached and the first pass reset fine; before the second pass it refuses every time: the first cell stays."""
    server, url = await scripted(reset="vllm", reset_refused=tuple(range(3, 1000)))
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                              concurrency=[1, 2], warmup=2, prefix_cache="reset")
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 1
    assert server.resets == 2 + TRIES
    assert server.events[-TRIES:] == ["reset"] * TRIES, "the second pass is not sent"
    rows, _, phases, meta = check_run_dir(out)
    assert cell(rows, "baseline", 1)["status"] == "ok" and [p["concurrency"] for p in phases] == [1]
    said = meta["failed_configs"]["baseline"]
    assert f"POST {url}/reset_prefix_cache?reset_external=true: refused {TRIES} times" in said and "\n" not in said
    assert '({"success": false}: blocks still held, e.g. by running requests); the pass was not measured' in said


async def test_a_reset_refused_for_a_moment_is_retried_and_the_pass_measured(tmp_path, prompts_file, scripted):
    server, url = await scripted(reset="sglang", reset_refused=(2, 3))  # SGLang: 400 while requests run or wait
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                              engine="sglang", warmup=2, prefix_cache="reset")
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 0
    assert server.events == ["reset"] + ["request"] * 2 + ["reset"] * 3 + ["request"] * 6
    _, _, phases, _ = check_run_dir(out)
    assert [p["prefix_cache_reset"] for p in phases] == [True]


@pytest.mark.parametrize("body, said", [
    ("OK", "answered 'OK', not {\"success\": true|false}: whether the cache was emptied is unknown"),
    ('{"success": 1}', "answered '{\"success\": 1}', not {\"success\": true|false}"),
])
async def test_an_answer_that_says_neither_is_not_taken_for_a_reset(tmp_path, prompts_file, scripted, body, said):
    server, url = await scripted(reset="vllm", reset_body=body)
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                              warmup=2, prefix_cache="reset")
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 1
    assert server.resets == 1 and server.requests == 0
    message = check_run_dir(out)[3]["failed_configs"]["baseline"]
    assert said in message and "\n" not in message


async def test_an_engine_without_a_reset_endpoint_is_refused_before_any_server(tmp_path, prompts_file, scripted,
                                                                               launchers, capsys):
    server, url = await scripted(reset="vllm")
    (launchers / "reader.yaml").write_text("adapter: vllm\nready: {health: /health, models: /v1/models}\n")
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                              engine="reader", prefix_cache="reset")
    assert await asyncio.to_thread(cli, str(suite), "-o", str(tmp_path / "run")) == 2
    assert server.events == [], "nothing is sent"
    err = flat(capsys.readouterr().err)
    assert (f"load.prefix_cache: reset: config 'baseline''s engine reader has no reset endpoint (its launcher "
            f"{launchers / 'reader.yaml'} has no prefix_cache_reset.path); use keep") in err
