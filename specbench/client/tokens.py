"""Per-request token accounting: the ``TokenTally`` a stream fills chunk by chunk (``stream.ResponseStream``),
and, once the stream ended, which source's counts to trust (per-chunk usage, streamed token ids, or a final
total spread over the chunks), checked against the stream; the record names the source used and why another
was set aside."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..schemas.request import RequestRecord
from .checks import TOKEN_CAP

#: token-count sources, best first; reports name the one each request used
SOURCE_USAGE = "usage_continuous"
SOURCE_TOKEN_IDS = "token_ids"
SOURCE_USAGE_TOTAL = "usage_total_spread"
SOURCE_NONE = "none"


@dataclass(slots=True)
class TokenTally:
    """What one response's chunks said about its tokens, as the stream parser met them; ``settle`` decides."""

    record: RequestRecord
    limit: int = TOKEN_CAP  # the request's max_tokens: no count may exceed it
    parts: list[str] = field(default_factory=list)  # the text of each content chunk
    last_completion: int = 0  # the latest per-chunk cumulative usage
    saw_usage_per_chunk: bool = False
    pending_unknown: int = 0  # content chunks that carried no count
    token_ids: list[int] = field(default_factory=list)
    final_total: int | None = None  # completion_tokens of the usage-only chunk
    went_down: str | None = None  # where per-chunk cumulative usage decreased
    cached: tuple[object] | None = None  # usage.prompt_tokens_details.cached_tokens as sent, checked in settle


def settle(tally: TokenTally) -> RequestRecord:
    """Settle the token counts: the best source that agrees with the tally, flagged when the
    server's other numbers contradict it; no agreeing source fails the request. Then the cached
    prompt tokens the usage reported (``cached_prompt``)."""
    rec = _counts(tally)
    if rec.error is None and tally.cached is not None:
        cached_prompt(rec, tally.cached[0])
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


def _counts(tally: TokenTally) -> RequestRecord:
    rec = tally.record
    rec.text = "".join(tally.parts)
    prompt = rec.prompt_tokens
    if prompt is not None and (type(prompt) is not int or not 0 <= prompt <= TOKEN_CAP):
        return _fail(tally, f"bad server value: usage.prompt_tokens = {prompt!r:.40} is not a token count")
    if tally.token_ids:
        if set(map(type, tally.token_ids)) != {int}:
            return _fail(tally, "bad server value: token_ids holds something other than integers")
        rec.output_token_ids = tally.token_ids
    final = tally.final_total
    if not rec.chunk_times:
        rec.token_source = SOURCE_NONE
        rec.output_tokens = final if final is not None else (tally.last_completion if tally.saw_usage_per_chunk else None)
        return rec
    if tally.pending_unknown == 0 and tally.saw_usage_per_chunk:
        bad = (f"per-chunk usage went down: {tally.went_down}" if tally.went_down else
               f"per-chunk usage exceeds max_tokens: {tally.last_completion} > {tally.limit}"
               if tally.last_completion > tally.limit else None)
        if bad is None:
            rec.token_source, rec.output_tokens = SOURCE_USAGE, tally.last_completion
            if final is not None and final != tally.last_completion:
                rec.token_warning = (f"final usage disagrees with per-chunk usage: final {final}, "
                                     f"per-chunk {tally.last_completion}; used the per-chunk counts")
            return rec
        rec.token_warning = bad + "; " + ("used the final total" if final is not None else "used the last count")
        return _total_only(tally, final if final is not None else tally.last_completion)
    if tally.pending_unknown == 0:
        streamed = sum(rec.chunk_tokens)
        if streamed <= tally.limit:
            rec.token_source, rec.output_tokens = SOURCE_TOKEN_IDS, streamed
            if final is not None and final != streamed:
                rec.token_warning = (f"final usage disagrees with the streamed token ids: final {final}, "
                                     f"ids {streamed}; used the token ids")
            return rec
        rec.token_warning = f"streamed token ids exceed max_tokens: {streamed} > {tally.limit}; used the final total"
    return _total_only(tally, final if final is not None else (tally.last_completion if tally.saw_usage_per_chunk else None))

def _total_only(tally: TokenTally, total: int | None) -> RequestRecord:
    """Per-chunk counts unknown: keep a total that fits the stream; metrics spread it over the decode chunks."""
    rec = tally.record
    rec.chunk_tokens = []
    if total is None:
        rec.token_source = SOURCE_NONE
        return rec
    chunks = len(rec.chunk_times)
    if total > tally.limit:
        return _fail(tally, f"usage contradicts the tally: completion_tokens {total} > max_tokens {tally.limit}")
    if total < chunks:
        return _fail(tally, f"usage contradicts the tally: completion_tokens {total} < {chunks} content chunks")
    rec.token_source, rec.output_tokens = SOURCE_USAGE_TOTAL, total
    return rec

def _fail(tally: TokenTally, why: str) -> RequestRecord:
    rec = tally.record
    if rec.error is None:
        rec.error = why
    rec.output_tokens = rec.prompt_tokens = None
    rec.token_source = SOURCE_NONE
    return rec
