"""Cached vs cold: what the server's prefix cache did for a cell's requests.

Per request the server reports the prompt tokens it served from its prefix cache (``cached_tokens``, from
``usage.prompt_tokens_details``: vLLM with ``--enable-prompt-tokens-details``, SGLang with
``--enable-cache-report``). A request is *cached* when that is at least ``CACHED_SHARE`` of its prompt tokens,
*cold* otherwise; a request without the count is neither. TTFT, ITL and per-request acceptance are split by it,
and compared on the same questions: a prompt (and turn) the cell measured both cold and cached (its first
send cold, a later repeat's cached), or, for a data set whose prompts share a prefix by group (the record's
``prefix_group``), a group's cold requests against its cached ones. Each side of a pair is the mean over its
requests; the ratios are of the means over the pairs.

Where no request carries the count, the engine's prefix-cache counters over the timed passes' /metrics windows
(``PhaseInfo.prefix_cache``: vLLM's ``vllm:prefix_cache_hits`` ÷ ``vllm:prefix_cache_queries``) give a hit rate
for the cell as a whole, with no split.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.row_cache import CACHED_SHARE, CacheSplit
from ..util.numbers import is_number
from .latency import token_itl
from .per_request import request_lengths


def is_cached(rec: RequestRecord) -> bool | None:
    """Cached (at least ``CACHED_SHARE`` of its prompt from the cache), cold, or None: not reported."""
    if rec.cached_tokens is None or not rec.prompt_tokens:
        return None
    return rec.cached_tokens >= CACHED_SHARE * rec.prompt_tokens


def counter_hit_rate(phases: Sequence[PhaseInfo]) -> float | None:
    """Σ hits ÷ Σ queries over the phases' prefix-cache windows; None unless every phase has a trusted one."""
    windows = [p.prefix_cache for p in phases]
    if not windows or any(not isinstance(w, dict) or w.get("error") for w in windows):
        return None
    values = [(w.get("hits"), w.get("queries")) for w in windows if isinstance(w, dict)]
    counted = [(float(h), float(q)) for h, q in values if is_number(h) and is_number(q) and h >= 0 and q >= 0]
    if len(counted) < len(windows):
        return None
    h, q = sum(h for h, _ in counted), sum(q for _, q in counted)
    return h / q if q > 0 and h <= q else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def pair_key(rec: RequestRecord) -> str:
    """The question a request asks, for pairing cold with cached: its shared-prefix group, else prompt and turn."""
    return f"group {rec.prefix_group}" if rec.prefix_group is not None else f"{rec.prompt_id}#{rec.turn}"


def cache_split(phases: Sequence[PhaseInfo], records: Sequence[RequestRecord], spec: bool) -> CacheSplit | None:
    """The cell's cache group; None (no key at all) where no request reported cached tokens and no phase read the
    prefix-cache counters. ``spec``: the config speculates (acceptance split too)."""
    ok = [r for r in records if r.ok]
    reported = [r for r in ok if is_cached(r) is not None]
    hit_rate = counter_hit_rate(phases)
    if not reported and hit_rate is None and not any(p.prefix_cache for p in phases):
        return None
    cached = [r for r in reported if is_cached(r)]
    cold = [r for r in reported if not is_cached(r)]
    lengths = {id(r): al for r, al, _ in request_lengths(ok)[0]} if spec else {}

    def ttft(rs: Sequence[RequestRecord]) -> float | None:
        return _mean([r.ttft * 1e3 for r in rs if r.ttft is not None])

    def itl(rs: Sequence[RequestRecord]) -> float | None:
        samples = [token_itl(r) for r in rs]
        pooled = np.concatenate(samples) if samples else np.empty(0)
        return float(pooled.mean() * 1e3) if pooled.size else None

    def acceptance(rs: Sequence[RequestRecord]) -> float | None:
        return _mean([lengths[id(r)] for r in rs if id(r) in lengths])

    by_key: dict[str, tuple[list[RequestRecord], list[RequestRecord]]] = defaultdict(lambda: ([], []))
    for r in reported:
        by_key[pair_key(r)][0 if is_cached(r) else 1].append(r)
    pairs = [(hot, cool) for hot, cool in by_key.values() if hot and cool]
    sides = [(ttft(hot), ttft(cool), itl(hot), itl(cool), acceptance(hot), acceptance(cool)) for hot, cool in pairs]
    t_pairs = [(a, b) for a, b, *_ in sides if a is not None and b is not None]
    i_pairs = [(a, b) for _, _, a, b, _, _ in sides if a is not None and b is not None]
    a_pairs = [a - b for *_, a, b in sides if a is not None and b is not None]
    prompt = sum(r.prompt_tokens or 0 for r in reported)
    return CacheSplit(
        cached_prompt_share=sum(r.cached_tokens or 0 for r in reported) / prompt if prompt else None,
        prefix_cache_hit_rate=hit_rate, cached_requests=len(cached) if reported else None,
        cold_requests=len(cold) if reported else None,
        cached_ttft_mean_ms=ttft(cached), cold_ttft_mean_ms=ttft(cold),
        cached_itl_mean_ms=itl(cached), cold_itl_mean_ms=itl(cold),
        cached_acceptance_mean=acceptance(cached), cold_acceptance_mean=acceptance(cold),
        cache_pairs=len(pairs) if reported else None,
        cache_paired_ttft_ratio=_ratio(_mean([a for a, _ in t_pairs]), _mean([b for _, b in t_pairs])),
        cache_paired_itl_ratio=_ratio(_mean([a for a, _ in i_pairs]), _mean([b for _, b in i_pairs])),
        cache_paired_acceptance_delta=_mean(a_pairs))
