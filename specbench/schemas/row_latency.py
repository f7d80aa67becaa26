"""The results row's timing groups: latency, TTFT, ITL, TPOT and chunk-gap spreads (``measure.latency``), and
whether the client kept up — chunks read together, its token count against the server's, the openai SDK's own
lag (``measure.keepup``)."""

from __future__ import annotations

from dataclasses import dataclass

from .record_values import key
from .row_group import MetricGroup, mean_ms, percentile_ms

__all__ = ["BEHIND_LIMIT_MS", "LAG_LIMIT_MS", "SHARED_READ_LIMIT", "TOLERANCE", "ClientLag", "FromSchedule", "LatencyStats",
           "SharedReads", "TokenAgreement"]

#: the most the client's count may differ from the server's, relative to the server's, per phase
TOLERANCE = 0.01
#: SDK lag p99 (ms) above which a cell is client-limited: about one decode step of a GPU engine (10–30 ms), so
#: a chunk held longer may have moved by a whole step (docs/measurement.md); above a busy machine's scheduling gaps
LAG_LIMIT_MS = 20.0
#: an open-loop cell whose p99 lateness (send − due) is above this is flagged: asyncio's timers alone are up to
#: ~1 ms late (docs/developing.md, client overhead), so 10 ms late is a client (or the in-flight cap) holding requests
BEHIND_LIMIT_MS = 10.0
#: share of SDK chunks read together with the one before above which the cell is client-limited (as the
#: shared-read line under the table: at the loads an SDK process keeps up with it is 0)
SHARED_READ_LIMIT = 0.01

_LATENCY = "per successful request: arrival of its last content chunk − send time"
_TTFT = ("per successful request: arrival of the first chunk with content − send time (sent = just before the request "
         "is written to the socket; arrival = the kernel's receive stamp)")
_ITL = ("per token, pooled over the successful requests: a chunk of n tokens after a gap g gives n samples of g/n (the "
        "raw gap between chunks, what other tools call ITL, is step_*_ms)")
_TPOT = "per successful request with more than one output token: (latency − TTFT) ÷ (output tokens − 1)"
_STEP = ("per gap between two content chunks of a successful request: the raw chunk gap, one target step as the "
         "client saw it (what other tools call ITL)")


@dataclass
class LatencyStats(MetricGroup):
    """The cell's latency, TTFT, ITL, TPOT and step (raw chunk gap) spreads over its timed passes, in ms."""

    latency_mean_ms: float | None = mean_ms(_LATENCY)
    latency_p50_ms: float | None = percentile_ms("latency_mean_ms", 50)
    latency_p95_ms: float | None = percentile_ms("latency_mean_ms", 95)
    latency_p99_ms: float | None = percentile_ms("latency_mean_ms", 99)
    ttft_mean_ms: float | None = mean_ms(_TTFT)
    ttft_p50_ms: float | None = percentile_ms("ttft_mean_ms", 50)
    ttft_p95_ms: float | None = percentile_ms("ttft_mean_ms", 95)
    ttft_p99_ms: float | None = percentile_ms("ttft_mean_ms", 99)
    itl_mean_ms: float | None = mean_ms(_ITL)
    itl_p50_ms: float | None = percentile_ms("itl_mean_ms", 50)
    itl_p95_ms: float | None = percentile_ms("itl_mean_ms", 95)
    itl_p99_ms: float | None = percentile_ms("itl_mean_ms", 99)
    tpot_mean_ms: float | None = mean_ms(_TPOT)
    tpot_p50_ms: float | None = percentile_ms("tpot_mean_ms", 50)
    tpot_p95_ms: float | None = percentile_ms("tpot_mean_ms", 95)
    tpot_p99_ms: float | None = percentile_ms("tpot_mean_ms", 99)
    step_mean_ms: float | None = mean_ms(_STEP)
    step_p50_ms: float | None = percentile_ms("step_mean_ms", 50)
    step_p95_ms: float | None = percentile_ms("step_mean_ms", 95)
    step_p99_ms: float | None = percentile_ms("step_mean_ms", 99)


@dataclass
class SharedReads(MetricGroup):
    """Content chunks that came in the same socket read as the chunk before (for the openai SDK client, the same
    read of its transport): the client (or the network) was a step behind, or the server flushed two steps at once."""

    shared_read_chunks: int | None = key("content chunks of the successful requests stamped exactly like the chunk "
                                         "before them (one read carries one stamp)", unit="chunks", low=0)
    shared_read_share: float | None = key(
        "shared_read_chunks ÷ the chunk gaps of the successful requests; above ~1 % the ITL distribution is coarser "
        "than the server's real step times", unit="share", low=0)


@dataclass
class TokenAgreement(MetricGroup):
    """The client's token count against the server's generated-token counter over the same windows: written for
    phases that read the counter."""

    server_generation_tokens: int | None = key(
        "Σ Δ of the server's generated-token counter (vllm:generation_tokens_total, sglang:generation_tokens_total) "
        "over the timed passes' /metrics windows", unit="tokens", low=0)
    client_server_token_ratio: float | None = key(
        "tokens the client counted in its measured windows ÷ the server's generated-token counter "
        "(vllm:generation_tokens_total, sglang:generation_tokens_total) over the same windows "
        "(server_generation_tokens), pooled over repeats; null = no such counter, or one that could not be trusted "
        "(client_server_token_error)", unit="share", low=0)
    client_server_tokens_agree: bool | None = key(
        f"every repeat's client count within {TOLERANCE:.0%} of the server's (false: the client missed tokens, or "
        "other traffic reached the server)")
    client_server_token_error: str | None = key("why the server's counter could not be read or trusted")


@dataclass
class ClientLag(MetricGroup):
    """The openai SDK client's own lag (load.client: openai): written only for a run over it."""

    client_lag_p99_ms: float | None = key(
        "openai SDK client (load.client: openai): how long after its transport read a chunk's bytes the SDK yielded it (its decoding, and "
        "the chunks of the same read handled before it), p99 over the cell's chunks", unit="ms", low=0)
    client_limited: bool | None = key(
        f"client_lag_p99_ms above {LAG_LIMIT_MS:g} ms, or over {SHARED_READ_LIMIT:.0%} of the chunks read together "
        "with the one before (read a step or more late): TTFT and ITL carry the client's own time "
        "(docs/measurement.md)")


_FROM_DUE = ("per successful open-loop request, from when it was due (``scheduled_time``) instead of when it was sent: "
             "a client or an in-flight cap that held it shows as waiting, not as a fast server (coordinated omission)")


@dataclass
class FromSchedule(MetricGroup):
    """Latency and TTFT of an open-loop cell from the schedule (``measure.arrivals``), and how far behind it the client
    sent: written only for cells whose requests carry a due time."""

    latency_from_schedule_mean_ms: float | None = key(f"latency {_FROM_DUE}; their mean", unit="ms", low=0)
    latency_from_schedule_p95_ms: float | None = percentile_ms("latency_from_schedule_mean_ms", 95)
    ttft_from_schedule_mean_ms: float | None = key(f"TTFT {_FROM_DUE}; their mean", unit="ms", low=0)
    ttft_from_schedule_p95_ms: float | None = percentile_ms("ttft_from_schedule_mean_ms", 95)
    client_behind_ms_p99: float | None = key("99th percentile over the cell's sent requests of send time − due time",
                                             unit="ms", low=0)
    client_behind_schedule: bool | None = key(f"client_behind_ms_p99 above {BEHIND_LIMIT_MS:g} ms: the client fell behind "
                                              "its schedule (a ⚠ line under the tables)")

