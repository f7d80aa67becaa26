"""One streamed OpenAI-compatible request → ``RequestRecord``.

Timing is ``time.perf_counter()`` throughout. Over ``specbench.wire`` (plain http, the default)
a chunk's time is the kernel's receive time of the read that carried it; over aiohttp (TLS) it is
when the loop got the read. The client asks for cumulative usage on every chunk (vLLM's
``continuous_usage_stats``), so each chunk's token count is exact; when a server does not send
it, the record says which fallback was used.

Every value a server sends is checked where it enters: a wrong type fails that request
(``bad server value: …``), and token counts that contradict the stream are either replaced by a
source that agrees with it (``token_warning`` says so) or fail the request.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from .records import RequestRecord
from .secrets import split_credentials
from .wire import EncodedResponse, Target, Wire, WireError

#: what ``stream_request`` sends over: the socket client or an aiohttp session (TLS)
Transport = Wire | aiohttp.ClientSession

#: token-count sources, best first; reports name the one each request used
SOURCE_USAGE = "usage_continuous"
SOURCE_TOKEN_IDS = "token_ids"
SOURCE_USAGE_TOTAL = "usage_total_spread"
SOURCE_NONE = "none"

#: a bound on a count when the request set no max_tokens (no server streams this many in one answer)
TOKEN_CAP = 10_000_000
#: per-request stats keys (vLLM's metrics.speculative_decoding) that must be non-negative numbers
STATS_KEYS = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens",
              "mean_acceptance_length")


@dataclass(frozen=True)
class RequestSpec:
    """What to send; built once per suite so the hot path only fills in messages."""

    base_url: str
    model: str
    endpoint: str = "chat"
    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float | None = None
    ignore_eos: bool = False
    timeout_s: float = 600.0
    extra_body: dict[str, Any] | None = None
    api_key: str | None = None

    @property
    def url(self) -> str:
        path = "/v1/chat/completions" if self.endpoint == "chat" else "/v1/completions"
        return split_credentials(self.base_url)[0].rstrip("/") + path

    @functools.cached_property
    def target(self) -> Target:
        return Target.parse(self.url)

    def headers(self) -> dict[str, str]:
        return self._headers

    @functools.cached_property
    def _headers(self) -> dict[str, str]:
        # identity: a compressed stream's chunk times would be the compressor's, not the server's
        h = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        basic = split_credentials(self.base_url)[1]
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        elif basic:
            h["Authorization"] = basic
        return h

    @functools.cached_property
    def secrets(self) -> tuple[str, ...]:
        """What a server echoing the request back must not get into a file: the API key, or the
        URL's Basic credentials (the header's token and the password itself)."""
        found: list[str | None] = [self.api_key]
        basic = split_credentials(self.base_url)[1]
        if basic:
            token = basic.removeprefix("Basic ")
            found += [token, base64.b64decode(token).decode(errors="replace").partition(":")[2]]
        return tuple(sorted({s for s in found if s and len(s) >= 4}, key=len, reverse=True))

    @functools.cached_property
    def token_limit(self) -> int:
        """The most completion tokens an answer may have: the max_tokens sent (extra_body's wins)."""
        extra = self.extra_body or {}
        limit = extra.get("max_completion_tokens") or extra.get("max_tokens", self.max_tokens)
        return limit if type(limit) is int and 0 < limit <= TOKEN_CAP else TOKEN_CAP

    def payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.endpoint == "chat":
            body["messages"] = messages
        else:
            body["prompt"] = "\n\n".join(m["content"] for m in messages if m["role"] != "assistant")
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.extra_body:
            body.update(self.extra_body)
        return body


class _Stream:
    """Accumulates one response's chunks; kept separate from I/O so it can be fed recorded bytes."""

    def __init__(self, record: RequestRecord, endpoint: str, token_limit: int = TOKEN_CAP) -> None:
        self.record = record
        self.chat = endpoint == "chat"
        self.limit = token_limit
        self.parts: list[str] = []
        self.last_completion = 0
        self.saw_usage_per_chunk = False
        self.pending_unknown = 0
        self.token_ids: list[int] = []
        self.final_total: int | None = None  # completion_tokens of the usage-only chunk
        self.went_down: str | None = None  # where per-chunk cumulative usage decreased

    def feed(self, data: bytes, now: float) -> bool:
        """Handle one SSE ``data:`` payload; return False at ``[DONE]``."""
        if data == b"[DONE]":
            return False
        try:
            msg = orjson.loads(data)  # orjson.JSONDecodeError subclasses json.JSONDecodeError
        except orjson.JSONDecodeError:
            if not data:
                return True  # an empty data: line dispatches no event (SSE spec)
            raise
        if not isinstance(msg, dict):
            raise json.JSONDecodeError("not a JSON object", data.decode(errors="replace"), 0)
        try:
            return self._chunk(msg, now)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as err:  # right JSON, wrong shape
            raise json.JSONDecodeError(f"unexpected shape ({type(err).__name__}: {err})",
                                       data.decode(errors="replace"), 0) from None

    def _chunk(self, msg: dict[str, Any], now: float) -> bool:
        if "error" in msg and not msg.get("choices"):
            err = msg["error"]
            raise _ServerSaid(err.get("message", str(err)) if isinstance(err, dict) else str(err))
        usage = msg.get("usage")
        choices = msg.get("choices") or []
        rec = self.record
        stats = (msg.get("metrics") or {}).get("speculative_decoding") or msg.get("speculative_decoding_stats")
        if stats:
            rec.spec_stats = _checked_stats(stats, "metrics.speculative_decoding")
        done = None
        if usage:
            prompt = usage.get("prompt_tokens")
            if prompt is not None:
                rec.prompt_tokens = prompt  # checked once, in finish()
            done = usage.get("completion_tokens")
            if done is not None and (type(done) is not int or done < 0):
                raise BadValue(f"usage.completion_tokens = {done!r} is not a token count")
        if not choices:
            if done is not None:
                self.final_total = done
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
            n = done - self.last_completion
            if n < 0 and self.went_down is None:
                self.went_down = f"{self.last_completion} → {done} at content chunk {len(rec.chunk_times)}"
            self.last_completion = done
            self.saw_usage_per_chunk = True
        elif ids:
            n = len(ids)
        if ids:
            self.token_ids.extend(ids)
        finish = choice.get("finish_reason")
        if finish:
            if type(finish) is not str:
                raise BadValue(f"finish_reason = {finish!r:.60} is not a string")
            rec.finish_reason = finish
        if choice.get("speculative_decoding_stats"):
            rec.spec_stats = _checked_stats(choice["speculative_decoding_stats"], "speculative_decoding_stats")
        if text or (n or 0) > 0:
            rec.chunk_times.append(now)
            rec.chunk_tokens.append(n if n is not None else -1)
            if n is None:
                self.pending_unknown += 1
            self.parts.append(text)
        return True

    def finish(self) -> RequestRecord:
        """Settle the token counts: the best source that agrees with the stream, flagged when the
        server's other numbers contradict it; no agreeing source fails the request."""
        rec = self.record
        rec.text = "".join(self.parts)
        prompt = rec.prompt_tokens
        if prompt is not None and (type(prompt) is not int or not 0 <= prompt <= TOKEN_CAP):
            return self._fail(f"bad server value: usage.prompt_tokens = {prompt!r:.40} is not a token count")
        if self.token_ids:
            if set(map(type, self.token_ids)) != {int}:
                return self._fail("bad server value: token_ids holds something other than integers")
            rec.output_token_ids = self.token_ids
        final = self.final_total
        if not rec.chunk_times:
            rec.token_source = SOURCE_NONE
            rec.output_tokens = final if final is not None else (self.last_completion if self.saw_usage_per_chunk else None)
            return rec
        if self.pending_unknown == 0 and self.saw_usage_per_chunk:
            bad = (f"per-chunk usage went down: {self.went_down}" if self.went_down else
                   f"per-chunk usage exceeds max_tokens: {self.last_completion} > {self.limit}"
                   if self.last_completion > self.limit else None)
            if bad is None:
                rec.token_source, rec.output_tokens = SOURCE_USAGE, self.last_completion
                if final is not None and final != self.last_completion:
                    rec.token_warning = (f"final usage disagrees with per-chunk usage: final {final}, "
                                         f"per-chunk {self.last_completion}; used the per-chunk counts")
                return rec
            rec.token_warning = bad + "; " + ("used the final total" if final is not None else "used the last count")
            return self._total_only(final if final is not None else self.last_completion)
        if self.pending_unknown == 0:
            streamed = sum(rec.chunk_tokens)
            if streamed <= self.limit:
                rec.token_source, rec.output_tokens = SOURCE_TOKEN_IDS, streamed
                if final is not None and final != streamed:
                    rec.token_warning = (f"final usage disagrees with the streamed token ids: final {final}, "
                                         f"ids {streamed}; used the token ids")
                return rec
            rec.token_warning = f"streamed token ids exceed max_tokens: {streamed} > {self.limit}; used the final total"
        return self._total_only(final if final is not None else (self.last_completion if self.saw_usage_per_chunk else None))

    def _total_only(self, total: int | None) -> RequestRecord:
        """Per-chunk counts unknown: keep a total that fits the stream; metrics spread it over the decode chunks."""
        rec = self.record
        rec.chunk_tokens = []
        if total is None:
            rec.token_source = SOURCE_NONE
            return rec
        chunks = len(rec.chunk_times)
        if total > self.limit:
            return self._fail(f"usage contradicts the stream: completion_tokens {total} > max_tokens {self.limit}")
        if total < chunks:
            return self._fail(f"usage contradicts the stream: completion_tokens {total} < {chunks} content chunks")
        rec.token_source, rec.output_tokens = SOURCE_USAGE_TOTAL, total
        return rec

    def _fail(self, why: str) -> RequestRecord:
        rec = self.record
        if rec.error is None:
            rec.error = why
        rec.output_tokens = rec.prompt_tokens = None
        rec.token_source = SOURCE_NONE
        return rec


class BadValue(Exception):
    """A server value of the wrong type or out of range: fails the request that carried it."""


def _checked_stats(stats: Any, where: str) -> dict[str, Any]:
    if not isinstance(stats, dict):
        raise BadValue(f"{where} = {stats!r:.60} is not an object")
    for key in STATS_KEYS:
        value = stats.get(key)
        if value is not None and (type(value) not in (int, float) or value < 0):
            raise BadValue(f"{where}.{key} = {value!r:.60} is not a non-negative number")
    accepted, drafted = stats.get("num_accepted_draft_tokens"), stats.get("num_draft_tokens")
    if accepted is not None and drafted is not None and accepted > drafted:  # an acceptance rate above 100 %
        raise BadValue(f"{where}.num_accepted_draft_tokens = {accepted!r} exceeds num_draft_tokens = {drafted!r}")
    return stats


def _stats_fit_the_stream(record: RequestRecord) -> None:
    """Each drafted step yields its accepted tokens plus one, so steps + accepted cannot exceed the
    answer's tokens by more than one step's k (max_tokens may cut the last step short); per-request
    stats that claim more are not this answer's and are set aside."""
    stats, tokens = record.spec_stats, record.output_tokens
    if not stats or tokens is None or record.error:
        return
    steps, accepted = stats.get("num_spec_steps"), stats.get("num_accepted_draft_tokens")
    drafted = stats.get("num_draft_tokens")
    if not (isinstance(steps, (int, float)) and isinstance(accepted, (int, float))):
        return
    k = drafted / steps if isinstance(drafted, (int, float)) and steps > 0 else 0
    if steps + accepted > tokens + k:
        record.spec_stats = None
        note = (f"per-request spec stats contradict the stream: {steps:g} steps + {accepted:g} accepted tokens "
                f"> {tokens} output tokens; not used")
        record.token_warning = f"{record.token_warning}; {note}" if record.token_warning else note


class _ServerSaid(Exception):
    pass


class _SseLines:
    """SSE ``data:`` payloads out of body pieces split anywhere; every line completed by a piece
    gets that piece's stamp. One splitter for both transports."""

    __slots__ = ("on_data", "rest")

    def __init__(self, on_data: Callable[[bytes, float], bool]) -> None:
        self.on_data, self.rest = on_data, b""

    def feed(self, piece: bytes, stamp: float) -> bool:
        """False once ``on_data`` says the stream is done ([DONE])."""
        lines = (self.rest + piece if self.rest else piece).split(b"\n")
        self.rest = lines.pop()
        on_data = self.on_data
        for line in lines:
            if line[:5] == b"data:" and not on_data(line[5:].strip(), stamp):
                return False
        return True

    def end(self, stamp: float) -> None:
        """The body ended without a final newline: its last line still counts."""
        if self.rest[:5] == b"data:":
            self.on_data(self.rest[5:].strip(), stamp)


def open_transport(base_url: str, kind: str = "auto") -> Transport:
    """The client for a server: the kernel-stamped socket client for http://, aiohttp for https://
    (or when ``kind`` is "aiohttp"). Close it with ``await close_transport(t)``."""
    if kind == "socket" or (kind == "auto" and base_url.startswith("http://")):
        return Wire()
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=None))


