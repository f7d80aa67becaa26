"""The open-loop columns of the *Checks* table (``specbench.measure.arrivals``): latency and TTFT from when each
request was due, and how far behind its schedule the client sent, shown only where some cell kept due times;
and the warning under the tables for a cell whose client fell behind."""

from __future__ import annotations

from ..measure.arrivals import BEHIND_LIMIT_MS
from ..schemas.cell import Cell
from ..schemas.row import ResultRow
from .colspec import CHECKS, Column, measured, num


def _pair(mean: float | None, p95: float | None) -> str:
    return f"{num(mean, 2)}/{num(p95, 2)}"


def _behind(r: ResultRow) -> str:
    text = num(r.client_behind_ms_p99, 2)
    return text + " ⚠" if r.client_behind_schedule else text


ARRIVAL_COLUMNS: list[Column] = [
    Column("Latency from schedule mean/p95", lambda r: _pair(r.latency_from_schedule_mean_ms, r.latency_from_schedule_p95_ms),
           "open loop: last content chunk − when the request was due (its scheduled arrival), not when it was sent; "
           "above Latency by the time the client (or load.concurrency's in-flight cap) held the request — the "
           "queueing a late client would otherwise hide (coordinated omission, docs/measurement.md)", CHECKS, "ms",
           ("latency_from_schedule_mean_ms", "latency_from_schedule_p95_ms"),
           measured(lambda r: r.latency_from_schedule_mean_ms)),
    Column("TTFT from schedule mean/p95", lambda r: _pair(r.ttft_from_schedule_mean_ms, r.ttft_from_schedule_p95_ms),
           "open loop: first content chunk − when the request was due", CHECKS, "ms",
           ("ttft_from_schedule_mean_ms", "ttft_from_schedule_p95_ms"), measured(lambda r: r.ttft_from_schedule_mean_ms)),
    Column("Behind schedule p99", _behind,
           "open loop: how long after it was due the client sent each request (send − due), p99 over the cell's "
           f"requests; ⚠ = above {BEHIND_LIMIT_MS:g} ms: the client fell behind its schedule (a busy event loop, or "
           "the in-flight cap full), so the server saw fewer, later arrivals than the schedule asked for",
           CHECKS, "ms", ("client_behind_ms_p99", "client_behind_schedule"), measured(lambda r: r.client_behind_ms_p99)),
]


def schedule_warnings(r: ResultRow) -> list[str]:
    """The line under the tables for a cell whose client fell behind its schedule."""
    if not r.client_behind_schedule:
        return []
    return [f"⚠ {Cell.of_row(r)}: the client fell behind its arrival schedule: it sent requests "
            f"{num(r.client_behind_ms_p99, 1)} ms (p99) after they were due (limit {BEHIND_LIMIT_MS:g} ms; its event loop "
            "or load.concurrency's in-flight cap held them): Latency and TTFT from schedule "
            f"({num(r.latency_from_schedule_mean_ms, 2)} / {num(r.ttft_from_schedule_mean_ms, 2)} ms mean) include that "
            "wait, the plain ones do not"]
