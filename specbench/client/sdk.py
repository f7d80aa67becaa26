"""The official ``openai`` SDK as a transport (``load.client: openai``): what an SDK user's code sees.

Each chunk is stamped with ``time.perf_counter()`` when the SDK yields it, after its own SSE decoding
and model construction, so chunk times carry the SDK's per-chunk cost and any event-loop delay (the
socket client's kernel stamps carry neither). Every yielded chunk goes, as ``chunk.to_dict()``, through
the same ``ResponseStream`` checks and token settling as the other transports; the request body is
``RequestSpec.payload`` byte for byte (model, messages/prompt and stream as the SDK's own arguments,
the rest as ``extra_body``), with the same headers (identity encoding, the key or none).

The send stamp is taken where the socket client takes its own: after the SDK built the request and
the connection is open, just before the request's bytes are written (``StampedTransport``, through the
HTTP library's ``trace`` extension), so TTFT and latency do not include the SDK's request building.
Each socket read is stamped as it returns (``StampedStream``, under the HTTP library's connections).
Everything above it pulls lazily (the SDK's SSE decoder, the HTTP/1.1 parser: a read only when the
next event is not yet in hand), so the newest read stamp when the SDK yields a chunk is that of the
read which brought the chunk's last bytes: ``chunk_read_times``. Chunk time − read time is the time the
client held the chunk before timing it: the SDK's decoding, plus every chunk of the same read handled
before it (``measure.keepup.client_lag``; chunks of one read share its stamp, ``shared_read_chunks``).

The bounds of ``sse``/``failures`` hold here too: the response's byte stream is wrapped (an httpx
response hook) so an SSE line over ``LINE_LIMIT`` or a body over ``BODY_LIMIT`` fails the request
before the SDK buffers it, and a non-200 body is read to ``ERROR_BODY_LIMIT`` only. What the SDK path
cannot check: values the SDK coerces while building its models before specbench sees them (a
numeric string or a whole float in ``usage``, when the rest of ``usage`` is well-typed, arrives as an
int), and an empty ``data:`` line, which the SDK fails to parse instead of skipping (``malformed SSE
data: Expecting value``).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import openai

from .failures import ERROR_BODY_LIMIT, EncodedResponse, TooMuch, http_error
from .request import RequestBody, RequestSpec
from .sse import BODY_LIMIT, LINE_LIMIT
from .stream import ResponseStream

#: the HTTP library this openai version is built on (httpx, or httpx2 from openai 3 on), and its core
_http: Any = importlib.import_module(type(openai.DEFAULT_CONNECTION_LIMITS).__module__.partition(".")[0])
_core: Any = importlib.import_module(_http.__name__.replace("httpx", "httpcore"))

CLOCK = f"SDK yield time (perf_counter, openai {openai.__version__})"


class Stamps:
    """One request's clock at the transport: when its bytes went out, and when its newest socket read returned."""

    __slots__ = ("sent", "read")

    def __init__(self) -> None:
        self.sent: float | None = None
        self.read: float | None = None

    async def trace(self, event: str, info: Any) -> None:
        """The HTTP library's ``trace`` extension: called around each step of the exchange."""
        if event == "http11.send_request_headers.started":
            self.sent = time.perf_counter()


#: the stamps of the request this task is sending (the SDK sends in the caller's task)
_stamps: ContextVar[Stamps | None] = ContextVar("specbench_sdk_stamps", default=None)


class StampedStream(_core.AsyncNetworkStream):  # type: ignore[misc]  # the library is found at run time
    """A connection's socket stream; each read that returns stamps the reading request's ``Stamps``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = await self.inner.read(max_bytes, timeout)
        stamps = _stamps.get()
        if stamps is not None:
            stamps.read = time.perf_counter()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
        return StampedStream(await self.inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class StampedBackend(_core.AsyncNetworkBackend):  # type: ignore[misc]  # the library is found at run time
    """The connection pool's network backend, its streams stamped."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return StampedStream(await self.inner.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        return StampedStream(await self.inner.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class StampedTransport(_http.AsyncHTTPTransport):  # type: ignore[misc]  # the library is found at run time
    """The SDK's HTTP transport with the send stamp, the socket reads' stamps and the body's bounds added.
    A pool without a network backend to wrap (another HTTP library version) stamps no reads."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        pool = self._pool
        if hasattr(pool, "_network_backend"):
            pool._network_backend = StampedBackend(pool._network_backend)

    async def handle_async_request(self, request: Any) -> Any:
        stamps = _stamps.get()
        if stamps is not None:
            stamps.sent = time.perf_counter()  # kept if the library does not trace its write (HTTP/2, a proxy)
            request.extensions = {**request.extensions, "trace": stamps.trace}
        response = await super().handle_async_request(request)
        response.stream = BoundedBody(response.stream, response.status_code == 200)
        return response


class BoundedBody(_http.AsyncByteStream):  # type: ignore[misc]  # the library is found at run time
    """A response's raw bytes with the other transports' bounds: a 200 stream fails (``TooMuch``) at
    an over-long line or body; any other status is cut at ``ERROR_BODY_LIMIT`` (its message is in front)."""

    def __init__(self, inner: Any, ok: bool) -> None:
        self.inner, self.ok = inner, ok
        self.size = 0
        self.held = 0  # bytes of the line not ended yet

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self.inner:
            self.size += len(piece)
            if not self.ok:
                if self.size >= ERROR_BODY_LIMIT:
                    yield piece[: len(piece) - (self.size - ERROR_BODY_LIMIT)]
                    return
                yield piece
                continue
            if self.size > BODY_LIMIT:
                raise TooMuch("a response body", BODY_LIMIT)
            last = piece.rfind(b"\n")
            if last < 0:
                self.held += len(piece)
            elif self.held + piece.find(b"\n") > LINE_LIMIT or (
                    len(piece) > LINE_LIMIT and max(map(len, piece.split(b"\n"))) > LINE_LIMIT):
                raise TooMuch("an SSE line", LINE_LIMIT)
            else:
                self.held = len(piece) - last - 1
            if self.held > LINE_LIMIT:
                raise TooMuch("an SSE line", LINE_LIMIT)
            yield piece

    async def aclose(self) -> None:
        await self.inner.aclose()


class Sdk:
    """One ``openai.AsyncOpenAI`` per server URL (and key) for one load pass, made on first use: its
    pool unbounded (the SDK's default keeps 100 idle connections, so more streams would reconnect and
    count the connect in TTFT), no retries, the request's timeout."""

    clock = CLOCK

    def __init__(self) -> None:
        self.clients: dict[tuple[str, str | None, float], openai.AsyncOpenAI] = {}

    def client(self, spec: RequestSpec) -> openai.AsyncOpenAI:
        key = (spec.url.rpartition("/v1/")[0], spec.api_key, spec.timeout_s)
        if key not in self.clients:
            limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=None, max_keepalive_connections=None)
            http = openai.DefaultAsyncHttpxClient(transport=StampedTransport(limits=limits))
            # the key is never read from OPENAI_API_KEY: a placeholder when the suite has none, and no
            # Authorization header then (``headers``)
            self.clients[key] = openai.AsyncOpenAI(base_url=key[0] + "/v1", api_key=spec.api_key or "unused",
                                                   max_retries=0, timeout=spec.timeout_s, http_client=http)
        return self.clients[key]

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()
        self.clients.clear()


