"""The transports (the kernel-stamped socket client, aiohttp for TLS, or the openai SDK: ``sdk``) and
``stream_request``: one streamed request over any of them, never raising for what a request can fail on."""

from __future__ import annotations

import asyncio
import gzip
import json
import time

import aiohttp
import openai
import orjson

from ..schemas.request import RequestRecord
from ..util.redact import mask_values
from .checks import BadValue, ServerSaid, stats_fit_the_stream
from .failures import ERROR_BODY_LIMIT, EncodedResponse, TooMuch, WireError, http_error
from .request import RequestSpec
from .sdk import Sdk, over_sdk, sdk_error
from .sse import SseLines
from .stream import ResponseStream
from .wire import Wire

#: what ``stream_request`` sends over: the socket client, an aiohttp session (TLS) or the openai SDK
Transport = Wire | aiohttp.ClientSession | Sdk


def open_transport(base_url: str, kind: str = "auto") -> Transport:
    """The client for a server: the kernel-stamped socket client for http://, aiohttp for https://
    (or when ``kind`` is "aiohttp"), the openai SDK when ``kind`` is "openai" (one ``AsyncOpenAI`` per
    server URL, made on first use). Close it with ``await close_transport(t)``."""
    if kind == "openai":
        return Sdk()
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
    if isinstance(transport, Sdk):
        return transport.clock
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
    stream = ResponseStream(record, spec.endpoint, spec.token_limit)
    try:
        async with asyncio.timeout(spec.timeout_s):
            if isinstance(transport, Wire):
                await _over_wire(transport, spec, orjson.dumps(spec.payload(messages).to_dict()), stream)
            elif isinstance(transport, Sdk):
                await over_sdk(transport, spec, messages, stream)
            else:
                await _over_aiohttp(transport, spec, orjson.dumps(spec.payload(messages).to_dict()), stream)
        if not record.chunk_times and record.error is None:
            record.error = "no content chunk received"
    except TimeoutError:
        record.error = f"timeout after {spec.timeout_s:g} s"
    except ServerSaid as err:
        record.error = f"server error in stream: {err}"
    except BadValue as err:
        record.error = f"bad server value: {err}"
    except (EncodedResponse, TooMuch) as err:
        record.error = str(err)
    except json.JSONDecodeError as err:
        record.error = f"malformed SSE data: {err.msg}"
    except (aiohttp.ClientError, WireError) as err:
        record.error = f"{type(err).__name__}: {err}"
    except ConnectionError as err:
        record.error = f"{type(err).__name__}: {err}"
    except openai.OpenAIError as err:
        record.error = sdk_error(err, spec)
    if record.end_time is None:  # the stream's end had no read stamp ([DONE] or the body's end): it failed
        record.end_time = time.perf_counter()
    stream.finish()
    stats_fit_the_stream(record)
    if spec.secrets:  # a server may echo the request's headers back, into any field: the key goes in no file
        for name in ("error", "text", "finish_reason", "token_warning", "spec_stats"):
            setattr(record, name, mask_values(getattr(record, name), spec.secrets))
    return record


async def _over_wire(wire: Wire, spec: RequestSpec, body: bytes, stream: ResponseStream) -> None:
    def sent(t: float) -> None:
        stream.record.send_time = t

    def ended(t: float) -> None:  # the body ended without [DONE]
        sse.end(t)
        stream.end(t)

    sse = SseLines(stream.feed)
    resp = await wire.post_stream(spec.target, body, spec.headers(), sse.feed, ended, sent)
    if resp.status != 200:
        body = resp.error_body
        if resp.headers.get("content-encoding", "").lower() == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError):
                body = b"(gzip-encoded body)"
        stream.record.error = http_error(resp.status, body.decode(errors="replace"),
                                          resp.headers.get("retry-after"), spec.secrets)


async def _over_aiohttp(session: aiohttp.ClientSession, spec: RequestSpec, body: bytes, stream: ResponseStream) -> None:
    perf = time.perf_counter
    record = stream.record
    record.send_time = perf()
    async with session.post(spec.url, data=body, headers=spec.headers()) as resp:
        if resp.status != 200:
            record.error = http_error(resp.status, (await _error_body(resp)).decode(errors="replace"),
                                       resp.headers.get("Retry-After"), spec.secrets)
            return
        encoding = resp.headers.get("Content-Encoding")
        if encoding and encoding.lower() != "identity":
            raise EncodedResponse(encoding)
        # One await per socket read, not per line: every line of a read is stamped with the time
        # the read was delivered.
        sse = SseLines(stream.feed)
        async for data in resp.content.iter_any():
            if not sse.feed(data, perf()):
                return
        now = perf()
        sse.end(now)
        stream.end(now)


async def _error_body(resp: aiohttp.ClientResponse) -> bytes:
    """The first ``ERROR_BODY_LIMIT`` bytes of a non-200 body, as the socket client keeps; the rest is not read."""
    body = b""
    while len(body) < ERROR_BODY_LIMIT:
        piece = await resp.content.read(ERROR_BODY_LIMIT - len(body))
        if not piece:
            break
        body += piece
    return body
