"""The comparison table's columns, shared by the markdown and HTML renderings.

This module alone decides which columns a set of records gets, in what order, and each cell's text;
``render.markdown`` and ``html.table_html`` only lay the cells out. A column beyond ``COLUMNS`` appears
only when some record measured it, so a results file from elsewhere prints the reference table.
Missing values are ``—`` (``-`` inside the per-position cell), never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..schemas.row import ResultRow
from ..schemas.row_read import is_number
from .quality_columns import quality_columns

DASH = "—"

Column = tuple[str, Callable[[ResultRow], str]]


def num(value: Any, digits: int, suffix: str = "", missing: str = DASH) -> str:
    if not is_number(value):
        return missing
    return f"{value:.{digits}f}{suffix}"


def _pair(mean: float | None, p95: float | None) -> str:
    return f"{num(mean, 2)}/{num(p95, 2)}"


def _pct(value: Any, missing: str = DASH) -> str:
    return f"{value * 100:.2f}%" if is_number(value) else missing


def _positions(r: ResultRow) -> str:
    return "/".join(_pct(v, missing="-") for v in (r.acceptance_pos_1, r.acceptance_pos_2, r.acceptance_pos_3))


#: (header, cell) pairs of the comparison table, in order
COLUMNS: list[Column] = [
    ("Dataset", lambda r: str(r.dataset)),
    ("Run", lambda r: str(r.run)),
    ("Req", lambda r: DASH if r.requests is None else str(r.requests)),
    ("Output tok/s", lambda r: num(r.output_throughput_tps, 2)),
    ("Speedup", lambda r: num(r.speedup_vs_baseline, 3, "x")),
    ("Latency mean/p95 ms", lambda r: _pair(r.latency_mean_ms, r.latency_p95_ms)),
    ("TTFT mean/p95 ms", lambda r: _pair(r.ttft_mean_ms, r.ttft_p95_ms)),
    ("ITL mean/p95 ms", lambda r: _pair(r.itl_mean_ms, r.itl_p95_ms)),
    ("TPOT mean/p95 ms", lambda r: _pair(r.tpot_mean_ms, r.tpot_p95_ms)),
    ("Accept rate", lambda r: _pct(r.acceptance_rate)),
    ("Accept p1/p2/p3", _positions),
    ("Accept len", lambda r: num(r.mean_acceptance_length, 3)),
]


def _decomposed(r: ResultRow) -> str:
    value = num(r.speedup_decomposed, 3, "x")
    lo, hi = r.speedup_decomposed_ci_low, r.speedup_decomposed_ci_high
    return value if value == DASH or lo is None or hi is None else f"{value} [{lo:.3f}–{hi:.3f}]"


#: shown when some row has a measured step cost ratio (Speedup = Tok/step ÷ Step cost × Residual)
DECOMPOSITION_COLUMNS: list[Column] = [
    ("Tok/step", lambda r: num(r.stream_mean_acceptance_length, 3)),
    ("Step cost", lambda r: num(r.step_cost_ratio, 3, "x")),
    ("Decomposed speedup", _decomposed),
    ("Residual", lambda r: num(r.speedup_residual, 3)),
]


def has_decomposition(records: Sequence[ResultRow]) -> bool:
    return any(r.step_cost_ratio is not None for r in records)


def _ci(r: ResultRow) -> str:
    ci = (r.ci95 or {}).get("speedup_vs_baseline")
    return f"{ci[0]:.3f}–{ci[1]:.3f}" if ci and None not in ci else DASH


def _failed(r: ResultRow) -> str:
    if r.status in ("failed", "interrupted"):
        return f"cell {r.status}"
    return str(r.failed_requests or 0)


def _rate(r: ResultRow) -> str:
    return DASH if r.request_rate is None else f"{r.request_rate:g}"


def _client_tokens(r: ResultRow) -> str:
    """Σ client tokens ÷ Σ server generation tokens, ⚠ where a repeat was off by more than 1 %."""
    text = _pct(r.client_server_token_ratio)
    return text + " ⚠" if r.client_server_tokens_agree is False else text


#: what a column's number is, where the header alone does not say (the HTML header's tooltip)
DEFINITIONS: dict[str, str] = {
    "Req accept len p10/p50/p90": (
        "per-request acceptance length (tokens per target step): vLLM's per-request stats (1 + accepted ÷ drafted "
        "steps) when every request has them, else the stream's decode tokens ÷ decode chunks; ⚠ = from chunks while "
        "the engine merged steps into one chunk, so too high (request_acceptance_warning)"),
    "Req accept len mean req/tok": (
        "request-weighted mean / token-weighted mean Σ tᵢ·ALᵢ ÷ Σ tᵢ of the per-request acceptance lengths, tᵢ = the "
        "request's decode tokens (its output tokens after the first, prefill chunk) whichever source gave ALᵢ; "
        "⚠ as for p10/p50/p90"),
    "Client/server tok": (
        "tokens the client counted in its measured windows ÷ the server's generated-token counter "
        "(vllm:generation_tokens_total, sglang:generation_tokens_total) over the same windows, pooled over repeats; "
        "⚠ = a repeat off by more than 1 % (the client missed tokens, or other traffic reached the server); "
        "— = no such counter, or one that could not be trusted (client_server_token_error)"),
}


def table_columns(records: Sequence[ResultRow]) -> list[Column]:
    """``COLUMNS`` plus what these records measured: the swept load (Rate/s, Conc), the speed-up CI,
    output fidelity, the decomposition, quality and cost, the client's token count against the
    server's, and last, where a reader looks, Failed."""
    columns = list(COLUMNS)
    if len({r.concurrency for r in records}) > 1:
        columns.insert(2, ("Conc", lambda r: DASH if r.concurrency is None else str(r.concurrency)))
    if len({r.request_rate for r in records}) > 1:
        columns.insert(2, ("Rate/s", _rate))
    if any((r.ci95 or {}).get("speedup_vs_baseline") for r in records):
        columns.insert([h for h, _ in columns].index("Speedup") + 1, ("Speedup 95% CI", _ci))
    if any(r.fidelity_identical is not None for r in records):
        columns.append(("Same output", lambda r: _pct(r.fidelity_identical)))
    if has_decomposition(records):
        at = [h for h, _ in columns].index("Accept len") + 1
        columns[at:at] = DECOMPOSITION_COLUMNS
    columns += quality_columns(records)
    if any(r.client_server_token_ratio is not None or r.client_server_tokens_agree is False for r in records):
        columns.append(("Client/server tok", _client_tokens))
    if any(r.status not in (None, "ok") or r.failed_requests for r in records):
        columns.append(("Failed", _failed))
    return columns
