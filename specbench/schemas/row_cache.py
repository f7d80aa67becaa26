"""The results row's prefix-cache group: how much of the prompts the server served from its prefix cache, and
TTFT, ITL and acceptance of the cached requests against the cold ones (``measure.cache``).

A request is *cached* when the server reported at least ``CACHED_SHARE`` of its prompt tokens as served from the
cache (``usage.prompt_tokens_details.cached_tokens``), else *cold*: more than 0 would call nearly every chat
request cached, since each shares its chat template's first tokens (docs/measurement.md, "Cached vs cold").
"""

from __future__ import annotations

from dataclasses import dataclass

from .record_values import key
from .row_group import MetricGroup

__all__ = ["CACHED_SHARE", "CacheSplit"]

#: a request whose cached prompt tokens are at least this share of its prompt tokens is "cached"
CACHED_SHARE = 0.5

_SPLIT = (f"successful requests whose server-reported cached prompt tokens (usage.prompt_tokens_details.cached_tokens) "
          f"are at least {CACHED_SHARE:.0%} of their prompt tokens")
_COLD = "successful requests with cached_tokens reported and below half their prompt tokens"
_PAIRS = ("over the pairs (cache_pairs): the same question cold and cached — the same prompt and turn, or where its "
          "data set groups prompts by a shared prefix (the record's prefix_group), the same group")


@dataclass
class CacheSplit(MetricGroup):
    """The prefix cache over a cell: written only where a request carried ``cached_tokens`` or a phase read the
    engine's prefix-cache counters (vLLM's ``vllm:prefix_cache_*``)."""

    cached_prompt_share: float | None = key(
        "Σ cached_tokens ÷ Σ prompt tokens over the successful requests whose server reported cached_tokens "
        "(vLLM with --enable-prompt-tokens-details, SGLang with --enable-cache-report)", unit="share", low=0, high=1)
    prefix_cache_hit_rate: float | None = key(
        "Δvllm:prefix_cache_hits ÷ Δvllm:prefix_cache_queries (tokens) over the timed passes' /metrics windows, pooled: "
        "the engine's own count, with no per-request split (the fallback where requests carry no cached_tokens)",
        unit="share", low=0, high=1)
    cached_requests: int | None = key(_SPLIT, unit="requests", low=0)
    cold_requests: int | None = key(_COLD, unit="requests", low=0)
    cached_ttft_mean_ms: float | None = key(f"TTFT of the {_SPLIT}; their mean", unit="ms", low=0)
    cold_ttft_mean_ms: float | None = key(f"TTFT of the {_COLD}; their mean", unit="ms", low=0)
    cached_itl_mean_ms: float | None = key("ITL per token (as itl_mean_ms) of the cached requests; their mean",
                                           unit="ms", low=0)
    cold_itl_mean_ms: float | None = key("ITL per token (as itl_mean_ms) of the cold requests; their mean", unit="ms",
                                         low=0)
    cached_acceptance_mean: float | None = key(
        "per-request acceptance length (as request_acceptance_mean: one source per cell) of the cached requests; "
        "their mean; null for a config that does not speculate", unit="tokens/step", low=1)
    cold_acceptance_mean: float | None = key("per-request acceptance length of the cold requests; their mean",
                                             unit="tokens/step", low=1)
    cache_pairs: int | None = key(
        "questions measured both cold and cached in the cell: prompts (and turns) with a cold and a cached request "
        "(across repeats), or shared-prefix groups with both", unit="pairs", low=0)
    cache_paired_ttft_ratio: float | None = key(
        f"mean cached TTFT ÷ mean cold TTFT {_PAIRS}: below 1, the cache shortened the prefill", unit="×", low=0)
    cache_paired_itl_ratio: float | None = key(
        f"mean cached ITL ÷ mean cold ITL {_PAIRS} (each side's ITL per token, pooled over its requests)", unit="×",
        low=0)
    cache_paired_acceptance_delta: float | None = key(
        f"mean per-request acceptance length cached − cold {_PAIRS}", unit="tokens/step")
