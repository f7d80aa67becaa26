"""Pure latency and throughput statistics over request records (milliseconds, numpy percentiles).

ITL is per token: a chunk that carries n tokens after a gap g adds n samples of g/n, because with
speculative decoding one chunk holds every token of a verification step. The raw per-chunk gaps
are kept as ``step_ms`` (what other tools call ITL).

When a server sends only a final usage total, the first content chunk still carries exactly the
prefill token, so the remaining tokens are spread over the decode chunks only: each request's
samples then sum to latency − TTFT over output tokens − 1, which keeps the pooled ITL mean exact;
only the percentiles are estimates on that path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schemas.request import RequestRecord
from ..schemas.row_latency import LatencyStats, SharedReads

PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Spread:
    """Mean and p50/p95/p99 of a sample, in ms; null (never 0) when there is no sample."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


def stats_ms(seconds: Sequence[float] | np.ndarray) -> Spread:
    """mean and p50/p95/p99 in ms of samples in seconds (numpy's linear percentiles)."""
    arr = np.asarray(seconds, dtype=float)
    if not arr.size:
        return Spread()
    p50, p95, p99 = (float(v * 1000) for v in np.percentile(arr, PERCENTILES))
    return Spread(float(arr.mean() * 1000), p50, p95, p99)


def chunk_token_counts(rec: RequestRecord) -> np.ndarray:
    """Tokens per content chunk; with only the request total known: 1 (prefill) for the first chunk,
    the rest spread over the decode chunks as evenly as whole tokens allow."""
    n = len(rec.chunk_times)
    if rec.chunk_tokens and len(rec.chunk_tokens) == n:
        return np.asarray(rec.chunk_tokens, dtype=float)
    counts = np.ones(n)
    total = rec.output_tokens
    if n > 1 and type(total) is int and total >= n:
        base, extra = divmod(total - 1, n - 1)
        counts[1:] = base
        counts[1:1 + extra] += 1
    return counts


def token_itl(rec: RequestRecord) -> np.ndarray:
    """Per-token inter-token latencies (s) of one request."""
    if len(rec.chunk_times) < 2:
        return np.empty(0)
    counts = chunk_token_counts(rec)
    keep = counts > 0  # a chunk with text but no new token: its time belongs to the next token-bearing chunk
    keep[0] = True
    gaps = np.diff(np.asarray(rec.chunk_times)[keep])
    tokens = counts[keep][1:]
    return np.repeat(gaps / tokens, tokens.astype(int))


def tpot(rec: RequestRecord) -> float | None:
    if not rec.ok or not rec.output_tokens or rec.output_tokens <= 1:
        return None
    assert rec.latency is not None and rec.ttft is not None  # ok: it has chunks
    return (rec.latency - rec.ttft) / (rec.output_tokens - 1)


def _reads(r: RequestRecord) -> list[float]:
    """Each chunk's read stamp: the openai SDK client's transport reads (``chunk_read_times``), else its time."""
    reads = r.chunk_read_times
    return reads if reads is not None and len(reads) == len(r.chunk_times) else r.chunk_times


def shared_reads(records: Sequence[RequestRecord]) -> SharedReads:
    """Content chunks stamped exactly like the chunk before them: they came in the same socket read
    (for the openai SDK client, the same read of its transport).

    Each read carries one stamp, so such a chunk reached the client together with the previous
    one: the client (or the network) was a whole step behind, or the server flushed two steps at
    once. Its gap reads as 0 and the previous gap as too long; a share above ~1 % means the ITL
    distribution is coarser than the server's real step times.
    """
    ok = [r for r in records if r.ok and len(r.chunk_times) > 1]
    gaps = sum(len(r.chunk_times) - 1 for r in ok)
    shared = sum(int(np.count_nonzero(np.diff(_reads(r)) == 0)) for r in ok)
    return SharedReads(shared, shared / gaps if gaps else None)


def latency_stats(records: Sequence[RequestRecord]) -> LatencyStats:
    ok = [r for r in records if r.ok]
    itl = np.concatenate([token_itl(r) for r in ok]) if ok else np.empty(0)
    steps = np.concatenate([np.diff(r.chunk_times) for r in ok if len(r.chunk_times) > 1] or [np.empty(0)])
    lat = stats_ms([r.latency for r in ok if r.latency is not None])
    ttft = stats_ms([r.ttft for r in ok if r.ttft is not None])
    it, tp = stats_ms(itl), stats_ms([t for t in (tpot(r) for r in ok) if t is not None])
    st = stats_ms(steps)
    return LatencyStats(lat.mean, lat.p50, lat.p95, lat.p99, ttft.mean, ttft.p50, ttft.p95, ttft.p99,
                        it.mean, it.p50, it.p95, it.p99, tp.mean, tp.p50, tp.p95, tp.p99, st.mean, st.p50, st.p95, st.p99)


@dataclass(frozen=True)
class Throughput:
    """Completed requests and their tokens over a wall time (``throughput``)."""

    requests: int
    output_tokens: int
    prompt_tokens: int | None
    request_throughput_rps: float | None
    output_throughput_tps: float | None
    duration_s: float


def throughput(records: Sequence[RequestRecord], wall_s: float) -> Throughput:
    """Σ output tokens and completed requests over the phase's wall time; failed requests add nothing."""
    ok = [r for r in records if r.ok]
    tokens = sum(r.output_tokens or 0 for r in ok)
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    return Throughput(requests=len(ok), output_tokens=tokens,
                      prompt_tokens=sum(prompt) if len(prompt) == len(ok) and ok else None,
                      request_throughput_rps=len(ok) / wall_s if wall_s > 0 and ok else None,
                      output_throughput_tps=tokens / wall_s if wall_s > 0 and ok else None, duration_s=wall_s)


def token_sources(records: Sequence[RequestRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        if r.ok:
            out[r.token_source] = out.get(r.token_source, 0) + 1
    return out
