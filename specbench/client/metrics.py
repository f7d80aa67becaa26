"""Read a server's Prometheus ``/metrics`` into plain numbers (I/O edge + a pure parser).

Values are checked here, where they enter: a sample that is NaN or infinite, a negative
counter, or a series given twice, is left out of the sums and named in ``MetricsSnapshot.invalid``, so acceptance built on
it is null with that reason instead of a wrong number.
"""

from __future__ import annotations

import math
from collections import defaultdict

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from ..schemas.metrics import MetricsSnapshot
from ..util.bounded import METRICS_LIMIT, read_capped


def parse_metrics(text: str, split_label: str = "position") -> MetricsSnapshot:
    """Sum every sample over its label sets; samples carrying ``split_label`` are also kept per value.

    Summing matters because vLLM exports one series per engine (data-parallel rank).
    """
    totals: dict[str, float] = defaultdict(float)
    by_label: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    invalid: dict[str, str] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            series = (sample.name, tuple(sorted(sample.labels.items())))
            if series in seen:  # one series exported twice would be summed as two engines
                invalid.setdefault(sample.name, f"duplicate series {dict(series[1])}")
                continue
            seen.add(series)
            value = sample.value
            if not math.isfinite(value) or (family.type == "counter" and value < 0):
                invalid.setdefault(sample.name, _why_invalid(value))
                continue
            totals[sample.name] += value
            if split_label in sample.labels:
                by_label[sample.name][sample.labels[split_label]] += value
    for name in invalid:
        totals.pop(name, None)
        by_label.pop(name, None)
    return MetricsSnapshot(totals=dict(totals), by_label={k: dict(v) for k, v in by_label.items()}, invalid=invalid)


def _why_invalid(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return f"infinite ({'+' if value > 0 else '-'}Inf)"
    return f"negative ({value:g})"


async def scrape(session: aiohttp.ClientSession, base_url: str, timeout_s: float = 10.0) -> MetricsSnapshot:
    """GET ``/metrics``; a failure is recorded, never raised, so a run keeps what it measured."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return MetricsSnapshot(ok=False, error=f"GET {url}: HTTP {resp.status}")
            body = await read_capped(resp, METRICS_LIMIT)
    except (aiohttp.ClientError, TimeoutError, ValueError) as err:
        return MetricsSnapshot(ok=False, error=f"GET {url}: {type(err).__name__}: {err}")
    try:
        return parse_metrics(body.decode("utf-8", errors="replace"))
    except ValueError as err:  # the parser's only complaint about malformed text
        return MetricsSnapshot(ok=False, error=f"GET {url}: not Prometheus text ({str(err)[:100]})")
