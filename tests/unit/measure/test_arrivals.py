"""Latency and TTFT from when each open-loop request was due: a late send counts as waiting, and a cell whose
client sent more than BEHIND_LIMIT_MS late (p99) is flagged; a cell without due times gets no key at all."""

import pytest

from specbench.measure.arrivals import BEHIND_LIMIT_MS, from_schedule
from specbench.schemas.request import RequestRecord


def rec(due: float | None, sent: float, first: float, last: float, error: str | None = None) -> RequestRecord:
    return RequestRecord(prompt_id="p", dataset="d", config="c", send_time=sent, scheduled_time=due,
                         chunk_times=[first, last], chunk_tokens=[1, 1], output_tokens=2, error=error)


def test_closed_loop_cells_have_no_schedule_keys():
    assert from_schedule([rec(None, 1.0, 1.1, 1.2)]) is None and from_schedule([]) is None


def test_from_schedule_adds_each_requests_lateness_to_its_latency_and_ttft():
    records = [rec(10.0, 10.0, 10.1, 10.5), rec(11.0, 11.2, 11.3, 11.7), rec(12.0, 12.4, 12.5, 12.9)]
    got = from_schedule(records)
    assert got is not None
    assert [r.behind_schedule for r in records] == pytest.approx([0.0, 0.2, 0.4])
    assert [r.latency_from_schedule - r.latency for r in records] == pytest.approx([0.0, 0.2, 0.4])
    assert got.latency_from_schedule_mean_ms == pytest.approx(1000 * (0.5 + 0.7 + 0.9) / 3)
    assert got.ttft_from_schedule_mean_ms == pytest.approx(1000 * (0.1 + 0.3 + 0.5) / 3)
    assert got.ttft_from_schedule_p95_ms == pytest.approx(1000 * (0.3 + 0.9 * (0.5 - 0.3)))  # numpy: 95 % of 2 steps
    assert got.client_behind_ms_p99 == pytest.approx(1000 * (0.2 + 0.98 * 0.2)) and got.client_behind_schedule is True


def test_on_time_is_not_flagged_and_failed_requests_count_for_lateness_only():
    records = [rec(1.0, 1.001, 1.1, 1.2), rec(2.0, 2.0, 2.1, 2.2), rec(3.0, 3.0 + BEHIND_LIMIT_MS / 1e3 * 3, 3.1, 3.2, "boom")]
    got = from_schedule(records[:2])
    assert got is not None and got.client_behind_schedule is False and got.client_behind_ms_p99 == pytest.approx(0.99)
    with_failed = from_schedule(records)
    assert with_failed is not None and with_failed.client_behind_schedule is True  # the failed one was sent late too
    assert with_failed.latency_from_schedule_mean_ms == got.latency_from_schedule_mean_ms  # latency: successful only
