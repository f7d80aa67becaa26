"""The client keeps up, shown: the tokens it counted against the server's own generation counter, and
(openai SDK client) how long the SDK held each chunk after its bytes were read.

Per measured phase the server's cumulative generated-token counter (``vllm:generation_tokens_total``,
``sglang:generation_tokens_total``: the launcher's ``metrics.counters.generation_tokens``) is read
in the same two /metrics snapshots as the acceptance counters, one after warm-up and one after the
phase's last request, so its delta covers exactly the requests the client timed. Every token the
server generated for them reached the client unless the client dropped or cut streams, or someone
else's requests ran in the window. Off by more than ``TOLERANCE`` in any repeat: flagged.

Like the acceptance counters, a counter the server does not export is None (never 0), and one that is
NaN, infinite, negative or lower after the phase than before is None with the reason.

Token counts agreeing says no token was lost, not that each was stamped on time. The SDK client stamps
a chunk when the SDK yields it, and its transport stamps the read that completed the chunk
(``RequestRecord.chunk_read_times``): the difference is time the client spent before the chunk was
timed (the SDK's decoding, and the chunks of the same read handled before it). Its p99 over the
cell's measured chunks above ``LAG_LIMIT_MS``, or chunks sharing reads, mark the cell client-limited.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schemas.metrics import MetricsSnapshot
from ..schemas.request import RequestRecord
from ..schemas.row_latency import LAG_LIMIT_MS, SHARED_READ_LIMIT, TOLERANCE, ClientLag, TokenAgreement
from .acceptance import counter_deltas


@dataclass(frozen=True)
class GenerationWindow:
    """One phase's Δ of the server's generation-token counter, or why there is none: phases.jsonl's
    ``generation`` object (``to_dict``)."""

    server_generation_tokens: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, int | str | None]:
        return {"server_generation_tokens": self.server_generation_tokens, "error": self.error}


def generation_window(before: MetricsSnapshot, after: MetricsSnapshot, name: str | None) -> GenerationWindow:
    """One phase's Δ of the server's generation-token counter (stored in phases.jsonl), or why there is none."""
    if name is None:
        return GenerationWindow(error="the engine's launcher names no generation-token counter "
                                      "(metrics.counters.generation_tokens)")
    if not before.ok or not after.ok:
        return GenerationWindow(error=before.error or after.error)
    d, error = counter_deltas(before, after, {"tokens": name})
    if error:
        return GenerationWindow(error=error)
    if d["tokens"] is None:
        return GenerationWindow(error=f"/metrics has no {name}")
    return GenerationWindow(server_generation_tokens=int(d["tokens"]))


def client_tokens(records: Sequence[RequestRecord]) -> int:
    """Tokens the client counted: each request's output tokens, or, where a stream failed before its
    count settled, the tokens of the chunks that did arrive."""
    return sum(r.output_tokens if r.output_tokens is not None else sum(n for n in r.chunk_tokens if n > 0)
               for r in records)


def _window(window: object) -> tuple[int | None, str | None]:
    """A stored window's token count, or why there is none (phases.jsonl is read back on --resume: check it)."""
    if not isinstance(window, dict):
        return None, f"phases.jsonl: generation = {window!r:.40} is not an object"
    tokens, error = window.get("server_generation_tokens"), window.get("error")
    if tokens is None:
        return None, error if isinstance(error, str) and error else "not recorded for this phase"
    if type(tokens) is not int or tokens < 0:
        return None, f"phases.jsonl: server_generation_tokens = {tokens!r:.40} is not a token count"
    return tokens, None


def _agree(client: int, server: int) -> bool:
    return client == server or (server > 0 and abs(client / server - 1) <= TOLERANCE)


def token_agreement(windows: Sequence[object], client: Sequence[int]) -> TokenAgreement | None:
    """The cell's keys from its phases' windows (``generation`` as phases.jsonl holds it, checked here) and
    the client's count per phase (same order).

    ``client_server_token_ratio`` = Σ client tokens ÷ Σ Δserver generation tokens over the repeats;
    ``client_server_tokens_agree`` = every repeat within ``TOLERANCE``. None (no key at all) for phases
    recorded before specbench read the counter.
    """
    if not any(windows):
        return None
    read = [_window(w) for w in windows]
    missing = [why for tokens, why in read if tokens is None]
    if missing:
        return TokenAgreement(client_server_token_error=missing[0] if len(windows) == 1
                              else f"{len(missing)} of {len(windows)} repeats: {missing[0]}")
    server = [tokens for tokens, _ in read if tokens is not None]
    ratio, error = None, None
    if sum(server) > 0:
        ratio = sum(client) / sum(server)
    elif sum(client):
        error = f"the server's counter did not move while the client counted {sum(client)} tokens"
    return TokenAgreement(server_generation_tokens=sum(server), client_server_token_ratio=ratio,
                          client_server_tokens_agree=all(_agree(c, s) for c, s in zip(client, server)),
                          client_server_token_error=error)


def client_lag(records: Sequence[RequestRecord]) -> ClientLag | None:
    """``client_lag_p99_ms`` (chunk time − its read time, p99 over the cell's chunks) and ``client_limited``:
    that p99 above ``LAG_LIMIT_MS``, or more than ``SHARED_READ_LIMIT`` of the chunks in the same read as
    the one before (the SDK read them a server step or more late: the wait before a read has no stamp).
    None (no key at all) for clients without read stamps (their chunk times are their reads). A record whose
    read stamps do not pair with its chunks (a file edited by hand) is left out."""
    paired = [rec.chunk_read_times for rec in records if rec.ok and rec.chunk_read_times is not None
              and len(rec.chunk_read_times) == len(rec.chunk_times)]
    lags = [t - r for rec in records if rec.ok and rec.chunk_read_times is not None
            and len(rec.chunk_read_times) == len(rec.chunk_times)
            for t, r in zip(rec.chunk_times, rec.chunk_read_times)]
    if not lags:
        return None
    p99 = float(np.percentile(np.asarray(lags, dtype=np.float64), 99)) * 1e3
    gaps = sum(len(reads) - 1 for reads in paired)
    shared = sum(1 for reads in paired for a, b in zip(reads, reads[1:]) if a == b)
    return ClientLag(client_lag_p99_ms=p99, client_limited=p99 > LAG_LIMIT_MS or (gaps > 0 and shared / gaps > SHARED_READ_LIMIT))
