"""Open-loop arrivals against a scripted server that records when each request reached it: for every mode the
client keeps to the schedule computed up front (never early, not a closed loop in disguise), each record
keeps its due time, and a client held back — its event loop blocked, or requests waiting for the in-flight
cap — shows its wait in Latency/TTFT from schedule and is flagged. Ordering and lower bounds only; the one
upper bound is far from what it guards against (speed is measured in benchmarks, never asserted)."""

from __future__ import annotations

import time

import pytest

from specbench.client import RequestSpec, close_transport, open_transport
from specbench.load.generate import LoadPass, generate_load
from specbench.load.schedule import schedule
from specbench.load.trace import trace_prompts
from specbench.measure.arrivals import from_schedule
from specbench.measure.latency import latency_stats
from specbench.report.notes import schedule_warnings
from specbench.schemas.request import Prompt, RequestRecord, TraceLine
from specbench.schemas.row import ResultRow
from specbench.suite.arrival import Arrival

N = 8


def material(n: int = N) -> list[Prompt]:
    return [Prompt(id=f"p{i}", dataset="d", turns=(f"question number {i}",)) for i in range(n)]


TRACE = [TraceLine(at_s=t, output_length=2 + i, input_length=4, line=i + 1)
         for i, t in enumerate([0.0, 0.05, 0.05, 0.2, 0.3, 0.31, 0.5, 0.6])]
MODES = {
    "poisson": (Arrival(), 20.0, material()),
    "gamma": (Arrival("gamma", burstiness=0.3), 20.0, material()),
    "ramp": (Arrival("ramp", shape="linear", start=5.0, end=40.0), 40.0, material()),
    "ramp_in_time": (Arrival("ramp", shape="exponential", start=5.0, end=40.0, duration_s=0.3), 40.0, material()),
    "trace": (Arrival("trace"), 1.0, trace_prompts(TRACE, material())),
}


async def run(url: str, prompts: list[Prompt], phase: LoadPass, on_record=None) -> list[RequestRecord]:
    transport = open_transport(url)
    try:
        res = await generate_load(transport, RequestSpec(base_url=url, model="smol", max_tokens=4, ignore_eos=True),
                                  prompts, phase, on_record=on_record)
    finally:
        await close_transport(transport)
    assert len(res.records) == len(prompts) and all(r.ok for r in res.records), [r.error for r in res.records]
    return res.records


def received(server, records: list[RequestRecord], prompts: list[Prompt]) -> dict[str, float]:
    """Each record's request as the server stamped its arrival (same perf_counter clock, in process)."""
    by_text = {body["messages"][-1]["content"]: server.timelines[i + 1].received for i, body in enumerate(server.bodies)}
    text = {p.id: p.turns[0] for p in prompts}
    return {r.prompt_id: by_text[text[r.prompt_id]] for r in records}


@pytest.mark.parametrize("mode", MODES)
async def test_the_client_keeps_to_the_schedule_computed_up_front(scripted, mode):
    arrival, rate, prompts = MODES[mode]
    # each request takes ≥ 0.3 s: a client sending them one after another would be ≥ 2 s behind by the last
    server, url = await scripted(pattern=[1], ttft_s=0.3, gap_s=0.005)
    records = await run(url, prompts, LoadPass("c", concurrency=0, request_rate=rate, seed=4, arrival=arrival))
    offsets = dict(zip((p.id for p in prompts), schedule(arrival, rate, prompts, seed=4)))
    start = min(r.scheduled_time for r in records)
    seen = received(server, records, prompts)
    for r in records:
        assert r.scheduled_time - start == pytest.approx(offsets[r.prompt_id], abs=1e-9), "due as scheduled"
        assert r.scheduled_time <= r.send_time <= seen[r.prompt_id], "never sent early; stamped before the server saw it"
        assert r.behind_schedule < 1.0, "open loop: not held until the requests before it ended (≥ 2 s)"
        assert r.latency_from_schedule - r.latency == pytest.approx(r.behind_schedule, abs=1e-9)
    group = from_schedule(records)
    assert group is not None and group.latency_from_schedule_mean_ms >= latency_stats(records).latency_mean_ms
    assert group.ttft_from_schedule_mean_ms >= latency_stats(records).ttft_mean_ms


