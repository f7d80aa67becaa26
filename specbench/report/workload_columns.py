"""The *Steady state* table (``measure.steady``: the headline numbers over each pass's steady window) and the
*Prefix cache* table (``measure.cache``: cached vs cold), each shown only where some row measured it, and the
line under the comparison table that says which span its headline numbers cover."""

from __future__ import annotations

from ..schemas.row import ResultRow
from .colspec import CACHE, STEADY, Column, Rows, measured, num, pct


def _pair(a: float | None, b: float | None, digits: int = 2) -> str:
    return f"{num(a, digits)}/{num(b, digits)}"


def _window(r: ResultRow) -> str:
    return f"{num(r.steady_window_s, 1)} s ({pct(r.steady_share, 0)})" if r.steady_window_s is not None else "—"


def _requests(r: ResultRow) -> str:
    return "—" if r.cached_requests is None else f"{r.cached_requests}/{r.cold_requests}"


_STEADY = measured(lambda r: r.steady_window_s)

STEADY_COLUMNS: list[Column] = [
    Column("Steady tok/s", lambda r: num(r.steady_output_throughput_tps, 2), ("steady_output_throughput_tps",),
           STEADY, shown=_STEADY),
    Column("Steady speedup", lambda r: num(r.steady_speedup_vs_baseline, 3, "x"), ("steady_speedup_vs_baseline",),
           STEADY, shown=_STEADY),
    Column("Steady window", _window, ("steady_window_s", "steady_share"), STEADY,
           note="in brackets its share of the timed passes' wall time (steady_share)", shown=_STEADY),
    Column("Steady req", lambda r: num(r.steady_requests, 0), ("steady_requests",), STEADY, shown=_STEADY),
    Column("Steady latency mean/p95 ms", lambda r: _pair(r.steady_latency_mean_ms, r.steady_latency_p95_ms),
           ("steady_latency_mean_ms", "steady_latency_p95_ms"), STEADY, shown=_STEADY),
    Column("Steady TTFT mean/p95 ms", lambda r: _pair(r.steady_ttft_mean_ms, r.steady_ttft_p95_ms),
           ("steady_ttft_mean_ms", "steady_ttft_p95_ms"), STEADY, shown=_STEADY),
    Column("Steady ITL mean/p95 ms", lambda r: _pair(r.steady_itl_mean_ms, r.steady_itl_p95_ms),
           ("steady_itl_mean_ms", "steady_itl_p95_ms"), STEADY, shown=_STEADY),
    Column("Steady TPOT mean/p95 ms", lambda r: _pair(r.steady_tpot_mean_ms, r.steady_tpot_p95_ms),
           ("steady_tpot_mean_ms", "steady_tpot_p95_ms"), STEADY, shown=_STEADY),
    Column("Steady tok/step", lambda r: num(r.steady_tokens_per_step, 3), ("steady_tokens_per_step",), STEADY,
           shown=_STEADY),
]

_SPLIT = measured(lambda r: r.cached_requests)

CACHE_COLUMNS: list[Column] = [
    Column("Cached prompt", lambda r: pct(r.cached_prompt_share, 1), ("cached_prompt_share",), CACHE,
           shown=measured(lambda r: r.cached_prompt_share)),
    Column("Cache hit rate", lambda r: pct(r.prefix_cache_hit_rate, 1), ("prefix_cache_hit_rate",), CACHE,
           shown=measured(lambda r: r.prefix_cache_hit_rate)),
    Column("Req cached/cold", _requests, ("cached_requests", "cold_requests"), CACHE, unit="requests", shown=_SPLIT),
    Column("TTFT cached/cold ms", lambda r: _pair(r.cached_ttft_mean_ms, r.cold_ttft_mean_ms),
           ("cached_ttft_mean_ms", "cold_ttft_mean_ms"), CACHE, shown=_SPLIT),
    Column("ITL cached/cold ms", lambda r: _pair(r.cached_itl_mean_ms, r.cold_itl_mean_ms),
           ("cached_itl_mean_ms", "cold_itl_mean_ms"), CACHE, shown=_SPLIT),
    Column("Req accept len cached/cold", lambda r: _pair(r.cached_acceptance_mean, r.cold_acceptance_mean),
           ("cached_acceptance_mean", "cold_acceptance_mean"), CACHE,
           shown=measured(lambda r: r.cached_acceptance_mean if r.cached_acceptance_mean is not None
                          else r.cold_acceptance_mean)),
    Column("Paired", lambda r: num(r.cache_pairs, 0), ("cache_pairs",), CACHE, shown=_SPLIT),
    Column("Paired TTFT/ITL cached÷cold", lambda r: _pair(r.cache_paired_ttft_ratio, r.cache_paired_itl_ratio, 3),
           ("cache_paired_ttft_ratio", "cache_paired_itl_ratio"), CACHE,
           shown=measured(lambda r: r.cache_paired_ttft_ratio)),
    Column("Paired accept len Δ", lambda r: num(r.cache_paired_acceptance_delta, 3),
           ("cache_paired_acceptance_delta",), CACHE, shown=measured(lambda r: r.cache_paired_acceptance_delta)),
]

HEADLINE_NOTE = ("Output tok/s, Speedup and the latencies above are over whole timed passes, ramp-up and drain "
                 "included; the Steady state table has them over each pass's steady window.")


def headline_note(rows: Rows) -> str | None:
    """The line under the comparison table saying which span its headline covers, where a steady window exists."""
    return HEADLINE_NOTE if _STEADY(rows) else None
