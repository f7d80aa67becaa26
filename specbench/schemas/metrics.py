"""A /metrics page as plain numbers: what the client scrapes and the measure stage reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricsSnapshot:
    """Sample values summed over label sets, keyed by sample name; ``by_label`` keeps one label split."""

    totals: dict[str, float] = field(default_factory=dict)
    by_label: dict[str, dict[str, float]] = field(default_factory=dict)
    ok: bool = True
    error: str | None = None
    invalid: dict[str, str] = field(default_factory=dict)  # sample name → why it cannot be used

    def get(self, name: str) -> float | None:
        return self.totals.get(name)
