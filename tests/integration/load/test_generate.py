"""Stopping load generation: records from every worker merge on one clock; a stop reaches every
worker and every arrival, and what it cuts is recorded before generate_load returns. The
throughput window is the records' own, first send to last end, for one process and several."""

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from specbench.client import RequestSpec, close_transport, open_transport
from specbench.load.generate import LoadPass, generate_load, generate_load_processes
from specbench.schemas.request import Prompt


def prompts(n: int) -> list[Prompt]:
    return [Prompt(id=f"p{i}", dataset="d", turns=(f"hello {i}",)) for i in range(n)]


async def test_two_processes_cover_every_prompt_on_the_parents_clock(scripted):
    server, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.005)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=16)
    t0 = time.perf_counter()
    res = await generate_load_processes(spec, prompts(12), LoadPass("c", concurrency=4), 2)
    t1 = time.perf_counter()
    assert sorted(r.prompt_id for r in res.records) == sorted(p.id for p in prompts(12))
    assert all(r.ok and r.concurrency == 4 and r.output_tokens == 16 for r in res.records)
    # CLOCK_MONOTONIC is one clock for all processes: the workers' stamps fall inside the parent's window
    assert all(t0 < r.send_time < r.chunk_times[0] <= r.chunk_times[-1] < t1 for r in res.records)
    assert t0 < res.started < res.ended < t1 and server.requests == 12


def assert_window_is_first_send_to_last_end(res) -> None:
    """Exact: not the set-up before the first send (connections, tasks), not the wind-down after the last end."""
    assert res.started == min(r.send_time for r in res.records)
    assert res.ended == max(r.end_time for r in res.records)
    assert res.wall_s == res.ended - res.started
    assert all(r.send_time < r.chunk_times[-1] <= r.end_time for r in res.records)


@pytest.mark.parametrize("client", ["socket", "aiohttp", "openai"])
async def test_one_process_window_is_first_send_to_last_end(scripted, client):
    _, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.005)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=16)
    transport = open_transport(url, client)
    try:  # new connections: the first sends wait for their handshakes, which the window must not hold
        res = await generate_load(transport, spec, prompts(12), LoadPass("c", concurrency=8))
    finally:
        await close_transport(transport)
    assert len(res.records) == 12 and all(r.ok for r in res.records)
    assert_window_is_first_send_to_last_end(res)


async def test_multi_process_window_is_first_send_to_last_end(scripted):
    _, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.005)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=16)
    res = await generate_load_processes(spec, prompts(12), LoadPass("c", concurrency=8), 2)
    assert len(res.records) == 12 and all(r.ok for r in res.records)
    assert_window_is_first_send_to_last_end(res)


async def test_stop_reaches_the_workers_and_keeps_what_was_cut(scripted):
    # each request takes ~2 s (20 chunks, 0.1 s apart); 8 prompts over 4 streams would take ~4 s more
    server, url = await scripted(pattern=[1], ttft_s=0.01, gap_s=0.1)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=20)
    stop = asyncio.Event()

    async def stop_when_busy() -> None:
        # every stream has its first token on the wire (the server wrote it): not a guessed delay
        while server.requests < 4 or not all(server.timelines[n].writes for n in range(1, 5)):
            await asyncio.sleep(0.02)
        stop.set()

    asyncio.create_task(stop_when_busy())
    res = await generate_load_processes(spec, prompts(8), LoadPass("c", concurrency=4), 2, stop=stop, grace_s=0.2)
    assert server.requests == 4, "no request may start after the stop"
    assert len(res.records) == 4
    assert all(r.error == "cancelled: run stopped before the request finished" for r in res.records)
    assert all(r.chunk_times for r in res.records), "chunks received before the cut are kept"


async def test_open_loop_stop_records_the_request_in_flight_before_returning(scripted):
    """Poisson arrivals at 0.2/s: the stop comes while generate_load waits for the next arrival."""
    server, url = await scripted(pattern=[1], ttft_s=0.01, gap_s=0.1)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=20)
    stop = asyncio.Event()

    async def stop_once_the_first_request_is_in_flight() -> None:
        # not a fixed delay: generate_load's start-up gc.collect() alone can take 0.3 s after a long test session
        while server.requests < 1 or not server.timelines[1].writes:
            await asyncio.sleep(0.01)
        stop.set()

    stopper = asyncio.ensure_future(stop_once_the_first_request_is_in_flight())
    transport = open_transport(url)
    try:
        # the next arrival is ~1000 s away (0.001/s): ending within the guard is the stop's doing
        res = await asyncio.wait_for(generate_load(transport, spec, prompts(3),
                                                   LoadPass("c", concurrency=0, request_rate=0.001, seed=1),
                                                   stop=stop, grace_s=0.2), 60)
        assert [r.error for r in res.records] == ["cancelled: run stopped before the request finished"]
        assert server.requests == 1
    finally:
        stopper.cancel()
        await close_transport(transport)


def load_workers() -> list[int]:
    """This process's multiprocessing children that run load (not the resource tracker)."""
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmd and b"resource_tracker" not in cmd:
                pids.append(int(pid))
    return pids


async def test_a_dead_worker_keeps_what_it_sent_and_its_other_prompts_fail(scripted):
    # ~0.5 s per request; each worker gets 4 prompts over 1 stream: ~2 s of work each
    server, url = await scripted(pattern=[1], ttft_s=0.01, gap_s=0.05)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=10)
    seen: list[str] = []

    async def kill_one_after_its_first_record() -> None:
        while len(seen) < 2:
            await asyncio.sleep(0.02)
        os.kill(sorted(load_workers())[0], signal.SIGKILL)

    killer = asyncio.create_task(kill_one_after_its_first_record())
    res = await generate_load_processes(spec, prompts(8), LoadPass("c", concurrency=2), 2,
                                on_record=lambda r: seen.append(r.prompt_id))
    await killer
    assert sorted(r.prompt_id for r in res.records) == sorted(p.id for p in prompts(8)), "every prompt has a record"
    ok = [r for r in res.records if r.ok]
    died = [r for r in res.records if r.error and r.error.startswith("load-generator process died (exit code -9)")]
    assert len(ok) >= 4 and died and len(ok) + len(died) == 8  # the surviving worker finished all of its 4
    assert len(seen) == 8, "records reach on_record as they end, dead worker's included"
