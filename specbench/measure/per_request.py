"""Acceptance per request, and which requests speculation made slower than the baseline's.

A request's acceptance length is tokens per target step: from vLLM's per-request
``speculative_decoding`` stats when the server returned them for every request of the cell
(1 + accepted ÷ spec steps: only the steps that carried a draft), else from the stream's chunk
sizes (decode tokens ÷ decode chunks, every decode step, the prefill chunk left out; not computed
when a request only had a final usage total). One source per cell, named in
``request_acceptance_source``.

Means: request-weighted (each request counts once) and token-weighted (Σ tᵢ·ALᵢ ÷ Σ tᵢ: the
acceptance the average token saw), tᵢ = the request's decode tokens, its output tokens after the
first (prefill) chunk, whichever source gave ALᵢ: the weight is the answer's length, never the
tokens of drafted steps only, which grow with acceptance itself. They differ when long answers
accept better or worse than short ones. (The pooled Σ tokens ÷ Σ steps is
``stream_mean_acceptance_length``.)

From chunk sizes, a chunk is taken as one engine step; an engine that merged steps into one chunk
makes each length too high by an amount no single request shows. Where the cell shows merging
(a chunk of more than k+1 tokens, or the stream seeing fewer steps than the server's counters
imply), ``request_acceptance_warning`` says so beside the numbers.

Slower than the baseline: paired by prompt, turn and repeat, a request is slower when its end-to-end
time per output token (latency ÷ output tokens) exceeds the baseline's on the same prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from ..schemas.notes import Note, NoteCode
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..schemas.row_acceptance import RequestAcceptance
from ..schemas.row_baseline import SlowerShare
from .acceptance import decode_steps

SOURCE_STATS = "vLLM per-request speculative_decoding stats (drafted steps only)"
SOURCE_STREAM = "stream chunk sizes (decode tokens ÷ decode chunks)"


def _real(v: Any) -> TypeGuard[int | float]:
    """An int or float as JSON gives them; a bool is not a count."""
    return type(v) in (int, float)


def _stats(rec: RequestRecord) -> tuple[float, float] | None:
    s = rec.spec_stats if isinstance(rec.spec_stats, dict) else None
    if not s:
        return None
    steps, accepted = s.get("num_spec_steps"), s.get("num_accepted_draft_tokens")
    if not _real(steps) or not _real(accepted) or steps <= 0 or accepted < 0:
        return None
    return float(steps), float(accepted)


def decode_tokens(rec: RequestRecord) -> float:
    """Output tokens after the first (prefill) chunk: Σ decode chunk sizes; output tokens − 1 where the
    stream had only a final usage total."""
    chunks = decode_steps(rec)
    return float(sum(chunks)) if chunks else float(max((rec.output_tokens or 0) - 1, 0))


def request_lengths(records: Sequence[RequestRecord]) -> tuple[list[tuple[RequestRecord, float, float]], str | None]:
    """(record, acceptance length, decode tokens) for each successful request, and the source used."""
    ok = [r for r in records if r.ok]
    if ok and all(_stats(r) for r in ok):
        out = []
        for r in ok:
            stats = _stats(r)
            assert stats is not None  # checked by all() above
            steps, accepted = stats
            out.append((r, 1 + accepted / steps, decode_tokens(r)))
        return out, SOURCE_STATS
    out = []
    for r in ok:
        chunks = decode_steps(r)
        if chunks:
            out.append((r, sum(chunks) / len(chunks), decode_tokens(r)))
    return out, (SOURCE_STREAM if out else None)


#: stream steps the server's counters may see beyond the stream's before the cell counts as merged
MERGED_STEPS_SHARE = 0.01


def _merged_evidence(row: ResultRow) -> tuple[int | None, float | None, int | None] | None:
    """Evidence that the engine merged steps into chunks, or None: a chunk of more than k+1 tokens (how many), or
    more accepted tokens in the stream than in the counters (each merge hides one step; max_tokens and EOS cuts only
    ever go the other way) by over ``MERGED_STEPS_SHARE`` of the stream's steps (how many fewer, of how many)."""
    if row.request_acceptance_source != SOURCE_STREAM:
        return None
    diff, steps = row.acceptance_tokens_diff, row.stream_steps
    fewer = diff is not None and bool(steps) and diff > MERGED_STEPS_SHARE * (steps or 0)
    if not row.stream_merged_chunks and not fewer:
        return None
    return row.stream_merged_chunks or None, diff if fewer else None, steps if fewer else None


def merged_steps(row: ResultRow) -> Note | None:
    """The note that the row's per-request lengths from chunk sizes are too high, with its evidence, or None."""
    found = _merged_evidence(row)
    if found is None:
        return None
    chunks, fewer, steps = found
    return Note.of(NoteCode.REQUEST_LENGTHS_MERGED, merged_chunks=chunks, fewer_steps=fewer, steps=steps)


def merged_steps_warning(row: ResultRow) -> str | None:
    """``request_acceptance_warning``: why the row's per-request lengths from chunk sizes are too high, or None (a
    results value from before notes were codes: it keeps its sentence; the note is ``merged_steps``)."""
    found_ = _merged_evidence(row)
    if found_ is None:
        return None
    chunks, diff, steps = found_
    found = []
    if chunks:
        found.append(f"{chunks} chunks carried more than k+1 tokens")
    if diff is not None and steps:
        found.append(f"the stream saw at least {diff:g} fewer steps than the server's counters imply "
                     f"({100 * diff / steps:.1f} % of its {steps} steps)")
    return ("from chunk sizes while the engine merged steps into one chunk: " + "; ".join(found) +
            "; a merged chunk counts as one step, so these lengths are too high")


def acceptance_summary(records: Sequence[RequestRecord]) -> RequestAcceptance:
    lengths, source = request_lengths(records)
    if not lengths:
        return RequestAcceptance(request_acceptance_source=source)
    al = np.array([a for _, a, _ in lengths])
    tokens = np.array([t for _, _, t in lengths])
    p10, p50, p90 = np.percentile(al, [10, 50, 90])
    return RequestAcceptance(
        request_acceptance_p10=float(p10), request_acceptance_p50=float(p50), request_acceptance_p90=float(p90),
        request_acceptance_mean=float(al.mean()),
        request_acceptance_token_weighted_mean=float((al * tokens).sum() / tokens.sum()) if tokens.sum() else None,
        request_acceptance_requests=len(lengths), request_acceptance_source=source)


def _time_per_token(r: RequestRecord) -> float | None:
    latency = r.latency
    return latency / r.output_tokens if latency is not None and r.output_tokens else None


def slower_share(pairs: Sequence[tuple[RequestRecord, RequestRecord]]) -> SlowerShare:
    """Share of paired prompts where the config's time per output token exceeded the baseline's."""
    times = [(_time_per_token(c), _time_per_token(b)) for c, b in pairs]
    both = [(tc, tb) for tc, tb in times if tc is not None and tb is not None]
    slower = sum(1 for tc, tb in both if tc > tb)
    return SlowerShare(slower / len(both) if both else None, len(both) or None)