def headers(spec: RequestSpec) -> dict[str, str | openai.Omit]:
    """The other transports' headers; no Authorization, OpenAI-Organization or OpenAI-Project the SDK
    would otherwise take from the environment."""
    sent: dict[str, str | openai.Omit] = {"Authorization": openai.Omit(), "OpenAI-Organization": openai.Omit(),
                                          "OpenAI-Project": openai.Omit()}
    sent.update((k, v) for k, v in spec.headers().items() if k != "Content-Type")
    return sent


async def over_sdk(sdk: Sdk, spec: RequestSpec, messages: list[dict[str, str]], stream: ResponseStream) -> None:
    """One streamed request through the SDK; SDK exceptions propagate (``sdk_error`` names them)."""
    client = sdk.client(spec)
    body = spec.payload(messages)
    stream.record.send_time = time.perf_counter()  # a request that never reaches the transport keeps this one
    stamps = Stamps()
    token = _stamps.set(stamps)  # until the body's end: its reads happen in this task
    try:
        await _exchange(client, spec, body, stream, stamps)
    finally:
        _stamps.reset(token)


async def _exchange(client: openai.AsyncOpenAI, spec: RequestSpec, request: RequestBody, stream: ResponseStream,
                    stamps: Stamps) -> None:
    """The body's ``model`` and messages (or prompt) as the SDK's arguments, the rest of it as ``extra_body``:
    the JSON the other transports send."""
    perf = time.perf_counter
    record = stream.record
    body: dict[str, Any] = request.to_dict()
    model, _ = body.pop("model"), body.pop("stream")
    chunks: Any
    try:
        if spec.endpoint == "chat":
            chunks = await client.chat.completions.create(model=model, messages=body.pop("messages"), stream=True,
                                                          extra_body=body, extra_headers=headers(spec))
        else:
            chunks = await client.completions.create(model=model, prompt=body.pop("prompt"), stream=True,
                                                     extra_body=body, extra_headers=headers(spec))
    finally:
        if stamps.sent is not None:
            record.send_time = stamps.sent
    reads = record.chunk_read_times = []
    async with chunks:
        encoding = chunks.response.headers.get("content-encoding")
        if encoding and encoding.lower() != "identity":
            raise EncodedResponse(encoding)
        async for chunk in chunks:
            now = perf()
            if not isinstance(chunk, openai.BaseModel):  # JSON null, a list, a string: the SDK passes it on as it is
                raise json.JSONDecodeError("not a JSON object", repr(chunk)[:200], 0)
            before = len(record.chunk_times)
            stream.feed_object(chunk.to_dict(warnings=False), now)
            if len(record.chunk_times) > before:
                reads.append(now if stamps.read is None else stamps.read)
    stream.end(perf())
    if stamps.read is None:  # no read was stamped (an HTTP library whose pool could not be wrapped)
        record.chunk_read_times = None


def sdk_error(err: openai.OpenAIError, spec: RequestSpec) -> str:
    """An SDK exception as the one line the other transports write for the same failure."""
    if isinstance(err, openai.APIStatusError):
        response = err.response
        return http_error(response.status_code, response.text, response.headers.get("retry-after"), spec.secrets)
    if isinstance(err, openai.APITimeoutError):
        return f"timeout after {spec.timeout_s:g} s"
    if isinstance(err, openai.APIConnectionError):  # names host:port and the HTTP library's own error
        url, cause = err.request.url, err.__cause__
        return f"APIConnectionError: {url.host}:{url.port}: " + (f"{type(cause).__name__}: {cause}" if cause else str(err))
    if isinstance(err, openai.APIError):  # an error object in the stream
        return f"server error in stream: {err.message}"
    return f"{type(err).__name__}: {err}"