async def close_transport(transport: Transport) -> None:
    if isinstance(transport, Wire):
        transport.close()
    else:
        await transport.close()


def transport_clock(transport: Transport) -> str:
    """How chunk times were taken, for meta.json and the report's notes."""
    if not isinstance(transport, Wire):
        return "event-loop read time (perf_counter, aiohttp)"
    if transport.loop_stamped_reads:
        return f"{transport.clock}; {transport.loop_stamped_reads} reads had no kernel stamp and got the loop's time"
    return transport.clock


async def stream_request(
    transport: Transport,
    spec: RequestSpec,
    messages: list[dict[str, str]],
    record: RequestRecord,
) -> RequestRecord:
    """Send one streamed request; never raises for request-level failures (they go in ``record.error``)."""
    stream = _Stream(record, spec.endpoint, spec.token_limit)
    body = orjson.dumps(spec.payload(messages))
    try:
        async with asyncio.timeout(spec.timeout_s):
            if isinstance(transport, Wire):
                await _over_wire(transport, spec, body, stream)
            else:
                await _over_aiohttp(transport, spec, body, stream)
        if not record.chunk_times and record.error is None:
            record.error = "no content chunk received"
    except TimeoutError:
        record.error = f"timeout after {spec.timeout_s:g} s"
    except _ServerSaid as err:
        record.error = f"server error in stream: {err}"
    except BadValue as err:
        record.error = f"bad server value: {err}"
    except EncodedResponse as err:
        record.error = str(err)
    except json.JSONDecodeError as err:
        record.error = f"malformed SSE data: {err.msg}"
    except (aiohttp.ClientError, WireError) as err:
        record.error = f"{type(err).__name__}: {err}"
    except ConnectionError as err:
        record.error = f"{type(err).__name__}: {err}"
    stream.finish()
    _stats_fit_the_stream(record)
    if spec.secrets:  # a server may echo the request's headers back, into any field: the key goes in no file
        for name in ("error", "text", "finish_reason", "token_warning", "spec_stats"):
            setattr(record, name, _without(getattr(record, name), spec.secrets))
    return record


