"""The comparison table's columns, shared by the markdown and HTML renderings.

This module alone decides which columns a set of records gets, in what order, and each cell's text;
``render.markdown`` and ``html.table_html`` only lay the cells out. A column beyond ``COLUMNS`` appears
only when some record measured it, so a results file from elsewhere prints the reference table.
Missing values are ``—`` (``-`` inside the per-position cell), never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .load import is_number
from .quality_columns import quality_columns

DASH = "—"

Record = dict[str, Any]
Column = tuple[str, Callable[[Record], str]]


def num(value: Any, digits: int, suffix: str = "", missing: str = DASH) -> str:
    if not is_number(value):
        return missing
    return f"{value:.{digits}f}{suffix}"


def _pair(r: Record, prefix: str) -> str:
    return f"{num(r.get(f'{prefix}_mean_ms'), 2)}/{num(r.get(f'{prefix}_p95_ms'), 2)}"


def _pct(value: Any, missing: str = DASH) -> str:
    return f"{value * 100:.2f}%" if is_number(value) else missing


def _positions(r: Record) -> str:
    return "/".join(_pct(r.get(f"acceptance_pos_{i}"), missing="-") for i in (1, 2, 3))


#: (header, cell) pairs of the comparison table, in order
COLUMNS: list[Column] = [
    ("Dataset", lambda r: str(r["dataset"])),
    ("Run", lambda r: str(r["run"])),
    ("Req", lambda r: str(r.get("requests", DASH))),
    ("Output tok/s", lambda r: num(r.get("output_throughput_tps"), 2)),
    ("Speedup", lambda r: num(r.get("speedup_vs_baseline"), 3, "x")),
    ("Latency mean/p95 ms", lambda r: _pair(r, "latency")),
    ("TTFT mean/p95 ms", lambda r: _pair(r, "ttft")),
    ("ITL mean/p95 ms", lambda r: _pair(r, "itl")),
    ("TPOT mean/p95 ms", lambda r: _pair(r, "tpot")),
    ("Accept rate", lambda r: _pct(r.get("acceptance_rate"))),
    ("Accept p1/p2/p3", _positions),
    ("Accept len", lambda r: num(r.get("mean_acceptance_length"), 3)),
]


def _decomposed(r: Record) -> str:
    value = num(r.get("speedup_decomposed"), 3, "x")
    lo, hi = r.get("speedup_decomposed_ci_low"), r.get("speedup_decomposed_ci_high")
    return value if value == DASH or lo is None or hi is None else f"{value} [{lo:.3f}–{hi:.3f}]"


#: shown when some row has a measured step cost ratio (Speedup = Tok/step ÷ Step cost × Residual)
DECOMPOSITION_COLUMNS: list[Column] = [
    ("Tok/step", lambda r: num(r.get("stream_mean_acceptance_length"), 3)),
    ("Step cost", lambda r: num(r.get("step_cost_ratio"), 3, "x")),
    ("Decomposed speedup", _decomposed),
    ("Residual", lambda r: num(r.get("speedup_residual"), 3)),
]


def has_decomposition(records: Sequence[Record]) -> bool:
    return any(r.get("step_cost_ratio") is not None for r in records)


def _ci(r: Record) -> str:
    ci = (r.get("ci95") or {}).get("speedup_vs_baseline")
    return f"{ci[0]:.3f}–{ci[1]:.3f}" if ci and None not in ci else DASH


def _failed(r: Record) -> str:
    if r.get("status") in ("failed", "interrupted"):
        return f"cell {r['status']}"
    return str(r.get("failed_requests") or 0)


def _rate(r: Record) -> str:
    return DASH if r.get("request_rate") is None else f"{r['request_rate']:g}"


def table_columns(records: Sequence[Record]) -> list[Column]:
    """``COLUMNS`` plus what these records measured: the swept load (Rate/s, Conc), the speed-up CI,
    output fidelity, the decomposition, quality and cost, and last, where a reader looks, Failed."""
    columns = list(COLUMNS)
    if len({r.get("concurrency") for r in records}) > 1:
        columns.insert(2, ("Conc", lambda r: DASH if r.get("concurrency") is None else str(r["concurrency"])))
    if len({r.get("request_rate") for r in records}) > 1:
        columns.insert(2, ("Rate/s", _rate))
    if any((r.get("ci95") or {}).get("speedup_vs_baseline") for r in records):
        columns.insert([h for h, _ in columns].index("Speedup") + 1, ("Speedup 95% CI", _ci))
    if any(r.get("fidelity_identical") is not None for r in records):
        columns.append(("Same output", lambda r: _pct(r.get("fidelity_identical"))))
    if has_decomposition(records):
        at = [h for h, _ in columns].index("Accept len") + 1
        columns[at:at] = DECOMPOSITION_COLUMNS
    columns += quality_columns(records)
    if any(r.get("status") not in (None, "ok") or r.get("failed_requests") for r in records):
        columns.append(("Failed", _failed))
    return columns
