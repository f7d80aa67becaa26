"""Acceptance read back from an engine's /metrics counters over a phase, one reader per engine
adapter (``launch.engines.ADAPTERS`` names the same families): the engine knows its flags, the
measure stage knows what its counters mean."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..launch.engines import Engine
from ..schemas.acceptance import AcceptanceWindow
from ..schemas.metrics import MetricsSnapshot
from ..util.numbers import is_number
from .acceptance import CounterNames, counter_acceptance, counter_deltas, empty_acceptance, verify_step_acceptance


def vllm_acceptance(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                    server_info: Any = None) -> AcceptanceWindow:
    """vLLM: acceptance from the four spec_decode counters."""
    c = engine.launcher.metrics.counters
    names = CounterNames(c["drafts"], c["draft_tokens"], c["accepted"], c.get("accepted_per_pos"))
    out = counter_acceptance(before, after, names, k)
    out["acceptance_source"] = engine.acceptance_source if out["mean_acceptance_length"] is not None else None
    return AcceptanceWindow.from_dict(out)


def sglang_acceptance(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                      server_info: Any = None) -> AcceptanceWindow:
    """SGLang: acceptance length from counters, or the cumulative server-info average. Counter
    windows keep their raw deltas (``sglang_*``) so repeats pool exactly; without
    ``num_requests_total`` the length is finished at summary time from the phase's completed requests."""
    return AcceptanceWindow.from_dict(_sglang_window(engine, before, after, k, server_info))


def _sglang_window(engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                   server_info: Any) -> dict[str, Any]:
    out = empty_acceptance(k)
    c = engine.launcher.metrics.counters
    out.update(acceptance_source=None, acceptance_error=None, sglang_generation_tokens=None,
               sglang_verify_calls=None, sglang_finished_requests=None)
    d, error = counter_deltas(before, after, {"tokens": c["generation_tokens"], "steps": c["verify_calls"],
                                              "requests": c.get("finished_requests")})
    if error:
        out["acceptance_error"] = error
        return out
    if d["tokens"] is not None and d["steps"]:
        requests = d["requests"]
        if requests is not None and requests > d["tokens"]:
            out["acceptance_error"] = (f"/metrics counters contradict each other: {requests:g} finished requests "
                                       f"but {d['tokens']:g} generated tokens")
            return out
        out.update(sglang_generation_tokens=int(d["tokens"]), sglang_verify_calls=int(d["steps"]),
                   sglang_finished_requests=None if requests is None else int(requests))
        if requests is not None:
            out.update(verify_step_acceptance(d["tokens"], d["steps"], requests, k))
            out["acceptance_source"] = SGLANG_COUNTERS
        return out
    key = engine.launcher.metrics.server_info_key
    if server_info is not None and key is not None:
        value, why = _server_info_length(server_info, key)
        if why:
            out["acceptance_error"] = f"/get_server_info: {why}"
        elif value is not None:
            out["mean_acceptance_length"] = value
            out["acceptance_rate"] = (value - 1) / k if k else None
            out["acceptance_source"] = "/get_server_info avg_spec_accept_length: cumulative since server start (warm-up included), DP rank 0"
    return out


SGLANG_COUNTERS = ("(Δsglang:generation_tokens_total − Δsglang:num_requests_total) ÷ Δsglang:spec_verify_calls_total "
                   "over the measured phase: one prefill token per finished request is not a verify step")


def _server_info_length(info: Any, key: str) -> tuple[float | None, str | None]:
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
                    server_info: dict[str, Any] | None = None) -> AcceptanceWindow:
    """The phase's acceptance from two snapshots, read the way ``engine``'s family counts."""
    return READERS[engine.adapter](engine, before, after, k, server_info)
