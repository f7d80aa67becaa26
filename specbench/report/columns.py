"""Every column of the report, in print order, each one entry (``colspec.Column``): the comparison
table's (the reference table's twelve, its Speedup with its 95% CI and Output tok/s with its σ over repeats in the
cell, and the swept load), *Why*'s and *Checks*' here, *Per request*'s and *Quality & cost*'s in ``quality_columns.py``.

This module alone decides which columns a set of records gets and each cell's text; ``tables.py``
(markdown) and ``html.table_html`` only lay the cells out, and ``reference_markdown`` writes the
column reference of docs/metrics.md. A column names the results fields it shows: its definition and
unit are the first field's (declared once in ``schemas/row_*.py``), plus the column's ``note``. A
column beyond the reference table's appears only when some record measured it, so a results file from
elsewhere prints the reference table.
"""

from __future__ import annotations

from ..schemas.cell import load_label
from ..schemas.row import ResultRow
from ..schemas.row_latency import LAG_LIMIT_MS
from .arrival_columns import ARRIVAL_COLUMNS
from .colspec import CHECKS, DASH, GROUPS, WHY, Column, Group, Rows, num, pct, with_ci, with_sd
from .o200k_columns import O200K_COLUMNS
from .quality_columns import QUALITY_COLUMNS
from .steplog_columns import STEP_COLUMNS, STEP_SOURCE_COLUMN
from .workload_columns import CACHE_COLUMNS, STEADY_COLUMNS

__all__ = ["COLUMNS", "DASH", "Column", "all_columns", "grouped", "has_decomposition", "num", "reference_markdown",
           "table_columns"]


def _pair(mean: float | None, p95: float | None) -> str:
    return f"{num(mean, 2)}/{num(p95, 2)}"


def _positions(r: ResultRow) -> str:
    return "/".join(pct(v, missing="-") for v in (r.acceptance_pos_1, r.acceptance_pos_2, r.acceptance_pos_3))


def _rates_vary(records: Rows) -> bool:
    return len({r.request_rate for r in records}) > 1


def _concurrencies_vary(records: Rows) -> bool:
    return len({r.concurrency for r in records}) > 1


def _speedup(r: ResultRow) -> str:
    """The speedup with its 95% CI, to the digits the CI's width sets, and the ⚠ where its repeats disagree."""
    ci = (r.ci95 or {}).get("speedup_vs_baseline")
    low, high = ci if isinstance(ci, list) and len(ci) == 2 else (None, None)
    text = with_ci(r.speedup_vs_baseline, low, high)
    known = [s for s in r.speedup_repeats or [] if s is not None]
    if r.speedup_varies and known:
        where = "servers" if r.speedup_repeats_fresh_servers else "passes"
        text += f" ⚠ varies between {where}: {min(known):.2f}–{max(known):.2f}×"
    return text


def _load(r: ResultRow) -> str:
    if r.request_rate is not None:
        return load_label("rate", r.request_rate)
    return DASH if r.concurrency is None else load_label("concurrency", r.concurrency)


def _identity(header: str, key: str) -> Column:
    return Column(header, lambda r: str(getattr(r, key)), (key,), identity=True)


#: the reference table's columns (``../shared/reference/results_example.md``), in its order
COLUMNS: list[Column] = [
    _identity("Dataset", "dataset"),
    _identity("Run", "run"),
    Column("Req", lambda r: DASH if r.requests is None else str(r.requests), ("requests",)),
    Column("Output tok/s", lambda r: with_sd(r.output_throughput_tps, (r.std or {}).get("output_throughput_tps")),
           ("output_throughput_tps", "std"), note="± its standard deviation over the cell's repeats where it ran two or "
           "more (std.output_throughput_tps), the digits those leave meaningful"),
    Column("Speedup", _speedup, ("speedup_vs_baseline", "ci95", "speedup_ci_method", "speedup_varies", "speedup_repeats"),
           note="in brackets its 95% CI (ci95.speedup_vs_baseline; speedup_ci_method says how), to the digits the CI's "
                "half-width leaves meaningful (two significant digits of it when they begin 10–35, else one); ⚠ varies "
                "between servers (or passes): the cell's repeats disagree by more than their own bootstrap intervals "
                "allow (Cochran's Q, p < 0.05: speedup_varies), with their range"),
    Column("Latency mean/p95 ms", lambda r: _pair(r.latency_mean_ms, r.latency_p95_ms),
           ("latency_mean_ms", "latency_p95_ms")),
    Column("TTFT mean/p95 ms", lambda r: _pair(r.ttft_mean_ms, r.ttft_p95_ms), ("ttft_mean_ms", "ttft_p95_ms")),
    Column("ITL mean/p95 ms", lambda r: _pair(r.itl_mean_ms, r.itl_p95_ms), ("itl_mean_ms", "itl_p95_ms")),
    Column("TPOT mean/p95 ms", lambda r: _pair(r.tpot_mean_ms, r.tpot_p95_ms), ("tpot_mean_ms", "tpot_p95_ms")),
    Column("Accept rate", lambda r: pct(r.acceptance_rate), ("acceptance_rate",)),
    Column("Accept p1/p2/p3", _positions, ("acceptance_pos_1", "acceptance_pos_2", "acceptance_pos_3")),
    Column("Accept len", lambda r: num(r.mean_acceptance_length, 3), ("mean_acceptance_length",)),
]

