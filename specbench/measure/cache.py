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

Re-sent prompts (``resent_prompts``): with ``load.prefix_cache: keep`` the cache outlives a pass, so a timed request
whose prompt (and turn) an earlier timed pass or warm-up of the same server start already sent may be served from it;
where the server says it was (cached ``cached_tokens``), the cell gets a note naming the remedy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schemas.cell import Cell
from ..schemas.notes import Note, NoteCode
from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
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


@dataclass(frozen=True)
class ResentPrompts:
    """A cell's timed requests (answered ones, over its passes judged) and those that re-sent a prompt an earlier
    pass or warm-up of their server start had sent: how many, how many of them cached, and the share of their prompt
    tokens the server served from its cache (over those that report it; None: none does)."""

    requests: int
    resent: int
    cached: int
    cached_share: float | None


def _pass_of(r: RequestRecord) -> tuple[Cell, int, str]:
    return Cell.of_record(r), r.repeat, r.phase


def _blocks(records: Sequence[RequestRecord]) -> list[tuple[list[RequestRecord], list[RequestRecord]]]:
    """Each pass's records, its warm-up's and its timed (or set-aside) ones, as requests.jsonl holds them: a pass's
    records are written together, its warm-up's first, a config's passes in the order they ran (one server at a
    time per config), so a warm-up record after a timed one, or a timed one of another pass, begins the next."""
    current: dict[str, tuple[list[RequestRecord], list[RequestRecord]]] = {}
    blocks = []
    for r in records:
        block, timed = current.get(r.config), r.phase != "warmup"
        if block is None or (block[1] and (not timed or _pass_of(block[1][0]) != _pass_of(r))):
            block = current[r.config] = ([], [])
            blocks.append(block)
        block[1 if timed else 0].append(r)
    return blocks


def _sent(rs: Sequence[RequestRecord]) -> set[tuple[str, str, int]]:
    """The prompts (data set, id, turn) the server prefilled: a request it answered with at least one chunk."""
    return {(r.dataset, r.prompt_id, r.turn) for r in rs if r.chunk_times}


def resent_prompts(phases: Sequence[PhaseInfo], records: Sequence[RequestRecord]) -> dict[Cell, ResentPrompts]:
    """Per cell, its timed requests whose prompt and turn an earlier timed pass or warm-up (its own included) of the
    same server start had sent; ``records`` in requests.jsonl's order. A pass's server start is its phase's
    (``server_start``, per config; a server given by URL: one); a pass without a phase (cut, set aside) is left out,
    as a pass and as history, and a pass after a reset (``prefix_cache_reset``) finds no history. What a pass shares
    within itself (a shared-prefix group, a conversation's turns, a prompt sent twice) is not counted."""
    by_pass = {(p.cell, p.repeat): p for p in phases}
    history: dict[tuple[str, int | None], set[tuple[str, str, int]]] = defaultdict(set)
    found: dict[Cell, list[tuple[RequestRecord, bool]]] = defaultdict(list)
    for warm, timed in _blocks(records):
        phase = by_pass.get((Cell.of_record(timed[0]), timed[0].repeat)) if timed and timed[0].phase == "measure" else None
        if phase is None:
            continue
        sent, warm_sent = history[(phase.config, phase.server_start)], _sent(warm)
        if phase.prefix_cache_reset:  # emptied after the warm-up: the pass finds nothing sent before it
            sent.clear()
        else:
            before = sent | warm_sent
            found[phase.cell] += [(r, (r.dataset, r.prompt_id, r.turn) in before) for r in timed if r.ok]
        sent |= warm_sent | _sent(timed)
    out = {}
    for cell, judged in found.items():
        resent = [r for r, again in judged if again]
        said = [(r, is_cached(r)) for r in resent]
        reported = [r for r, cached in said if cached is not None]
        prompt = sum(r.prompt_tokens or 0 for r in reported)
        out[cell] = ResentPrompts(len(judged), len(resent), sum(1 for _, cached in said if cached),
                                  sum(r.cached_tokens or 0 for r in reported) / prompt if prompt else None)
    return out


def add_resent_notes(rows: Sequence[ResultRow], phases: Sequence[PhaseInfo], records: Sequence[RequestRecord]) -> None:
    """A cell's ⚠ note where a re-sent prompt was served from the cache (at least ``CACHED_SHARE`` of it): its TTFT
    is a cached prompt's. Where the server reports no ``cached_tokens`` nothing is said: it cannot be told."""
    found = resent_prompts(phases, records)
    for row in rows:
        r = found.get(Cell.of_row(row))
        if r is not None and r.cached and r.cached_share is not None:  # a new list: LiveRows' copies share the old
            row.notes = [*(row.notes or []), Note.of(NoteCode.RESENT_PROMPTS, resent=r.resent, requests=r.requests,
                                                     cached_share=r.cached_share)]
