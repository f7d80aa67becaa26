"""Latency and TTFT from when each open-loop request was due, not when the client sent it.

An open-loop client that falls behind its schedule sends late, and a latency charged from the late send
hides the wait: the server looks fast while users would have queued (coordinated omission). Each
request records both times (``RequestRecord.scheduled_time``, ``send_time``); here a cell gets its
latency and TTFT from the schedule, how late its client sent (p99), and a flag when that is more than
``BEHIND_LIMIT_MS``. The plain latency and TTFT stay as they were: the gap between the two is the
client's, or the in-flight cap's (``load.concurrency`` in open loop), holding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..schemas.request import RequestRecord
from ..schemas.row_latency import BEHIND_LIMIT_MS, FromSchedule
from .latency import stats_ms


def from_schedule(records: Sequence[RequestRecord]) -> FromSchedule | None:
    """Over the cell's measured records that carry a due time; None (no key at all) for a cell without any
    (closed loop, or records from before due times were kept). Latency and TTFT over the successful requests,
    as the plain ones are; lateness (send − due) over every request that was sent."""
    timed = [r for r in records if r.scheduled_time is not None]
    if not timed:
        return None
    ok = [r for r in timed if r.ok]
    latency = stats_ms([v for r in ok if (v := r.latency_from_schedule) is not None])
    ttft = stats_ms([v for r in ok if (v := r.ttft_from_schedule) is not None])
    behind = [v for r in timed if (v := r.behind_schedule) is not None]
    p99 = float(np.percentile(np.asarray(behind, dtype=np.float64), 99)) * 1e3 if behind else None
    return FromSchedule(latency_from_schedule_mean_ms=latency.mean, latency_from_schedule_p95_ms=latency.p95,
                        ttft_from_schedule_mean_ms=ttft.mean, ttft_from_schedule_p95_ms=ttft.p95,
                        client_behind_ms_p99=p99, client_behind_schedule=None if p99 is None else p99 > BEHIND_LIMIT_MS)
