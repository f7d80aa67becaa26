"""What every plot shares: the not-measured mark, a row's interval, why a value is missing, the load colours."""

from __future__ import annotations

from typing import Any

from ...schemas.cell import LoadPoint
from ...schemas.row import ResultRow
from ...util.numbers import is_number
from ..model import PALETTE, Model
from ..svg import (
    NOT_MEASURED,
    esc,
)


def nm_html(detail: str = "") -> str:
    return f'<span class="na">{NOT_MEASURED}{" (" + esc(detail) + ")" if detail else ""}</span>'


def ci_of(r: ResultRow, key: str) -> tuple[float, float] | None:
    ci = (r.ci95 or {}).get(key)
    if ci and len(ci) == 2 and None not in ci:
        return float(ci[0]), float(ci[1])
    if key == "paired_speedup" and r.paired_speedup_ci_low is not None and r.paired_speedup_ci_high is not None:
        return float(r.paired_speedup_ci_low), float(r.paired_speedup_ci_high)
    return None


def why_missing(r: ResultRow | None, what: str = "") -> str:
    if r is None:
        return "no such cell"
    if r.status == "failed":
        return "cell failed"
    if r.status == "interrupted":
        return "interrupted"
    return what


LOAD_COLOURS = PALETTE + ["#000000", "#999999"]


def num_or_none(v: Any) -> float | None:
    return float(v) if is_number(v) else None


def panel_loads(m: Model, dataset: str) -> list[LoadPoint]:
    loads = [ld for ld in m.loads_of(dataset) if ld.value is not None]
    kinds = {ld.kind for ld in loads}
    kind = "concurrency" if "concurrency" in kinds else "rate"
    return [ld for ld in loads if ld.kind == kind]