async def test_a_trace_sends_each_lines_output_length_and_records_the_line(scripted):
    server, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.002)
    prompts = trace_prompts(TRACE, material())
    records = await run(url, prompts, LoadPass("c", concurrency=0, request_rate=1.0, arrival=Arrival("trace")))
    asked = {body["messages"][-1]["content"]: body["max_tokens"] for body in server.bodies}
    for r, p in ((r, next(p for p in prompts if p.id == r.prompt_id)) for r in records):
        line = p.trace
        assert asked[p.turns[0]] == line.output_length == r.output_tokens == r.trace_output_length  # ignore_eos
        assert (r.trace_line, r.trace_input_length, r.trace_session) == (line.line, 4, None)
        assert p.turns[0] == f"question number {line.line - 1}"  # 4 tokens → 3 words of its data set prompt
    line_of = {r.prompt_id: r for r in records}
    assert line_of["line2"].scheduled_time - line_of["line1"].scheduled_time == pytest.approx(0.05, abs=1e-9)


async def test_a_blocked_client_shows_its_wait_from_the_schedule_and_is_flagged(scripted):
    """The first answer's on_record blocks the event loop until 1.5 s after the pass began; the other lines are due
    at 1.0 s, so each is sent ≥ 0.5 s late — later still on a slower machine, never earlier."""
    server, url = await scripted(pattern=[1], ttft_s=0.001, gap_s=0.001)
    lines = [TraceLine(at_s=0.0 if i == 0 else 1.0, output_length=1, input_length=4, line=i + 1) for i in range(5)]
    prompts = trace_prompts(lines, material(5))
    blocked: list[float] = []

    def slow(rec: RequestRecord) -> None:
        if not blocked:
            blocked.append(rec.scheduled_time)
            time.sleep(max(0.0, rec.scheduled_time + 1.5 - time.perf_counter()))

    records = await run(url, prompts, LoadPass("c", concurrency=0, request_rate=1.0, arrival=Arrival("trace")), slow)
    start = blocked[0]
    late = [r for r in records if r.prompt_id != "line1"]
    assert len(late) == 4 and all(r.send_time >= start + 1.5 and r.behind_schedule >= 0.5 for r in late)
    group = from_schedule(records)
    plain = latency_stats(records)
    assert group is not None and group.client_behind_schedule is True and group.client_behind_ms_p99 >= 500
    assert group.latency_from_schedule_mean_ms - plain.latency_mean_ms >= 0.5 * 1000 * 4 / 5
    assert group.ttft_from_schedule_mean_ms - plain.ttft_mean_ms >= 0.5 * 1000 * 4 / 5
    row = ResultRow.start("d", "c")
    row.request_rate = 1.0
    row.add(group)
    [warning] = schedule_warnings(row)
    assert warning.startswith("⚠ c / d / 1 req/s: the client fell behind its arrival schedule")


async def test_requests_held_by_the_in_flight_cap_count_their_wait(scripted):
    """load.concurrency 1 in open loop: six requests due within milliseconds, each served in ≥ 0.05 s, so the k-th
    waits ≥ 0.05·(k−1) s for the cap — a wait the plain latency leaves out and the schedule's keeps."""
    server, url = await scripted(pattern=[1], ttft_s=0.05, gap_s=0.001)
    records = await run(url, material(6), LoadPass("c", concurrency=1, request_rate=1000.0, seed=1))
    by_due = sorted(records, key=lambda r: r.scheduled_time)  # the cap's waiters are served in the order they came
    assert all(r.send_time >= by_due[0].scheduled_time + 0.05 * k for k, r in enumerate(by_due))
    group = from_schedule(records)
    assert group is not None and group.client_behind_schedule is True
    assert group.latency_from_schedule_mean_ms > latency_stats(records).latency_mean_ms + 100
