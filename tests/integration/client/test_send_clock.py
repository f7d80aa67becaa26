"""TTFT and latency start when the request goes to the wire, on every client: checked against a scripted
server that records its own receive time of each request and the write time of each chunk
(``ScriptedServer.timelines``, same ``perf_counter`` clock, in process). Ordering relations only: a stamp
precedes the server's receipt, follows the SDK's request building, and each chunk's read follows its
write (speed is measured in benchmarks/client_overhead.py, never asserted)."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import pytest

from specbench.client import RequestSpec, close_transport, open_transport
from specbench.load.generate import LoadPass, generate_load
from specbench.schemas.request import Prompt, RequestRecord
from tests.support.scripted_server import ScriptedServer, Timeline

MAX_TOKENS = 8


def _prompts(n: int) -> list[Prompt]:
    return [Prompt(id=f"p{i}", dataset="d", turns=(f"question number {i}",)) for i in range(n)]


async def _load(url: str, kind: str, concurrency: int) -> list[RequestRecord]:
    transport = open_transport(url, kind)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=MAX_TOKENS, ignore_eos=True)
    try:
        result = await generate_load(transport, spec, _prompts(2 * concurrency), LoadPass(config="c", concurrency=concurrency))
    finally:
        await close_transport(transport)
    assert all(r.ok for r in result.records), [r.error for r in result.records]
    return result.records


def _seen(server: ScriptedServer, rec: RequestRecord) -> Timeline:
    """The server's timeline of the request that carried this record's prompt."""
    [timeline] = [t for t in server.timelines.values() if f"question number {rec.prompt_id[1:]}\"" in t.prompt]
    return timeline


@pytest.mark.parametrize("concurrency", [1, 8])
@pytest.mark.parametrize("kind", ["socket", "openai"])
async def test_every_send_stamp_precedes_the_servers_receipt(scripted, kind, concurrency):
    server, url = await scripted(pattern=[1, 2], ttft_s=0.002, gap_s=0.001)
    for rec in await _load(url, kind, concurrency):
        seen = _seen(server, rec)
        assert rec.send_time <= seen.received <= rec.chunk_times[0], (kind, rec.prompt_id)
        assert len(seen.writes) == len(rec.chunk_times)


@pytest.mark.parametrize("concurrency", [1, 8])
async def test_the_sdk_send_stamp_is_taken_after_the_sdk_built_the_request(scripted, monkeypatch, concurrency):
    """A deliberately slow request-building hook (the SDK's own ``_prepare_request``, after the body is
    built): the send stamp comes after it, so the SDK's building is not in TTFT; before, it was in front."""
    built: dict[str, float] = {}
    prepare = openai.AsyncOpenAI._prepare_request

    async def slow_prepare(self, request):
        await prepare(self, request)
        await asyncio.sleep(0.02)
        built[json.loads(request.content)["messages"][0]["content"]] = time.perf_counter()

    monkeypatch.setattr(openai.AsyncOpenAI, "_prepare_request", slow_prepare)
    server, url = await scripted(pattern=[1, 2], ttft_s=0.002, gap_s=0.001)
    records = await _load(url, "openai", concurrency)
    assert len(built) == len(records) == 2 * concurrency
    for rec in records:
        assert built[f"question number {rec.prompt_id[1:]}"] <= rec.send_time <= _seen(server, rec).received


@pytest.mark.parametrize("concurrency", [1, 8])
async def test_each_sdk_chunk_is_read_after_the_server_wrote_it_and_yielded_after_it_was_read(scripted, concurrency):
    """The SDK transport's read stamps sit between the server's write and the SDK's yield, chunk by chunk;
    the socket client has none (its chunk times are its reads)."""
    server, url = await scripted(pattern=[1, 2], ttft_s=0.002, gap_s=0.001)
    for rec in await _load(url, "openai", concurrency):
        writes = _seen(server, rec).writes
        assert rec.chunk_read_times is not None and len(rec.chunk_read_times) == len(rec.chunk_times) == len(writes)
        for wrote, read, yielded in zip(writes, rec.chunk_read_times, rec.chunk_times):
            assert wrote <= read <= yielded
    assert all(r.chunk_read_times is None for r in await _load(url, "socket", concurrency))
