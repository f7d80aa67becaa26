"""One streamed OpenAI-compatible request → ``RequestRecord``.

Timing is ``time.perf_counter()`` throughout. Over ``specbench.wire`` (plain http, the default)
a chunk's time is the kernel's receive time of the read that carried it; over aiohttp (TLS) it is
when the loop got the read. The client asks for cumulative usage on every chunk (vLLM's
``continuous_usage_stats``), so each chunk's token count is exact; when a server does not send
it, the record says which fallback was used.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from .records import RequestRecord
from .wire import Target, Wire, WireError

#: what ``stream_request`` sends over: the socket client or an aiohttp session (TLS)
Transport = Wire | aiohttp.ClientSession

#: token-count sources, best first; reports name the one each request used
SOURCE_USAGE = "usage_continuous"
SOURCE_TOKEN_IDS = "token_ids"
SOURCE_USAGE_TOTAL = "usage_total_spread"
SOURCE_NONE = "none"


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
        return self.base_url.rstrip("/") + path

    @functools.cached_property
    def target(self) -> Target:
        return Target.parse(self.url)

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

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

    def __init__(self, record: RequestRecord, endpoint: str) -> None:
        self.record = record
        self.chat = endpoint == "chat"
        self.parts: list[str] = []
        self.last_completion = 0
        self.saw_usage_per_chunk = False
        self.pending_unknown = 0
        self.token_ids: list[int] = []

    def feed(self, data: bytes, now: float) -> bool:
        """Handle one SSE ``data:`` payload; return False at ``[DONE]``."""
        if data == b"[DONE]":
            return False
        msg = orjson.loads(data)  # orjson.JSONDecodeError subclasses json.JSONDecodeError
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
            rec.spec_stats = stats
        if usage:
            if usage.get("prompt_tokens") is not None:
                rec.prompt_tokens = usage["prompt_tokens"]
        if not choices:
            if usage and usage.get("completion_tokens") is not None:
                rec.output_tokens = usage["completion_tokens"]
            return True
        choice = choices[0]
        if self.chat:
            delta = choice.get("delta") or {}
            text = (delta.get("content") or "") + (delta.get("reasoning_content") or delta.get("reasoning") or "")
        else:
            text = choice.get("text") or ""
        ids = choice.get("token_ids") or (choice.get("delta") or {}).get("token_ids")
        n: int | None = None
        if usage and usage.get("completion_tokens") is not None:
            n = usage["completion_tokens"] - self.last_completion
            self.last_completion = usage["completion_tokens"]
            self.saw_usage_per_chunk = True
        elif ids:
            n = len(ids)
        if ids:
            self.token_ids.extend(ids)
        if choice.get("finish_reason"):
            rec.finish_reason = choice["finish_reason"]
        if choice.get("speculative_decoding_stats"):
            rec.spec_stats = choice["speculative_decoding_stats"]
        if text or (n or 0) > 0:
            rec.chunk_times.append(now)
            rec.chunk_tokens.append(n if n is not None else -1)
            if n is None:
                self.pending_unknown += 1
            self.parts.append(text)
        return True

    def finish(self) -> RequestRecord:
        rec = self.record
        rec.text = "".join(self.parts)
        if self.token_ids:
            rec.output_token_ids = self.token_ids
        if rec.output_tokens is None and self.saw_usage_per_chunk:
            rec.output_tokens = self.last_completion
        if not rec.chunk_times:
            rec.token_source = SOURCE_NONE
        elif self.pending_unknown == 0:
            rec.token_source = SOURCE_USAGE if self.saw_usage_per_chunk else SOURCE_TOKEN_IDS
            if rec.output_tokens is None:
                rec.output_tokens = sum(rec.chunk_tokens)
        else:
            # Per-chunk counts unknown: keep the final usage total and let metrics spread it evenly.
            rec.chunk_tokens = []
            rec.token_source = SOURCE_USAGE_TOTAL if rec.output_tokens is not None else SOURCE_NONE
        return rec


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
    stream = _Stream(record, spec.endpoint)
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
    except json.JSONDecodeError as err:
        record.error = f"malformed SSE data: {err.msg}"
    except (aiohttp.ClientError, WireError) as err:
        record.error = f"{type(err).__name__}: {err}"
    except ConnectionError as err:
        record.error = f"{type(err).__name__}: {err}"
    return stream.finish()


def _http_error(status: int, detail: str, retry: str | None) -> str:
    detail = detail[:200].replace("\n", " ")
    return f"HTTP {status}" + (f" (retry-after {retry})" if retry else "") + (f": {detail}" if detail else "")


async def _over_wire(wire: Wire, spec: RequestSpec, body: bytes, stream: _Stream) -> None:
    def sent(t: float) -> None:
        stream.record.send_time = t

    sse = _SseLines(stream.feed)
    resp = await wire.post_stream(spec.target, body, spec.headers(), sse.feed, sse.end, sent)
    if resp.status != 200:
        stream.record.error = _http_error(resp.status, resp.error_body.decode(errors="replace"),
                                          resp.headers.get("retry-after"))


async def _over_aiohttp(session: aiohttp.ClientSession, spec: RequestSpec, body: bytes, stream: _Stream) -> None:
    perf = time.perf_counter
    record = stream.record
    record.send_time = perf()
    async with session.post(spec.url, data=body, headers=spec.headers()) as resp:
        if resp.status != 200:
            record.error = _http_error(resp.status, (await resp.read()).decode(errors="replace"),
                                       resp.headers.get("Retry-After"))
            return
        # One await per socket read, not per line: every line of a read is stamped with the time
        # the read was delivered.
        sse = _SseLines(stream.feed)
        async for data in resp.content.iter_any():
            if not sse.feed(data, perf()):
                return
        sse.end(perf())
