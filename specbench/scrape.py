"""Read a server's Prometheus ``/metrics`` into plain numbers (I/O edge + a pure parser)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class MetricsSnapshot:
    """Sample values summed over label sets, keyed by sample name; ``by_label`` keeps one label split."""

    totals: dict[str, float] = field(default_factory=dict)
    by_label: dict[str, dict[str, float]] = field(default_factory=dict)
    ok: bool = True
    error: str | None = None

    def get(self, name: str) -> float | None:
        return self.totals.get(name)


def parse_metrics(text: str, split_label: str = "position") -> MetricsSnapshot:
    """Sum every sample over its label sets; samples carrying ``split_label`` are also kept per value.

    Summing matters because vLLM exports one series per engine (data-parallel rank).
    """
    totals: dict[str, float] = defaultdict(float)
    by_label: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            totals[sample.name] += sample.value
            if split_label in sample.labels:
                by_label[sample.name][sample.labels[split_label]] += sample.value
    return MetricsSnapshot(totals=dict(totals), by_label={k: dict(v) for k, v in by_label.items()})


async def scrape(session: aiohttp.ClientSession, base_url: str, timeout_s: float = 10.0) -> MetricsSnapshot:
    """GET ``/metrics``; a failure is recorded, never raised, so a run keeps what it measured."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return MetricsSnapshot(ok=False, error=f"GET {url}: HTTP {resp.status}")
            return parse_metrics(await resp.text())
    except (aiohttp.ClientError, TimeoutError, ValueError) as err:
        return MetricsSnapshot(ok=False, error=f"GET {url}: {type(err).__name__}: {err}")
