"""The open-loop columns of the *Checks* table (``specbench.measure.arrivals``): latency and TTFT from when each
request was due, and how far behind its schedule the client sent, shown only where some cell kept due times;
the warning under the tables for a cell whose client fell behind is ``notes.schedule_warnings``."""

from __future__ import annotations

from ..schemas.row import ResultRow
from ..schemas.row_latency import BEHIND_LIMIT_MS
from .colspec import CHECKS, Column, measured, num


def _pair(mean: float | None, p95: float | None) -> str:
    return f"{num(mean, 2)}/{num(p95, 2)}"


def _behind(r: ResultRow) -> str:
    text = num(r.client_behind_ms_p99, 2)
    return text + " ⚠" if r.client_behind_schedule else text


ARRIVAL_COLUMNS: list[Column] = [
    Column("Latency from schedule mean/p95", lambda r: _pair(r.latency_from_schedule_mean_ms, r.latency_from_schedule_p95_ms),
           ("latency_from_schedule_mean_ms", "latency_from_schedule_p95_ms"), CHECKS,
           note="above Latency by the time the client (or load.concurrency's in-flight cap) held the request "
                "(docs/measurement.md)", shown=measured(lambda r: r.latency_from_schedule_mean_ms)),
    Column("TTFT from schedule mean/p95", lambda r: _pair(r.ttft_from_schedule_mean_ms, r.ttft_from_schedule_p95_ms),
           ("ttft_from_schedule_mean_ms", "ttft_from_schedule_p95_ms"), CHECKS,
           shown=measured(lambda r: r.ttft_from_schedule_mean_ms)),
    Column("Behind schedule p99", _behind, ("client_behind_ms_p99", "client_behind_schedule"), CHECKS,
           note=f"⚠ = above {BEHIND_LIMIT_MS:g} ms: the client fell behind its schedule (a busy event loop, or the "
                "in-flight cap full), so the server saw fewer, later arrivals than the schedule asked for",
           shown=measured(lambda r: r.client_behind_ms_p99)),
]