def _without(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with each of ``secrets`` masked in every string it holds."""
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {_without(k, secrets): _without(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, secrets) for v in value]
    return value


def _http_error(status: int, detail: str, retry: str | None, secrets: tuple[str, ...]) -> str:
    detail = _without(detail, secrets)  # before the cut, which could leave a secret's head
    detail = detail[:200].replace("\n", " ")
    return f"HTTP {status}" + (f" (retry-after {retry})" if retry else "") + (f": {detail}" if detail else "")


async def _over_wire(wire: Wire, spec: RequestSpec, body: bytes, stream: _Stream) -> None:
    def sent(t: float) -> None:
        stream.record.send_time = t

    sse = _SseLines(stream.feed)
    resp = await wire.post_stream(spec.target, body, spec.headers(), sse.feed, sse.end, sent)
    if resp.status != 200:
        body = resp.error_body
        if resp.headers.get("content-encoding", "").lower() == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError):
                body = b"(gzip-encoded body)"
        stream.record.error = _http_error(resp.status, body.decode(errors="replace"),
                                          resp.headers.get("retry-after"), spec.secrets)


async def _over_aiohttp(session: aiohttp.ClientSession, spec: RequestSpec, body: bytes, stream: _Stream) -> None:
    perf = time.perf_counter
    record = stream.record
    record.send_time = perf()
    async with session.post(spec.url, data=body, headers=spec.headers()) as resp:
        if resp.status != 200:
            record.error = _http_error(resp.status, (await resp.read()).decode(errors="replace"),
                                       resp.headers.get("Retry-After"), spec.secrets)
            return
        encoding = resp.headers.get("Content-Encoding")
        if encoding and encoding.lower() != "identity":
            raise EncodedResponse(encoding)
        # One await per socket read, not per line: every line of a read is stamped with the time
        # the read was delivered.
        sse = _SseLines(stream.feed)
        async for data in resp.content.iter_any():
            if not sse.feed(data, perf()):
                return
        sse.end(perf())
