"""The socket client: kernel receive stamps, keep-alive reuse, stale connections, clean aborts.

The servers here are plain threads writing HTTP by hand, so what goes on the wire (and when) is
exactly what the test says, independent of the client's event loop.
"""

import asyncio
import socket
import threading
import time

import orjson
import pytest

from specbench.client import RequestSpec, close_transport, open_transport, stream_request, transport_clock
from specbench.client.wire import CLOCK_KERNEL, SO_TIMESTAMPNS, Target, Wire
from specbench.schemas.request import RequestRecord


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(n: int, text: str = "x") -> bytes:
    return _chunk(b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}}],
                                           "usage": {"prompt_tokens": 3, "completion_tokens": n}}) + b"\n\n")


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


class ThreadServer:
    """Accepts connections; ``reply(conn, request_no)`` writes each response; keeps connections open."""

    def __init__(self, reply, host: str = "127.0.0.1") -> None:
        self.reply, self.accepts, self.requests = reply, 0, 0
        self.heads: list[bytes] = []
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.bind((host, 0))
        self.sock.listen()
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepts += 1
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns.append(conn)
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        buf = b""
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\r\n\r\n" in buf:
                head, rest = buf.split(b"\r\n\r\n", 1)
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                if len(rest) < length:
                    break
                buf = rest[length:]
                self.heads.append(head)
                self.requests += 1
                try:
                    self.reply(conn, self.requests)
                except OSError:  # the test ended and closed the connection under us
                    return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def server():
    made = []

    def make(reply, host="127.0.0.1"):
        s = ThreadServer(reply, host)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def spec(url: str, **kw) -> RequestSpec:
    return RequestSpec(base_url=url, model="m", **kw)


async def one(wire, url: str, rec: RequestRecord | None = None, **kw) -> RequestRecord:
    rec = rec or RequestRecord(prompt_id="p", dataset="d", config="c")
    return await stream_request(wire, spec(url, **kw), [{"role": "user", "content": "hi"}], rec)


async def until(predicate, what: str, guard_s: float = 30.0) -> None:
    """Wait for a state the test can see (a chunk read, a connection pooled or closed), never a guessed delay."""
    deadline = time.monotonic() + guard_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


