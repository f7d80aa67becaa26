"""Acceptance read back from an engine's /metrics counters over a phase, one reader per engine
adapter (``launch.engines.ADAPTERS`` names the same families): the engine knows its flags, the
measure stage knows what its counters mean."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..launch.engines import Engine
from ..schemas.acceptance import AcceptanceWindow
from ..schemas.metrics import MetricsSnapshot
from ..util.numbers import is_number
from .acceptance import CounterNames, counter_acceptance, counter_deltas, empty_acceptance, verify_step_acceptance

SGLANG_KEYS = ("acceptance_source", "acceptance_error", "sglang_generation_tokens", "sglang_verify_calls",
               "sglang_finished_requests")


def vllm_acceptance(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                    server_info: object = None) -> AcceptanceWindow:
    """vLLM: acceptance from the four spec_decode counters."""
    c = engine.launcher.metrics.counters
    names = CounterNames(c["drafts"], c["draft_tokens"], c["accepted"], c.get("accepted_per_pos"))
    out = counter_acceptance(before, after, names, k)
    return replace(out, acceptance_source=engine.acceptance_source if out.mean_acceptance_length is not None else None,
                   keys=(*out.keys, "acceptance_source"))


def sglang_acceptance(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                      server_info: object = None) -> AcceptanceWindow:
    """SGLang: acceptance length from counters, or the cumulative server-info average. Counter
    windows keep their raw deltas (``sglang_*``) so repeats pool exactly; without
    ``num_requests_total`` the length is finished at summary time from the phase's completed requests."""
    out = empty_acceptance(k, *SGLANG_KEYS)
    c = engine.launcher.metrics.counters
    d, error = counter_deltas(before, after, {"tokens": c["generation_tokens"], "steps": c["verify_calls"],
                                              "requests": c.get("finished_requests")})
    if error:
        return replace(out, acceptance_error=error)
    if d["tokens"] is not None and d["steps"]:
        requests = d["requests"]
        if requests is not None and requests > d["tokens"]:
            return replace(out, acceptance_error=(f"/metrics counters contradict each other: {requests:g} finished "
                                                  f"requests but {d['tokens']:g} generated tokens"))
        out = replace(out, sglang_generation_tokens=int(d["tokens"]), sglang_verify_calls=int(d["steps"]),
                      sglang_finished_requests=None if requests is None else int(requests))
        if requests is None:
            return out
        return replace(verify_step_acceptance(out, d["tokens"], d["steps"], requests, k), acceptance_source=SGLANG_COUNTERS)
    if server_info is None:
        return out
    key = engine.launcher.metrics.server_info_key
    if key is None:
        return out
    value, why = _server_info_length(server_info, key)
    if why:
        return replace(out, acceptance_error=f"/get_server_info: {why}")
    if value is None:
        return out
    return replace(out, mean_acceptance_length=value, acceptance_rate=(value - 1) / k if k else None,
                   acceptance_source="/get_server_info avg_spec_accept_length: cumulative since server start "
                                     "(warm-up included), DP rank 0")


SGLANG_COUNTERS = ("(Δsglang:generation_tokens_total − Δsglang:num_requests_total) ÷ Δsglang:spec_verify_calls_total "
                   "over the measured phase: one prefill token per finished request is not a verify step")


def _server_info_length(info: object, key: str) -> tuple[float | None, str | None]:
    """SGLang's cumulative average acceptance length from /get_server_info, or why it cannot be used."""
    if not isinstance(info, dict):
        return None, f"answered {type(info).__name__}, not a JSON object"
    decode = info.get("decode")
    if decode:  # PD disaggregation: the decode side
        if not isinstance(decode, list) or not isinstance(decode[0], dict):
            return None, "decode is not a list of objects"
        info = decode[0]
    states = info.get("internal_states") or [info]
    if not isinstance(states, list) or not isinstance(states[0], dict):
        return None, "internal_states is not a list of objects"
    value = states[0].get(key)
    if value is None or value == 0:  # 0: a server that does not speculate
        return None, None
    if not is_number(value) or value < 1:
        return None, f"{key} = {value!r:.40} is not a number ≥ 1"
    return float(value), None


READERS: dict[str, Callable[..., AcceptanceWindow]] = {"vllm": vllm_acceptance, "sglang": sglang_acceptance}


def read_acceptance(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                    server_info: object = None) -> AcceptanceWindow:
    """The phase's acceptance from two snapshots, read the way ``engine``'s family counts."""
    return READERS[engine.adapter](engine, before, after, k, server_info)


@dataclass(frozen=True)
class PrefixCacheWindow:
    """One phase's Δ of the engine's prefix-cache counters (tokens queried, tokens found cached), or why they cannot
    be trusted: phases.jsonl's ``prefix_cache`` (``to_dict``), read by ``measure.cache``."""

    queries: int | None = None
    hits: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, int | str]:
        return {k: v for k, v in (("queries", self.queries), ("hits", self.hits), ("error", self.error)) if v is not None}


def prefix_cache_window(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot) -> PrefixCacheWindow | None:
    """The launcher's ``metrics.counters`` ``prefix_cache_queries`` / ``prefix_cache_hits`` over the window; None
    where the launcher names none or the server exports neither (prefix caching off, another engine)."""
    c = engine.launcher.metrics.counters
    names = {"queries": c.get("prefix_cache_queries"), "hits": c.get("prefix_cache_hits")}
    if names["queries"] is None or names["hits"] is None:
        return None
    if not before.ok or not after.ok:
        return PrefixCacheWindow(error=before.error or after.error)
    d, error = counter_deltas(before, after, names)
    if error:
        return PrefixCacheWindow(error=error)
    queries, hits = d["queries"], d["hits"]
    if queries is None or hits is None:
        return None
    if hits > queries:
        return PrefixCacheWindow(error=f"/metrics {names['hits']} rose by {hits:g}, more than {names['queries']} "
                                       f"({queries:g})")
    return PrefixCacheWindow(queries=int(queries), hits=int(hits))
