"""One response's SSE payloads → the fields of its ``RequestRecord``, kept apart from I/O so it can be
fed recorded bytes. Parsing a chunk is here (the hot path: once per chunk): what it says of the tokens goes
into a ``tokens.TokenTally``, which ``tokens.settle`` turns into the record's counts once the stream ended."""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..schemas.request import RequestRecord
from .checks import TOKEN_CAP, BadValue, ServerSaid, checked_stats
from .tokens import TokenTally, settle


class ResponseStream:
    """Accumulates one response's chunks; kept separate from I/O so it can be fed recorded bytes."""

    def __init__(self, record: RequestRecord, endpoint: str, token_limit: int = TOKEN_CAP) -> None:
        self.record = record
        self.chat = endpoint == "chat"
        self.tally = TokenTally(record, token_limit)

    def feed(self, data: bytes, now: float) -> bool:
        """Handle one SSE ``data:`` payload; return False at ``[DONE]``."""
        if data == b"[DONE]":
            self.record.end_time = now
            return False
        try:
            msg = orjson.loads(data)  # orjson.JSONDecodeError subclasses json.JSONDecodeError
        except orjson.JSONDecodeError:
            if not data:
                return True  # an empty data: line dispatches no event (SSE spec)
            raise
        if not isinstance(msg, dict):
            raise json.JSONDecodeError("not a JSON object", data.decode(errors="replace"), 0)
        return self.feed_object(msg, now)

    def feed_object(self, msg: dict[str, Any], now: float) -> bool:
        """Handle one chunk already parsed (the SDK transport's ``chunk.to_dict()``): the same checks."""
        try:
            return self._chunk(msg, now)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as err:  # right JSON, wrong shape
            raise json.JSONDecodeError(f"unexpected shape ({type(err).__name__}: {err})", repr(msg)[:200], 0) from None

    def _chunk(self, msg: dict[str, Any], now: float) -> bool:
        if "error" in msg and not msg.get("choices"):
            err = msg["error"]
            raise ServerSaid(err.get("message", str(err)) if isinstance(err, dict) else str(err))
        usage = msg.get("usage")
        choices = msg.get("choices") or []
        rec, tally = self.record, self.tally
        stats = (msg.get("metrics") or {}).get("speculative_decoding") or msg.get("speculative_decoding_stats")
        if stats:
            rec.spec_stats = checked_stats(stats, "metrics.speculative_decoding")
        done = None
        if usage:
            prompt = usage.get("prompt_tokens")
            if prompt is not None:
                rec.prompt_tokens = prompt  # checked once, in finish()
            details = usage.get("prompt_tokens_details")
            if details is not None:  # vLLM: the final usage chunk; checked once, in finish()
                cached = details.get("cached_tokens") if isinstance(details, dict) else details
                if cached is not None:
                    self.tally.cached = (cached,)
            done = usage.get("completion_tokens")
            if done is not None and (type(done) is not int or done < 0):
                raise BadValue(f"usage.completion_tokens = {done!r} is not a token count")
        if not choices:
            if done is not None:
                tally.final_total = done
            return True
        choice = choices[0]
        if self.chat:
            delta = choice.get("delta") or {}
            text = (delta.get("content") or "") + (delta.get("reasoning_content") or delta.get("reasoning") or "")
        else:
            text = choice.get("text") or ""
            if type(text) is not str:
                raise BadValue(f"choices[0].text = {text!r:.60} is not a string")
        ids = choice.get("token_ids") or (choice.get("delta") or {}).get("token_ids")
        n: int | None = None
        if done is not None:
            n = done - tally.last_completion
            if n < 0 and tally.went_down is None:
                tally.went_down = f"{tally.last_completion} → {done} at content chunk {len(rec.chunk_times)}"
            tally.last_completion = done
            tally.saw_usage_per_chunk = True
        elif ids:
            n = len(ids)
        if ids:
            tally.token_ids.extend(ids)
        finish = choice.get("finish_reason")
        if finish:
            if type(finish) is not str:
                raise BadValue(f"finish_reason = {finish!r:.60} is not a string")
            rec.finish_reason = finish
        if choice.get("speculative_decoding_stats"):
            rec.spec_stats = checked_stats(choice["speculative_decoding_stats"], "speculative_decoding_stats")
        if text or (n or 0) > 0:
            rec.chunk_times.append(now)
            rec.chunk_tokens.append(n if n is not None else -1)
            if n is None:
                tally.pending_unknown += 1
            tally.parts.append(text)
        return True

    def end(self, now: float) -> None:
        """The body ended (without [DONE]) at ``now``: the request's end, unless [DONE] came first."""
        if self.record.end_time is None:
            self.record.end_time = now

    def finish(self) -> RequestRecord:
        """The record with its token counts settled (``tokens.settle``)."""
        return settle(self.tally)
