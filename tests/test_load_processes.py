"""Stopping load generation: records from every worker merge on one clock; a stop reaches every
worker and every arrival, and what it cuts is recorded before drive returns."""

import asyncio
import time

from specbench.client import RequestSpec
from specbench.client import close_transport, open_transport
from specbench.drive import Phase, drive, drive_processes
from specbench.records import Prompt


def prompts(n: int) -> list[Prompt]:
    return [Prompt(id=f"p{i}", dataset="d", turns=(f"hello {i}",)) for i in range(n)]


async def test_two_processes_cover_every_prompt_on_the_parents_clock(scripted):
    server, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.005)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=16)
    t0 = time.perf_counter()
    res = await drive_processes(spec, prompts(12), Phase("c", concurrency=4), 2)
    t1 = time.perf_counter()
    assert sorted(r.prompt_id for r in res.records) == sorted(p.id for p in prompts(12))
    assert all(r.ok and r.concurrency == 4 and r.output_tokens == 16 for r in res.records)
    # CLOCK_MONOTONIC is one clock for all processes: the workers' stamps fall inside the parent's window
    assert all(t0 < r.send_time < r.chunk_times[0] <= r.chunk_times[-1] < t1 for r in res.records)
    assert t0 < res.started < res.ended < t1 and server.requests == 12


async def test_stop_reaches_the_workers_and_keeps_what_was_cut(scripted):
    # each request takes ~2 s (20 chunks, 0.1 s apart); 8 prompts over 4 streams would take ~4 s more
    server, url = await scripted(pattern=[1], ttft_s=0.01, gap_s=0.1)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=20)
    stop = asyncio.Event()

    async def stop_when_busy() -> None:
        while server.requests < 4:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        stop.set()

    asyncio.create_task(stop_when_busy())
    res = await drive_processes(spec, prompts(8), Phase("c", concurrency=4), 2, stop=stop, grace_s=0.2)
    assert server.requests == 4, "no request may start after the stop"
    assert len(res.records) == 4
    assert all(r.error == "cancelled: run stopped before the request finished" for r in res.records)
    assert all(r.chunk_times for r in res.records), "chunks received before the cut are kept"


async def test_open_loop_stop_records_the_request_in_flight_before_returning(scripted):
    """Poisson arrivals at 0.2/s: the stop comes while drive waits for the next arrival."""
    server, url = await scripted(pattern=[1], ttft_s=0.01, gap_s=0.1)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=20)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, stop.set)
    transport = open_transport(url)
    try:
        res = await drive(transport, spec, prompts(3), Phase("c", concurrency=0, request_rate=0.2, seed=1),
                          stop=stop, grace_s=0.2)
        assert res.wall_s < 1.5
        assert [r.error for r in res.records] == ["cancelled: run stopped before the request finished"]
        assert server.requests == 1
    finally:
        await close_transport(transport)
