"""The openai SDK client falling behind is flagged beside the cell's numbers, not inferred from token counts
(which agree whatever the lag): per chunk, the SDK's yield time against its transport's read of the chunk's
bytes, p99 over the cell, above ``LAG_LIMIT_MS`` = client-limited (scripted server: tests/support/scripted_server.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import openai
import pytest

from specbench.measure.keepup import LAG_LIMIT_MS, client_lag
from specbench.schemas.request import RequestRecord
from specbench.suite import read_suite
from tests.support import suites
from tests.support.runs import run_suite

MAX_TOKENS = 1 + 7 * 3  # 22 tokens a request
SLOW_S = 0.1  # what the slowed SDK spends on each chunk before handing it on


async def _run(tmp_path: Path, prompts_file: Path, url: str, client: str) -> tuple[dict, str]:
    out = tmp_path / "out"
    configs = [{"name": "spec", "url": url, "method": "ngram", "num_speculative_tokens": 3, "baseline": True}]
    suite = suites.write_suite(tmp_path, configs, name="lag", prompts=prompts_file, requests=4,
                               load={"concurrency": 2, "max_tokens": MAX_TOKENS, "warmup": 1, "client": client})
    await run_suite(read_suite(suite), out)
    return json.loads((out / "results.json").read_text())[0], (out / "results.md").read_text()


def _slow_sdk(monkeypatch) -> None:
    """Every chunk the SDK decodes waits ``SLOW_S`` before the SDK yields it (a consumer that cannot keep up)."""
    chunks = openai.AsyncStream.__aiter__

    async def slow(self):
        async for chunk in chunks(self):
            await asyncio.sleep(SLOW_S)
            yield chunk

    monkeypatch.setattr(openai.AsyncStream, "__aiter__", slow)


async def test_a_slow_sdk_is_flagged_client_limited_while_tokens_agree(tmp_path, prompts_file, scripted, monkeypatch):
    _slow_sdk(monkeypatch)
    _, url = await scripted(pattern=[1, 2, 4], k=3)
    row, md = await _run(tmp_path, prompts_file, url, "openai")
    assert row["client_server_tokens_agree"] is True  # every token arrived: the count alone cannot see the lag
    assert row["client_lag_p99_ms"] >= 1e3 * SLOW_S and row["client_limited"] is True
    assert row["shared_read_chunks"] > 0  # the chunks written while it slept came in one socket read, one stamp
    assert "| SDK lag p99 |" in md
    assert f"| {row['client_lag_p99_ms']:.2f} ⚠ |" in md
    assert "client-limited: the openai SDK yielded chunks" in md


async def test_an_sdk_that_keeps_up_is_not_flagged(tmp_path, prompts_file, scripted):
    """Steps 30 ms apart (a GPU engine's pace): each is read before the next is written, even on a busy machine."""
    _, url = await scripted(pattern=[1, 2, 4], k=3, gap_s=0.03)
    row, md = await _run(tmp_path, prompts_file, url, "openai")
    assert row["client_limited"] is False and 0 <= row["client_lag_p99_ms"] <= LAG_LIMIT_MS
    assert row["shared_read_chunks"] == 0
    assert "| SDK lag p99 |" in md and "⚠" not in md.split("| SDK lag p99 |")[1].split("\n\n")[0]
    assert "client-limited" not in md


async def test_the_socket_client_has_no_sdk_lag(tmp_path, prompts_file, scripted):
    """Its chunk times are its kernel-stamped reads: no key, no column."""
    _, url = await scripted(pattern=[1, 2, 4], k=3)
    row, md = await _run(tmp_path, prompts_file, url, "auto")
    assert "client_lag_p99_ms" not in row and "client_limited" not in row
    assert "SDK lag" not in md


def _record(times: list[float], reads: list[float] | None) -> RequestRecord:
    return RequestRecord("p", "d", "c", chunk_times=times, chunk_tokens=[1] * len(times), chunk_read_times=reads)


@pytest.mark.parametrize("lag_ms,limited", [(LAG_LIMIT_MS / 2, False), (LAG_LIMIT_MS * 2, True)])
def test_the_limit_applies_to_the_p99_over_the_cells_chunks(lag_ms, limited):
    times = [float(i) for i in range(1, 101)]
    late = [t - (lag_ms / 1e3 if i >= 95 else 0.0001) for i, t in enumerate(times)]  # 5 % of chunks late
    out = client_lag([_record(times, late)])
    assert out.client_lag_p99_ms == pytest.approx(lag_ms) and out.client_limited is limited


def test_records_without_read_stamps_or_with_mismatched_ones_give_no_lag():
    assert client_lag([_record([1.0, 2.0], None)]) is None
    assert client_lag([_record([1.0, 2.0], [0.5])]) is None  # a hand-edited requests.jsonl: not paired, left out


def test_chunks_read_together_mark_the_cell_client_limited_whatever_the_lag():
    """Saturated, the SDK reads each socket once per loop turn: many chunks per read, each yielded soon after
    (the wait before the read has no stamp), so the lag stays small while the chunks are seconds late."""
    reads = [float(i - i % 2) for i in range(100)]  # chunks 0 and 1 in one read, 2 and 3 in the next, ...
    together = client_lag([_record([r + 0.0001 * (1 + i % 2) for i, r in enumerate(reads)], reads)])
    assert together.client_lag_p99_ms <= LAG_LIMIT_MS and together.client_limited is True
    apart = client_lag([_record([float(i) + 0.0001 for i in range(100)], [float(i) for i in range(100)])])
    assert apart.client_limited is False
