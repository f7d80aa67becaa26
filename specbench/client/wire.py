"""Streamed HTTP/1.1 POSTs over plain sockets, each read stamped by the kernel.

A client that stamps chunks when its event loop gets round to them measures its own backlog as
server latency. Here every ``recvmsg`` carries the kernel's receive time of the newest bytes it
returns (``SO_TIMESTAMPNS``), so a chunk's time is when it reached this machine's socket, however
busy the loop is, as long as each connection is read within one inter-chunk gap (later, several
chunks share the newest one's stamp; ``shared_read_share`` in the results counts them). The reader runs
as a loop callback (no task switch per chunk) and hands each piece of the body, with its stamp,
straight to the consumer. ``httptools`` (llhttp) parses status, headers and chunked framing.

Plain ``http://`` only; ``specbench.client`` uses aiohttp for TLS or where the kernel gives no
stamps (then the stamp is the loop's ``perf_counter`` at read time, and ``Wire.clock`` says so).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from .failures import ERROR_BODY_LIMIT, HEAD_LIMIT, EncodedResponse, TooMuch, WireError

#: Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS); Python's socket module does not export it
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
#: ancillary buffer for one SCM_TIMESTAMPNS (a struct timespec) per recvmsg
STAMP_SPACE = socket.CMSG_SPACE(16)
_TIMESPEC = struct.Struct("@qq")
_AFTER_DONE_S = 2.0
_STALE_S = 0.05
_READ = 1 << 16  # below malloc's mmap threshold (128 KiB): a bigger buffer costs an mmap + munmap per read

CLOCK_KERNEL = "kernel receive time (SO_TIMESTAMPNS)"
CLOCK_LOOP = "event-loop read time (perf_counter)"


def kernel_stamp(anc: list[tuple[int, int, bytes]]) -> float:
    """The kernel's receive time in a ``recvmsg`` ancillary list (CLOCK_REALTIME), on the
    ``perf_counter`` clock: offset by both clocks read now, so NTP steps cannot skew it."""
    sec, ns = _TIMESPEC.unpack_from(anc[0][2])
    return time.perf_counter() - (time.time_ns() - sec * 1_000_000_000 - ns) * 1e-9


@dataclass
class Response:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    error_body: bytes = b""


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url}: the socket client speaks plain http:// only")
        return cls(parts.hostname, parts.port or 80, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))


def parser_failure(err: Exception, key: tuple[str, int]) -> BaseException:
    """What a parser error means: the consumer's own exception raised from a callback, else one line naming the server."""
    if isinstance(err, httptools.HttpParserUpgrade):
        return WireError(f"{key[0]}:{key[1]}: unexpected protocol upgrade")
    cause = err.__cause__ or err.__context__
    if cause is not None and not isinstance(cause, httptools.HttpParserError):
        return cause
    return WireError(f"{key[0]}:{key[1]}: malformed HTTP response: {err}")


