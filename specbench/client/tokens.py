"""Per-request token accounting, once a stream ended: which source's counts to trust (per-chunk
usage, streamed token ids, or a final total spread over the chunks), checked against the stream;
the record names the source used and why another was set aside."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..schemas.request import RequestRecord
from .checks import TOKEN_CAP

if TYPE_CHECKING:
    from .stream import ResponseStream

#: token-count sources, best first; reports name the one each request used
SOURCE_USAGE = "usage_continuous"
SOURCE_TOKEN_IDS = "token_ids"
SOURCE_USAGE_TOTAL = "usage_total_spread"
SOURCE_NONE = "none"


def settle(stream: ResponseStream) -> RequestRecord:
    """Settle the token counts: the best source that agrees with the stream, flagged when the
    server's other numbers contradict it; no agreeing source fails the request. Then the cached
    prompt tokens the usage reported (``cached_prompt``)."""
    rec = _counts(stream)
    if rec.error is None and stream.cached is not None:
        cached_prompt(rec, stream.cached[0])
    return rec


def cached_prompt(rec: RequestRecord, cached: object) -> None:
    """``usage.prompt_tokens_details.cached_tokens``, checked: a count from 0 to the prompt's tokens. A bad one
    leaves ``cached_tokens`` null, said in ``token_warning``; the request's timing and tokens stand."""
    where = "usage.prompt_tokens_details.cached_tokens"
    prompt = rec.prompt_tokens
    if type(cached) is not int or not 0 <= cached <= TOKEN_CAP:
        why = f"{where} = {cached!r:.40} is not a token count"
    elif prompt is not None and cached > prompt:
        why = f"{where} = {cached} exceeds usage.prompt_tokens = {prompt}"
    else:
        rec.cached_tokens = cached
        return
    note = f"bad server value: {why}; cached_tokens left null"
    rec.token_warning = f"{rec.token_warning}; {note}" if rec.token_warning else note


def _counts(stream: ResponseStream) -> RequestRecord:
    rec = stream.record
    rec.text = "".join(stream.parts)
    prompt = rec.prompt_tokens
    if prompt is not None and (type(prompt) is not int or not 0 <= prompt <= TOKEN_CAP):
        return _fail(stream, f"bad server value: usage.prompt_tokens = {prompt!r:.40} is not a token count")
    if stream.token_ids:
        if set(map(type, stream.token_ids)) != {int}:
            return _fail(stream, "bad server value: token_ids holds something other than integers")
        rec.output_token_ids = stream.token_ids
    final = stream.final_total
    if not rec.chunk_times:
        rec.token_source = SOURCE_NONE
        rec.output_tokens = final if final is not None else (stream.last_completion if stream.saw_usage_per_chunk else None)
        return rec
    if stream.pending_unknown == 0 and stream.saw_usage_per_chunk:
        bad = (f"per-chunk usage went down: {stream.went_down}" if stream.went_down else
               f"per-chunk usage exceeds max_tokens: {stream.last_completion} > {stream.limit}"
               if stream.last_completion > stream.limit else None)
        if bad is None:
            rec.token_source, rec.output_tokens = SOURCE_USAGE, stream.last_completion
            if final is not None and final != stream.last_completion:
                rec.token_warning = (f"final usage disagrees with per-chunk usage: final {final}, "
                                     f"per-chunk {stream.last_completion}; used the per-chunk counts")
            return rec
        rec.token_warning = bad + "; " + ("used the final total" if final is not None else "used the last count")
        return _total_only(stream, final if final is not None else stream.last_completion)
    if stream.pending_unknown == 0:
        streamed = sum(rec.chunk_tokens)
        if streamed <= stream.limit:
            rec.token_source, rec.output_tokens = SOURCE_TOKEN_IDS, streamed
            if final is not None and final != streamed:
                rec.token_warning = (f"final usage disagrees with the streamed token ids: final {final}, "
                                     f"ids {streamed}; used the token ids")
            return rec
        rec.token_warning = f"streamed token ids exceed max_tokens: {streamed} > {stream.limit}; used the final total"
    return _total_only(stream, final if final is not None else (stream.last_completion if stream.saw_usage_per_chunk else None))

def _total_only(stream: ResponseStream, total: int | None) -> RequestRecord:
    """Per-chunk counts unknown: keep a total that fits the stream; metrics spread it over the decode chunks."""
    rec = stream.record
    rec.chunk_tokens = []
    if total is None:
        rec.token_source = SOURCE_NONE
        return rec
    chunks = len(rec.chunk_times)
    if total > stream.limit:
        return _fail(stream, f"usage contradicts the stream: completion_tokens {total} > max_tokens {stream.limit}")
    if total < chunks:
        return _fail(stream, f"usage contradicts the stream: completion_tokens {total} < {chunks} content chunks")
    rec.token_source, rec.output_tokens = SOURCE_USAGE_TOTAL, total
    return rec

def _fail(stream: ResponseStream, why: str) -> RequestRecord:
    rec = stream.record
    if rec.error is None:
        rec.error = why
    rec.output_tokens = rec.prompt_tokens = None
    rec.token_source = SOURCE_NONE
    return rec