#: the swept load (identity: every small table repeats it), where the run sweeps one
LOAD: list[Column] = [
    Column("Rate/s", lambda r: DASH if r.request_rate is None else f"{r.request_rate:g}", ("request_rate",),
           note="shown when the run sweeps the rate", identity=True,
           shown=lambda rows: _rates_vary(rows) and not _concurrencies_vary(rows)),
    Column("Conc", lambda r: DASH if r.concurrency is None else str(r.concurrency), ("concurrency",),
           note="shown when the run sweeps concurrency", identity=True,
           shown=lambda rows: _concurrencies_vary(rows) and not _rates_vary(rows)),
    Column("Load", _load, ("concurrency", "request_rate"),
           note="shown with request_rate as the cell's load point in one label, C=N (closed loop, N streams) or R "
                "req/s (open loop), instead of Rate/s and Conc when both vary (closed- and open-loop cells in one "
                "table)", unit="", identity=True, shown=lambda rows: _rates_vary(rows) and _concurrencies_vary(rows)),
]


def has_decomposition(records: Rows) -> bool:
    return any(r.step_cost_ratio is not None for r in records)


def _tokens_per_step(r: ResultRow) -> str:
    return num(r.steplog_tokens_per_step if r.step_source == "step log" else r.stream_mean_acceptance_length, 3)


def _decomposed(r: ResultRow) -> str:
    value = num(r.speedup_decomposed, 3, "x")
    lo, hi = r.speedup_decomposed_ci_low, r.speedup_decomposed_ci_high
    return value if value == DASH or lo is None or hi is None else f"{value} [{lo:.3f}–{hi:.3f}]"


#: shown when some row has a measured step cost ratio (Speedup = Tok/step ÷ Step cost × Residual)
WHY_COLUMNS: list[Column] = [
    Column("Tok/step", _tokens_per_step, ("stream_mean_acceptance_length",), WHY,
           note="⚠ under the tables where chunks merged steps", shown=has_decomposition),
    Column("Step cost", lambda r: num(r.step_cost_ratio, 3, "x"), ("step_cost_ratio",), WHY, shown=has_decomposition),
    Column("Decomposed speedup", _decomposed,
           ("speedup_decomposed", "speedup_decomposed_ci_low", "speedup_decomposed_ci_high"), WHY,
           note="in brackets its 95% CI (speedup_decomposed_ci_low, _high)", shown=has_decomposition),
    Column("Residual", lambda r: num(r.speedup_residual, 3), ("speedup_residual",), WHY, shown=has_decomposition),
    STEP_SOURCE_COLUMN,
]


def _failed(r: ResultRow) -> str:
    if r.status in ("failed", "interrupted"):
        return f"cell {r.status}"
    return str(r.failed_requests or 0)


def _client_tokens(r: ResultRow) -> str:
    text = pct(r.client_server_token_ratio)
    return text + " ⚠" if r.client_server_tokens_agree is False else text


def _client_lag(r: ResultRow) -> str:
    text = num(r.client_lag_p99_ms, 2)
    return text + " ⚠" if r.client_limited else text


#: measurement health rather than results
CHECK_COLUMNS: list[Column] = [
    Column("Client/server tok", _client_tokens, ("client_server_token_ratio", "client_server_tokens_agree"), CHECKS,
           note="⚠ = a repeat off by more than 1 % (client_server_tokens_agree false)",
           shown=lambda rows: any(r.client_server_token_ratio is not None or r.client_server_tokens_agree is False
                                  for r in rows)),
    Column("SDK lag p99", _client_lag, ("client_lag_p99_ms", "client_limited"), CHECKS,
           note=f"⚠ = client-limited (client_limited: above {LAG_LIMIT_MS:g} ms, or over 1 % of its chunks read "
                "together with the one before): TTFT and ITL carry the client's own time; — = another client, whose "
                "chunk times are its reads",
           shown=lambda rows: any(r.client_lag_p99_ms is not None for r in rows)),
    Column("Failed", _failed, ("failed_requests", "status"), CHECKS,
           note="their errors are listed under the tables; cell failed / cell interrupted = the cell itself did not "
                "finish (status)",
           shown=lambda rows: any(r.status not in (None, "ok") or r.failed_requests for r in rows)),
]


def all_columns() -> list[Column]:
    """Every column entry, in print order: identity, the comparison table, then one table after another."""
    main = COLUMNS[:2] + LOAD + COLUMNS[2:]
    return (main + WHY_COLUMNS + STEP_COLUMNS + STEADY_COLUMNS + QUALITY_COLUMNS + CACHE_COLUMNS + O200K_COLUMNS
            + CHECK_COLUMNS + ARRIVAL_COLUMNS)


def table_columns(records: Rows) -> list[Column]:
    """The columns these records get, every table's, in print order (the HTML table shows them all)."""
    return [c.for_rows(records) for c in all_columns() if c.shown(records)]


def grouped(records: Rows) -> list[tuple[Group, list[Column]]]:
    """``table_columns`` by table, in ``GROUPS`` order; a table none of whose columns is shown is left out."""
    cols = table_columns(records)
    return [(g, mine) for g in GROUPS if (mine := [c for c in cols if c.group is g])]


def reference_markdown() -> str:
    """The column reference of docs/metrics.md: per table, the question it answers and its columns."""
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    out = []
    for g in GROUPS:
        cols = [c for c in all_columns() if c.group is g]
        out += [f"### {g.title}", "", g.question, "", "| Column | Unit | Definition | results.json keys |",
                "| --- | --- | --- | --- |"]
        out += [f"| {esc(c.header)} | {c.shown_unit} | {esc(c.definition)}"
                f"{'; repeated in every table' if c.identity else ''} | {', '.join(f'`{k}`' for k in c.keys)} |"
                for c in cols]
        out += ["", *([g.note, ""] if g.note else [])]
    return "\n".join(out).rstrip("\n") + "\n"