class _Exchange:
    """One request's response, parsed as bytes arrive; a loop callback, never a task."""

    __slots__ = ("wire", "sock", "fd", "key", "parser", "response", "consume", "on_end", "done", "stamp",
                 "received", "feeding", "error", "ended", "keep_alive", "finished")

    def __init__(self, wire: Wire, sock: socket.socket, key: tuple[str, int],
                 on_body: Callable[[bytes, float], bool], on_end: Callable[[float], None] | None,
                 done: asyncio.Future) -> None:
        self.wire, self.sock, self.fd, self.key = wire, sock, sock.fileno(), key
        self.parser = httptools.HttpResponseParser(self)
        self.response = Response()
        self.consume, self.on_end, self.done = on_body, on_end, done
        self.stamp = 0.0
        self.received = 0
        self.feeding = True  # until the consumer says it has what it wants ([DONE])
        self.error: BaseException | None = None
        self.ended = False  # the HTTP message is complete
        self.keep_alive = False
        self.finished = False  # socket handed back or closed

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.response.status = status = self.parser.get_status_code()
        encoding = self.response.headers.get("content-encoding")
        if status == 200 and encoding and encoding.lower() != "identity":
            self.error = EncodedResponse(encoding)

    def on_body(self, body: bytes) -> None:
        if self.response.status != 200:
            room = ERROR_BODY_LIMIT - len(self.response.error_body)
            self.response.error_body += body[:room]
            if len(body) >= room:  # enough to say what went wrong: the rest is not read (see readable)
                self.feeding = False
            return
        if not self.feeding or self.error is not None:
            return
        try:
            if not self.consume(body, self.stamp):
                self.feeding = False
                self._resolve()
                # the message end normally follows at once; a server that never sends it loses the connection
                asyncio.get_running_loop().call_later(_AFTER_DONE_S, self.abort)
        except Exception as err:  # the consumer's verdict on the payload (bad JSON, server error)
            self.error = err

    def on_message_complete(self) -> None:
        self.ended = True
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the message is done
        if self.feeding and self.on_end is not None and self.error is None and self.response.status == 200:
            try:
                self.on_end(self.stamp)
            except Exception as err:
                self.error = err

    # the reader
    def readable(self) -> None:
        try:
            data, anc, _, _ = self.sock.recvmsg(_READ, STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._fail(WireError(f"{self.key[0]}:{self.key[1]}: {_why(err)}"))
            return
        if not data:
            if self.response.status and not self.ended and close_delimited(self.response.headers):
                self.on_message_complete()  # such a body ends where the connection does
                self.keep_alive = False
                self._fail(self.error) if self.error is not None else self._end(reuse=False)
                return
            self._fail(WireError(f"{self.key[0]}:{self.key[1]}: server closed the connection "
                                 + ("before answering" if not self.received else "mid-response")))
            return
        if anc:
            self.stamp = kernel_stamp(anc)
        else:
            self.stamp = time.perf_counter()
            self.wire.loop_stamped_reads += 1
        self.received += len(data)
        if not self.response.status and self.received > HEAD_LIMIT:
            self._fail(TooMuch("response headers", HEAD_LIMIT))
            return
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserUpgrade, httptools.HttpParserError) as err:
            self._fail(parser_failure(err, self.key))
            return
        if self.error is not None:
            self._fail(self.error)
        elif self.ended:
            self._end(reuse=self.keep_alive)
        elif not self.feeding and self.response.status != 200:  # an error body at its limit: stop reading it
            self._end(reuse=False)

    def _resolve(self) -> None:
        if not self.done.done():
            self.done.set_result(self.response)

    def _end(self, reuse: bool) -> None:
        self._resolve()
        self._release(reuse)

    def _fail(self, err: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(err)
        self._release(reuse=False)

    def _release(self, reuse: bool) -> None:
        if self.finished:
            return
        self.finished = True
        self.wire._detach(self, reuse)

    def abort(self) -> None:
        self._release(reuse=False)


class Wire:
    """A pool of keep-alive connections per host and the streamed POST that uses them.

    One per event loop (like an ``aiohttp.ClientSession``); ``close()`` closes every socket.
    """

    def __init__(self, kernel_stamps: bool = True) -> None:
        self._idle: dict[tuple[str, int], list[socket.socket]] = {}
        self._open: set[socket.socket] = set()
        self._addrs: dict[tuple[str, int], tuple] = {}
        self._want_stamps = kernel_stamps and SO_TIMESTAMPNS is not None
        self.clock = CLOCK_KERNEL if self._want_stamps else CLOCK_LOOP
        self.loop_stamped_reads = 0  # reads that came without a kernel stamp (stamped by the loop instead)
        self._live: set[_Exchange] = set()

    async def __aenter__(self) -> Wire:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for ex in list(self._live):  # requests in flight end now, with an error, not at their timeout
            ex._fail(WireError(f"{ex.key[0]}:{ex.key[1]}: client closed the connection"))
        for sock in list(self._open):
            if loop is not None:
                loop.remove_reader(sock.fileno())
            sock.close()
        self._open.clear()
        self._idle.clear()

    async def _connect(self, key: tuple[str, int]) -> socket.socket:
        sock, addr, stamps = await open_connection(key, self._addrs.get(key), self._want_stamps)
        if self._want_stamps and not stamps:
            self._want_stamps, self.clock = False, CLOCK_LOOP
        self._addrs[key] = addr
        self._open.add(sock)
        return sock

    def _pooled(self, key: tuple[str, int]) -> socket.socket | None:
        idle = self._idle.get(key)
        while idle:
            sock = idle.pop()
            try:
                sock.recv(1, socket.MSG_PEEK)  # b"" (closed) or stray bytes: not reusable
            except (BlockingIOError, InterruptedError):
                return sock
            except OSError:
                pass
            self._open.discard(sock)
            sock.close()
        return None

    def _detach(self, ex: _Exchange, reuse: bool) -> None:
        self._live.discard(ex)
        if ex.sock.fileno() != -1:  # a closed socket's fd number may belong to another connection by now
            try:
                asyncio.get_running_loop().remove_reader(ex.fd)
            except RuntimeError:
                pass
        if reuse and ex.sock in self._open:
            self._idle.setdefault(ex.key, []).append(ex.sock)
        else:
            self._open.discard(ex.sock)
            ex.sock.close()

    async def post_stream(self, url: str | Target, body: bytes, headers: dict[str, str],
                          on_body: Callable[[bytes, float], bool], on_end: Callable[[float], None] | None = None,
                          on_sent: Callable[[float], None] | None = None) -> Response:
        """POST ``body``; feed each piece of a 200 response's body to ``on_body(piece, stamp)`` until
        it returns False or the response ends (then ``on_end(stamp)``); return the status, headers
        and (when not 200) body.

        ``on_sent`` gets the send stamp: just before the request's bytes go to the kernel, after
        any connection set-up, so a new connection's handshake is not counted as server latency.

        A reused connection that the server had closed (no byte back, failed within
        ``_STALE_S``) is retried once on a new connection; any other failure is the request's.
        """
        target = url if isinstance(url, Target) else Target.parse(url)
        key = (target.host, target.port)
        request = request_bytes(target, body, headers)
        loop = asyncio.get_running_loop()
        for attempt in (0, 1):
            sock = self._pooled(key) if attempt == 0 else None
            reused = sock is not None
            if sock is None:
                sock = await self._connect(key)
            done: asyncio.Future = loop.create_future()
            ex = _Exchange(self, sock, key, on_body, on_end, done)
            self._live.add(ex)
            sent = time.perf_counter()
            if on_sent is not None:
                on_sent(sent)
            try:
                await loop.sock_sendall(sock, request)
                loop.add_reader(ex.fd, ex.readable)
                response = await done
            except (WireError, OSError) as err:
                ex.abort()
                # The server closed an idle connection as we reused it: nothing came back and it
                # ended at once. Anything later may mean the server worked on the request: no retry.
                if reused and attempt == 0 and ex.received == 0 and time.perf_counter() - sent < _STALE_S:
                    continue
                if isinstance(err, WireError):
                    raise
                raise WireError(f"{key[0]}:{key[1]}: {_why(err)}") from None
            except BaseException:  # cancelled or timed out: the connection's state is unknown
                ex.abort()
                raise
            return response  # after [DONE] the reader reads on to the message end, then pools
        raise AssertionError("unreachable")


def _why(err: OSError) -> str:
    return os.strerror(err.errno) if err.errno else str(err)


def close_delimited(headers: dict[str, str]) -> bool:
    """Whether a response's body ends only where its connection does (no length, not chunked)."""
    return "content-length" not in headers and "chunked" not in headers.get("transfer-encoding", "").lower()


def request_bytes(target: Target, body: bytes, headers: dict[str, str]) -> bytes:
    """One HTTP/1.1 POST of ``body`` asking for an event stream."""
    host = f"[{target.host}]" if ":" in target.host else target.host  # IPv6 literal
    head = [f"POST {target.path} HTTP/1.1", f"Host: {host}:{target.port}",
            f"Content-Length: {len(body)}", "Accept: text/event-stream", "User-Agent: specbench"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


async def open_connection(key: tuple[str, int], known: tuple | None, want_stamps: bool) -> tuple[socket.socket, tuple, bool]:
    """A connected non-blocking TCP socket to ``key`` (trying each address ``known`` or resolved),
    its address, and whether it gives kernel receive stamps (asked when ``want_stamps``)."""
    loop = asyncio.get_running_loop()
    if known is not None:
        addrs = [known]
    else:
        try:
            addrs = await loop.getaddrinfo(key[0], key[1], type=socket.SOCK_STREAM)
        except OSError as err:
            raise WireError(f"{key[0]}:{key[1]}: cannot resolve host: {_why(err)}") from None
        if not addrs:
            raise WireError(f"{key[0]}:{key[1]}: cannot resolve host")
    last: OSError | None = None
    for addr in addrs:  # e.g. localhost → ::1 first, while the server listens on IPv4 only
        family, type_, proto, _, sockaddr = addr
        try:
            sock = socket.socket(family, type_, proto)
        except OSError as err:  # e.g. out of file descriptors
            raise WireError(f"{key[0]}:{key[1]}: cannot open a socket: {_why(err)}") from None
        sock.setblocking(False)
        stamps = False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if want_stamps and SO_TIMESTAMPNS is not None:
                stamps = True
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                except OSError:
                    stamps = False
            await loop.sock_connect(sock, sockaddr)
        except OSError as err:
            sock.close()
            last = err
            continue
        except BaseException:
            sock.close()
            raise
        return sock, addr, stamps
    assert last is not None  # addrs is not empty: each failed attempt set it
    raise WireError(f"{key[0]}:{key[1]}: cannot connect: {_why(last)}")