@pytest.mark.skipif(SO_TIMESTAMPNS is None, reason="kernel receive stamps are Linux-only")
async def test_chunk_time_is_kernel_arrival_not_when_the_loop_got_to_it(server):
    """Chunk 2 is sent only while the loop is blocked, which stays blocked 0.5 s after: its stamp must still be
    its send time.

    (Chunk 3 is sent only once the client has read chunk 2; had two chunks arrived during one block, one read
    would return both and both would carry the later stamp: the limit of per-read stamps, documented in wire.py.)"""
    sent: list[float] = []
    blocked, chunk2_sent, read2 = threading.Event(), threading.Event(), threading.Event()

    def reply(conn, _):
        conn.sendall(HEAD)
        for i, after in enumerate((None, blocked, read2)):
            if after is not None:
                after.wait(30)
            sent.append(time.perf_counter())
            conn.sendall(_event(i + 1))
            if i == 1:
                chunk2_sent.set()
        conn.sendall(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    srv = server(reply)
    rec = RequestRecord(prompt_id="p", dataset="d", config="c")
    async with Wire() as wire:
        assert wire.clock == CLOCK_KERNEL
        task = asyncio.create_task(one(wire, srv.url, rec))
        await until(lambda: len(rec.chunk_times) == 1, "chunk 1")
        blocked.set()  # the loop is blocked from here: chunk 2 arrives meanwhile
        chunk2_sent.wait(30)
        time.sleep(0.5)
        await until(lambda: len(rec.chunk_times) == 2, "chunk 2")
        read2.set()
        rec = await task
    assert rec.ok and len(rec.chunk_times) == 3
    lag = [t - s for t, s in zip(rec.chunk_times, sent)]
    # loopback delivery is µs; 0.25 s leaves room for a preempted server thread on a busy machine and still fails
    # a loop stamp (≥ 0.5 s late for chunk 2)
    assert all(0 <= x < 0.25 for x in lag), lag


async def test_keep_alive_connection_is_reused_and_stale_one_replaced(server):
    dropped = threading.Event()

    def reply(conn, n):
        conn.sendall(HEAD + _event(1) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        if n == 2:  # the server drops the idle connection after the second response
            conn.shutdown(socket.SHUT_RDWR)
            dropped.set()

    srv = server(reply)
    async with Wire() as wire:
        a = await one(wire, srv.url)
        b = await one(wire, srv.url)
        assert srv.accepts == 1, "second request should reuse the first connection"
        await asyncio.to_thread(dropped.wait, 30)
        c = await one(wire, srv.url)
    assert a.ok and b.ok and c.ok
    assert srv.accepts == 2 and srv.requests == 3


async def test_done_before_message_end_still_pools_the_connection(server):
    def reply(conn, _):
        conn.sendall(HEAD + _event(2) + _chunk(b"data: [DONE]\n\n"))
        time.sleep(0.05)
        conn.sendall(b"0\r\n\r\n")

    srv = server(reply)
    async with Wire() as wire:
        first = await one(wire, srv.url)
        await until(lambda: any(wire._idle.values()), "the message end (the connection back in the pool)")
        second = await one(wire, srv.url)
    assert first.ok and second.ok and first.chunk_tokens == [2]
    assert srv.accepts == 1


async def test_timeout_closes_the_connection(server):
    def reply(conn, _):
        conn.sendall(HEAD + _event(1))  # then silence

    srv = server(reply)
    async with Wire() as wire:
        rec = await one(wire, srv.url, timeout_s=0.2)
        assert rec.error == "timeout after 0.2 s" and rec.chunk_times
        assert not wire._open and not any(wire._idle.values())


async def test_http_error_with_chunked_body(server):
    def reply(conn, _):
        conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + _chunk(b'{"error": "overloaded') + _chunk(b'"}') + b"0\r\n\r\n")

    srv = server(reply)
    async with Wire() as wire:
        rec = await one(wire, srv.url)
    assert rec.error == 'HTTP 503 (retry-after 7): {"error": "overloaded"}'


async def test_close_delimited_body_ends_at_eof(server):
    """No Content-Length, not chunked: HTTP/1.1 says the body ends when the server closes."""

    def reply(conn, n):
        if n == 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                         + b"data: " + orjson.dumps({"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}})
                         + b"\n\ndata: " + orjson.dumps({"choices": [{"delta": {"content": "bc"}}], "usage": {"completion_tokens": 3}}))
        else:
            conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\nengine died")
        conn.shutdown(socket.SHUT_RDWR)

    srv = server(reply)
    async with Wire() as wire:
        ok = await one(wire, srv.url)
        bad = await one(wire, srv.url)
    assert ok.ok and ok.chunk_tokens == [1, 2] and ok.text == "abc"
    assert bad.error == "HTTP 500: engine died"
    assert srv.accepts == 2


async def test_garbage_instead_of_http_is_one_line_error(server):
    def reply(conn, _):
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    srv = server(reply)
    async with Wire() as wire:
        rec = await one(wire, srv.url)
    assert rec.error.startswith("WireError: 127.0.0.1:") and "malformed HTTP response" in rec.error


async def test_headers_that_do_not_end_within_64_kib_fail_the_request(server):
    """llhttp bounds no header; the socket client does (aiohttp: 8 KiB a line, 128 headers)."""

    def reply(conn, _):
        conn.sendall(HEAD.replace(b"\r\n\r\n", b"\r\n" + b"X-Pad: " + b"x" * (70 << 10) + b"\r\n\r\n")
                     + _event(1) + b"0\r\n\r\n")

    srv = server(reply)
    async with Wire() as wire:
        rec = await one(wire, srv.url)
    assert rec.error == "server sent too much: response headers over 64 KiB"


async def test_server_that_worked_on_the_request_is_not_sent_it_again(server):
    """Only a connection that fails at once may be a stale keep-alive one; later, no retry."""

    def reply(conn, n):
        if n == 1:
            conn.sendall(HEAD + _event(1) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        else:  # works on the request, then drops the connection without an answer
            time.sleep(0.3)
            conn.shutdown(socket.SHUT_RDWR)

    srv = server(reply)
    async with Wire() as wire:
        assert (await one(wire, srv.url)).ok
        rec = await one(wire, srv.url)
    assert rec.error.endswith("server closed the connection before answering")
    assert srv.requests == 2 and srv.accepts == 1


async def test_close_ends_requests_in_flight_at_once(server):
    def reply(conn, _):
        conn.sendall(HEAD + _event(1))  # then silence

    srv = server(reply)
    wire = Wire()
    rec = RequestRecord(prompt_id="p", dataset="d", config="c")
    task = asyncio.create_task(one(wire, srv.url, rec, timeout_s=600))
    await until(lambda: rec.chunk_times, "the first chunk")
    wire.close()
    rec = await asyncio.wait_for(task, 60)  # the request would wait 600 s: ending in the guard is close's doing
    assert rec.error.endswith("client closed the connection") and rec.chunk_times
    assert not wire._open and not wire._live


async def test_message_that_never_ends_after_done_loses_its_connection(server, monkeypatch):
    monkeypatch.setattr("specbench.client.wire._AFTER_DONE_S", 0.2)

    def reply(conn, _):
        conn.sendall(HEAD + _event(1) + _chunk(b"data: [DONE]\n\n"))  # no terminating chunk, ever

    srv = server(reply)
    async with Wire() as wire:
        rec = await one(wire, srv.url)
        assert rec.ok and len(wire._open) == 1
        await until(lambda: not wire._open, "the connection to be dropped 0.2 s after [DONE]")
        assert not any(wire._idle.values())


async def test_unresolvable_host_is_a_request_error(monkeypatch):
    async def no_dns(*a, **k):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async with Wire() as wire:
        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", no_dns)
        rec = await one(wire, "http://no-such-host.invalid:8000")
    assert rec.error.startswith("WireError: no-such-host.invalid:8000: cannot resolve host")


async def test_every_address_of_a_name_is_tried(server, monkeypatch):
    """localhost → ::1 first while the server listens on IPv4 only (Docker, Fedora)."""

    def reply(conn, _):
        conn.sendall(HEAD + _event(1) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    srv = server(reply)
    port = int(srv.url.rsplit(":", 1)[1])
    with socket.socket() as s:  # a port nobody listens on, for the first address
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()

    async def two(*a, **k):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", dead), (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    async with Wire() as wire:
        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", two)
        rec = await one(wire, f"http://some-name:{port}")
    assert rec.ok


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
async def test_ipv6_literal_url_and_host_header(server):
    def reply(conn, _):
        conn.sendall(HEAD + _event(1) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    srv = server(reply, host="::1")
    async with Wire() as wire:
        rec = await one(wire, srv.url)
    assert rec.ok
    port = srv.url.rsplit(":", 1)[1]
    assert f"Host: [::1]:{port}".encode() in srv.heads[0].split(b"\r\n")


def test_target_parsing_and_transport_choice():
    assert Target.parse("http://h:81/p/v1/completions?x=1") == Target("h", 81, "/p/v1/completions?x=1")
    assert Target.parse("http://h/v1") == Target("h", 80, "/v1")
    with pytest.raises(ValueError, match="https://h: the socket client speaks plain http:// only"):
        Target.parse("https://h")
    assert isinstance(open_transport("http://x", "auto"), Wire)
    assert transport_clock(open_transport("http://x", "auto")) == (CLOCK_KERNEL if SO_TIMESTAMPNS else transport_clock(Wire(kernel_stamps=False)))


async def test_https_goes_over_aiohttp():
    t = open_transport("https://x", "auto")
    try:
        assert not isinstance(t, Wire) and "aiohttp" in transport_clock(t)
    finally:
        await close_transport(t)
