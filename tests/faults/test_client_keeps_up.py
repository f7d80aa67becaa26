"""The client keeps up, shown: per measured phase, the tokens it counted against the server's own
generation counter over the same /metrics window, flagged past 1 %; a missing counter is null, never
0, and an untrustworthy one is null with its reason (scripted servers: tests/support/scripted_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.client.metrics import parse_metrics
from specbench.launch import read_engine
from specbench.measure.keepup import GenerationWindow, generation_window, token_agreement
from specbench.suite import read_suite
from tests.support import paths, suites
from tests.support.runs import run_suite

DATA = paths.DATA / "metrics"
MAX_TOKENS = 1 + 7 * 3  # 22 tokens a request


async def _run(tmp_path: Path, prompts_file: Path, url: str, engine: str | None = None, **load) -> tuple[dict, str]:
    out = tmp_path / "out"
    configs = [{"name": "spec", "url": url, "method": "ngram", "num_speculative_tokens": 3, "baseline": True}]
    suite = suites.write_suite(tmp_path, configs, name="keepup", prompts=prompts_file, requests=6, engine=engine,
                               load={"concurrency": 2, "max_tokens": MAX_TOKENS, "warmup": 2, **load})
    await run_suite(read_suite(suite), out)
    return json.loads((out / "results.json").read_text())[0], (out / "results.md").read_text()


@pytest.mark.parametrize("fmt,engine", [("vllm", None), ("sglang", "sglang")])
async def test_client_count_equals_the_servers_generation_counter(tmp_path, prompts_file, scripted, fmt, engine):
    """Warm-up requests run before the window opens: only the 6 timed requests of 22 tokens are in it."""
    _, url = await scripted(pattern=[1, 2, 4], k=3, metrics_format=fmt)
    row, md = await _run(tmp_path, prompts_file, url, engine=engine, repeats=2)
    assert row["server_generation_tokens"] == 2 * 6 * MAX_TOKENS
    assert row["client_server_token_ratio"] == 1.0 and row["client_server_tokens_agree"] is True
    assert row["client_server_token_error"] is None
    assert "| Client/server tok |" in md and "| 100.00% |" in md and "generation counter added" not in md


async def test_tokens_the_client_never_saw_are_flagged(tmp_path, prompts_file, scripted):
    """The server's counter runs 2 tokens a request ahead of the stream (other traffic, or a client that lost
    tokens): 132 counted of 144, 8.3 % short, beside the numbers and under the table."""
    _, url = await scripted(pattern=[1, 2, 4], k=3, phantom_tokens=2)
    row, md = await _run(tmp_path, prompts_file, url)
    assert row["server_generation_tokens"] == 6 * (MAX_TOKENS + 2)
    assert row["client_server_token_ratio"] == pytest.approx(MAX_TOKENS / (MAX_TOKENS + 2))
    assert row["client_server_tokens_agree"] is False
    assert "| 91.67% ⚠ |" in md
    assert "⚠ spec / prompts / C=2: the client counted 91.7% of the 144 tokens the server's generation counter added" in md


async def test_no_counter_is_null_not_zero(tmp_path, prompts_file, scripted):
    _, url = await scripted(pattern=[1, 2, 4], k=3, metrics_format="none")
    row, md = await _run(tmp_path, prompts_file, url)
    assert row["server_generation_tokens"] is None and row["client_server_token_ratio"] is None
    assert row["client_server_tokens_agree"] is None
    assert row["client_server_token_error"] == "/metrics has no vllm:generation_tokens_total"
    assert "Client/server tok" not in md


async def test_nan_counter_is_null_with_its_reason(tmp_path, prompts_file, scripted):
    _, url = await scripted(pattern=[1, 2, 4], k=3, counters={"generation_tokens": "NaN"})
    row, _ = await _run(tmp_path, prompts_file, url)
    assert row["server_generation_tokens"] is None and row["client_server_tokens_agree"] is None
    assert "vllm:generation_tokens_total is NaN" in row["client_server_token_error"]
    assert row["mean_acceptance_length"] == pytest.approx(21 / 9)  # the acceptance counters are untouched


def test_counter_that_went_backwards_is_null_with_its_reason():
    after, before = (parse_metrics((DATA / f"vllm_{w}.txt").read_text()) for w in ("before", "after"))  # swapped
    window = generation_window(before, after, read_engine("vllm").generation_counter)
    assert window.server_generation_tokens is None and "went down during the phase (550 → 52)" in window.error
    assert token_agreement([window.to_dict()], [498]).client_server_token_error == window.error


def test_counter_summed_over_engines_and_pooled_over_repeats_flags_the_repeat_that_is_off():
    before, after = (parse_metrics((DATA / f"vllm_{w}.txt").read_text()) for w in ("before", "after"))
    window = generation_window(before, after, read_engine("vllm").generation_counter)
    assert window == GenerationWindow(server_generation_tokens=498, error=None)  # (420 + 130) − (40 + 12), both engines
    assert token_agreement([window.to_dict()] * 2, [498, 498]).client_server_tokens_agree is True
    off = token_agreement([window.to_dict()] * 2, [498, 492])  # 1.2 % short in the second repeat
    assert off.client_server_tokens_agree is False and off.client_server_token_ratio == pytest.approx(990 / 996)
    assert token_agreement([window.to_dict()], [494]).client_server_tokens_agree is True  # 0.8 %: within 1 %
    assert token_agreement([{}], [498]) is None  # a phase recorded before specbench read the counter


@pytest.mark.parametrize("stored,why", [({"server_generation_tokens": "12"}, "'12' is not a token count"),
                                        ({"server_generation_tokens": -3}, "-3 is not a token count"),
                                        ("oops", "generation = 'oops' is not an object")])
def test_a_hand_edited_window_read_back_is_null_with_its_reason(stored, why):
    out = token_agreement([stored], [10])
    assert out.client_server_token_ratio is None and out.client_server_tokens_agree is None
    assert why in out.client_server_token_error
