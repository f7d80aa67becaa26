"""A synthetic OpenAI-compatible streaming server with a known, deterministic schedule.

It exists to measure benchmark *clients* (issue #8, "Measure without disturbing"): every request
streams on a schedule fixed in advance, so a client's TTFT / ITL / TPOT can be compared with the
truth.

Schedule of one request (times on the machine-wide monotonic clock, ``time.perf_counter()``):

* ``t_recv`` = the kernel's receive time of the request's first bytes (``SO_TIMESTAMPNS`` on the
  read that carried them), so the server's own parsing and queueing count as its lateness, not as
  request transit;
* content chunk ``i`` (0-based) is due at ``t_recv + ttft + i * gap`` — absolute deadlines, so
  lateness never accumulates. ``--phase`` decides how streams line up with each other:
  ``request`` (as above), ``stagger`` (adds a per-request offset in ``[0, gap)`` to ``ttft``, from
  a golden-ratio sequence, so chunks of different streams arrive spread out evenly) or ``grid``
  (the first chunk waits for the next multiple of ``gap`` on the clock after ``t_recv + ttft``, so
  every stream emits on the same ticks, like the decode steps of a batching engine: the bursty
  worst case for a client);
* chunk 0 carries 1 token (the prefill token), every later chunk ``--tokens-per-chunk`` tokens
  (one speculative-decoding step), the last one what is left of the request's tokens.
  ``schedule()`` below is the single definition used by the benchmark too;
* a request produces ``max_tokens`` tokens (``finish_reason: "length"``), or with
  ``--vary-length`` between ``max_tokens/2`` and ``max_tokens`` (golden-ratio sequence;
  ``"stop"`` when short) so that requests do not all end, and restart, at the same instant.

Chunks look like vLLM's: chat streams open with a role chunk (sent in the same write as the first
content chunk, as vLLM does), every chunk carries cumulative ``usage`` when
``stream_options.continuous_usage_stats`` is set, the last content chunk has
``finish_reason: "length"``, then a usage-only chunk (``include_usage``) and ``data: [DONE]``.
The first content chunk's text starts with ``[<worker>-<seq>]``, a key that lets the benchmark
join what a client recorded with what the server did.

With ``--log-dir`` each worker keeps, per request, the key, ``t_recv``, the scheduled TTFT and gap,
the number of tokens, and the perf_counter time taken just before each chunk was handed to the socket, and writes them to
``<log-dir>/worker-<i>.json`` when it gets SIGTERM/SIGINT. Since ``perf_counter`` is
``CLOCK_MONOTONIC`` (shared by all processes on Linux), a client's receive times can be compared
with the server's actual send times, separating server jitter from client delay.

HTTP/1.1 on plain non-blocking sockets (httptools parses requests; each chunk is one
``send``), so the server spends as little of a shared machine's CPU as possible. Several workers
(``--workers N``) bind the same port with SO_REUSEPORT and the kernel spreads the
connections. Also serves ``/v1/models``, ``/health``, ``/metrics`` (empty) and ``/stats`` (this
worker's counters and send lateness).

Run: ``python benchmarks/synthetic_server.py --port 8300 --ttft-ms 50 --gap-ms 30 --tokens-per-chunk 3``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

import httptools

from specbench.client.wire import SO_TIMESTAMPNS, STAMP_SPACE, kernel_stamp

perf = time.perf_counter
GOLDEN = (math.sqrt(5) - 1) / 2


def schedule(max_tokens: int, tokens_per_chunk: int) -> list[int]:
    """Tokens in each content chunk: 1 (prefill), then ``tokens_per_chunk`` each, cut at max_tokens."""
    max_tokens = max(1, int(max_tokens))
    out = [1]
    left = max_tokens - 1
    while left > 0:
        n = min(tokens_per_chunk, left)
        out.append(n)
        left -= n
    return out


@dataclass
class Config:
    ttft_s: float = 0.05
    gap_s: float = 0.03
    tokens_per_chunk: int = 3
    phase: str = "request"  # request | stagger | grid
    vary_length: bool = False
    model: str = "smol"
    role_chunk: bool = True
    log_dir: str | None = None
    default_max_tokens: int = 128


class Worker:
    """One process: plain non-blocking sockets, httptools for parsing, one loop timer per chunk."""

    def __init__(self, cfg: Config, index: int) -> None:
        self.cfg = cfg
        self.index = index
        self.seq = 0
        self.requests = 0
        self.chunks = 0
        self.active = 0
        self.max_active = 0
        self.connections = 0
        # per request: [key, t_recv, ttft_s, gap_s, tokens, [send times]]
        self.log: list[list] = []
        self.lateness: list[float] = []  # a bounded sample for /stats
        self.created = int(time.time())
        self.conns: set[Conn] = set()

    # ---- routes; each answers on ``conn`` ----
    def route(self, conn: Conn, method: bytes, path: str, body: bytes, t_recv: float) -> None:
        if method == b"POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self.complete(conn, path, body, t_recv)
        elif path == "/health":
            conn.respond(200, b"", "text/plain")
        elif path == "/metrics":
            conn.respond(200, b"", "text/plain")
        elif path == "/v1/models":
            conn.respond(200, json.dumps({"object": "list", "data": [
                {"id": self.cfg.model, "object": "model", "created": self.created, "owned_by": "specbench",
                 "root": "synthetic", "max_model_len": 1 << 20}]}).encode())
        elif path == "/stats":
            conn.respond(200, json.dumps(self.stats()).encode())
        else:
            conn.respond(404, b'{"error": "not found"}')

    def stats(self) -> dict:
        lat = sorted(self.lateness[-20000:])

        def pct(p: float) -> float | None:
            return lat[min(len(lat) - 1, int(p / 100 * len(lat)))] * 1e3 if lat else None

        return {"worker": self.index, "pid": os.getpid(), "requests": self.requests, "chunks": self.chunks,
                "active": self.active, "max_active": self.max_active, "connections": self.connections,
                "send_late_p50_ms": pct(50), "send_late_p99_ms": pct(99), "cpu_s": time.process_time()}

    def complete(self, conn: Conn, path: str, body: bytes, t_recv: float) -> None:
        try:
            req = json.loads(body)
        except ValueError:
            conn.respond(400, b'{"error": {"message": "bad json", "type": "BadRequestError", "code": 400}}')
            return
        cfg = self.cfg
        chat = path.endswith("/chat/completions")
        self.seq += 1
        key = f"{self.index}-{self.seq}"
        max_tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or cfg.default_max_tokens)
        frac = ((self.seq + 1000 * self.index) * GOLDEN) % 1.0
        n_tokens = max(1, max_tokens - int(frac * max_tokens / 2)) if cfg.vary_length else max_tokens
        sizes = schedule(n_tokens, cfg.tokens_per_chunk)
        gap = cfg.gap_s
        ttft = cfg.ttft_s
        if cfg.phase == "stagger":
            ttft += ((self.seq * GOLDEN + 0.5 * frac) % 1.0) * gap
        elif cfg.phase == "grid":
            ttft = math.ceil((t_recv + ttft) / gap) * gap - t_recv
        finish = '"length"' if n_tokens == max_tokens else '"stop"'
        if chat:
            prompt_len = sum(len(str(m.get("content", "")).split()) for m in req.get("messages") or []) or 1
        else:
            p = req.get("prompt", "")
            prompt_len = (len(p) if isinstance(p, list) else len(str(p).split())) or 1
        sopt = req.get("stream_options") or {}
        rid = ("chatcmpl-" if chat else "cmpl-") + key
        if not req.get("stream"):
            n = sum(sizes)
            text = f"[{key}]" + " tok" * (n - 1)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"} if chat
                      else {"index": 0, "text": text, "finish_reason": "length"})
            doc = json.dumps({"id": rid, "object": "chat.completion" if chat else "text_completion",
                              "created": self.created, "model": cfg.model, "choices": [choice],
                              "usage": {"prompt_tokens": prompt_len, "total_tokens": prompt_len + n, "completion_tokens": n}})
            due = t_recv + ttft + (len(sizes) - 1) * gap
            asyncio.get_running_loop().call_at(due, conn.respond, 200, doc.encode())
            return
        sends: list[float] = []
        if cfg.log_dir is not None:
            self.log.append([key, t_recv, ttft, gap, n_tokens, sends])
        self.requests += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        Stream(self, conn, key, rid, chat, sizes, t_recv + ttft, gap, finish, prompt_len,
               bool(sopt.get("continuous_usage_stats")), bool(sopt.get("include_usage")), sends).start()

    def dump(self) -> None:
        if self.cfg.log_dir is None:
            return
        os.makedirs(self.cfg.log_dir, exist_ok=True)
        path = os.path.join(self.cfg.log_dir, f"worker-{self.index}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"worker": self.index, "pid": os.getpid(), "cpu_s": time.process_time(),
                       "connections": self.connections, "requests": self.log}, f)
        os.replace(path + ".tmp", path)


class Stream:
    """One streamed response: a loop timer per chunk at its absolute deadline."""

    def __init__(self, worker: Worker, conn: Conn, key: str, rid: str, chat: bool, sizes: list[int], base: float,
                 gap: float, finish: str, prompt_len: int, usage_each: bool, usage_end: bool, sends: list[float]) -> None:
        cfg = worker.cfg
        self.worker, self.conn, self.key, self.chat, self.sizes = worker, conn, key, chat, sizes
        self.base, self.gap, self.finish, self.prompt_len = base, gap, finish, prompt_len
        self.usage_each, self.usage_end, self.sends = usage_each, usage_end, sends
        self.role_chunk = cfg.role_chunk
        self.i = 0
        self.done = 0
        self.loop = asyncio.get_running_loop()
        # Pre-built pieces: the timer callback only formats numbers and the text.
        self.head = ('data: {"id":"%s","object":"%s","created":%d,"model":"%s","choices":[{"index":0,' % (  # noqa: UP031 (one % per chunk: cheaper than format)
            rid, "chat.completion.chunk" if chat else "text_completion", worker.created, cfg.model)).encode()
        self.body_fmt = ('"delta":{"content":"%s"},"logprobs":null,"finish_reason":%s}]' if chat
                         else '"text":"%s","logprobs":null,"finish_reason":%s,"stop_reason":null}]')
        self.usage_fmt = ',"usage":{"prompt_tokens":%d,"total_tokens":%%d,"completion_tokens":%%d}' % prompt_len  # noqa: UP031 (one % per chunk: cheaper than format)

    def start(self) -> None:
        self.conn.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n")
        self.loop.call_at(self.base, self.send)  # loop.time() is CLOCK_MONOTONIC, like perf_counter

    def send(self) -> None:
        if self.conn.closed:
            self.worker.active -= 1
            return
        i, n, last = self.i, self.sizes[self.i], len(self.sizes) - 1
        due = self.base + i * self.gap
        self.done += n
        done, head, usage_fmt, prompt_len = self.done, self.head, self.usage_fmt, self.prompt_len
        text = (f"[{self.key}]" + " tok" * (n - 1)) if i == 0 else " tok" * n
        fin = self.finish if i == last else "null"
        parts = []
        if i == 0 and self.chat and self.role_chunk:
            parts.append(head + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
                         + ((usage_fmt % (prompt_len, 0)).encode() if self.usage_each else b"") + b"}\n\n")
        parts.append(head + (self.body_fmt % (text, fin)).encode()
                     + ((usage_fmt % (prompt_len + done, done)).encode() if self.usage_each else b"") + b"}\n\n")
        if i == last:
            if self.usage_end:
                parts.append(head[:head.index(b'"choices"')] + b'"choices":[]'
                             + (usage_fmt % (prompt_len + done, done)).encode() + b"}\n\n")
            parts.append(b"data: [DONE]\n\n")
        payload = b"".join(parts)
        frame = b"%x\r\n%s\r\n" % (len(payload), payload) + (b"0\r\n\r\n" if i == last else b"")
        t = perf()
        self.conn.write(frame)
        self.sends.append(t)
        w = self.worker
        w.chunks += 1
        late = t - due
        if len(w.lateness) < 200000:
            w.lateness.append(late)
        else:
            w.lateness[w.chunks % 200000] = late
        if i == last:
            w.active -= 1
            self.conn.response_done()
            return
        self.i += 1
        self.loop.call_at(self.base + self.i * self.gap, self.send)


class Conn:
    """A client connection: requests are read with ``recvmsg`` so ``t_recv`` is the kernel's
    receive time of the request's first bytes (``SO_TIMESTAMPNS``), not when this loop got to it."""

    def __init__(self, worker: Worker, sock: socket.socket) -> None:
        self.worker, self.sock, self.fd = worker, sock, sock.fileno()
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.out = bytearray()
        self.closed = False
        self.stamp = 0.0
        self.url = b""
        self.body: list[bytes] = []
        self.t_recv = 0.0
        self.keep_alive = True
        self.loop.add_reader(self.fd, self.readable)

    def readable(self) -> None:
        try:
            data, anc, _, _ = self.sock.recvmsg(65536, STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        self.stamp = kernel_stamp(anc) if anc else perf()
        if not data:
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.respond(400, b"bad request")
            self.close()

    def on_message_begin(self) -> None:
        self.url, self.body, self.t_recv = b"", [], self.stamp

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        path = self.url.split(b"?", 1)[0].decode("latin-1")
        self.worker.route(self, self.parser.get_method(), path, b"".join(self.body), self.t_recv)

    def respond(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "")
        self.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        self.response_done()

    def response_done(self) -> None:
        if not self.keep_alive:
            self.close()

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.out:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self.close()
                return
            if sent == len(data):
                return
            data = data[sent:]
            self.loop.add_writer(self.fd, self.writable)
        self.out += data

    def writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        del self.out[:sent]
        if not self.out:
            self.loop.remove_writer(self.fd)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.fd)
        if self.out:
            self.loop.remove_writer(self.fd)
        self.worker.conns.discard(self)
        self.sock.close()


def _socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


async def _serve(cfg: Config, index: int, host: str, port: int) -> None:
    worker = Worker(cfg, index)
    listener = _socket(host, port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def accept() -> None:
        for _ in range(64):
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if SO_TIMESTAMPNS is not None:  # else t_recv is this loop's read time
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                except OSError:
                    pass
            worker.connections += 1
            worker.conns.add(Conn(worker, sock))

    loop.add_reader(listener.fileno(), accept)
    await stop.wait()
    worker.dump()  # before closing, so a client still streaming cannot delay the log
    loop.remove_reader(listener.fileno())
    listener.close()
    for conn in list(worker.conns):
        conn.close()


def _worker_main(cfg: Config, index: int, host: str, port: int, loop_kind: str) -> None:
    if loop_kind == "uvloop":
        import uvloop
        uvloop.run(_serve(cfg, index, host, port))
    else:
        asyncio.run(_serve(cfg, index, host, port))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8300)
    ap.add_argument("--workers", type=int, default=1, help="processes sharing the port (SO_REUSEPORT)")
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--gap-ms", type=float, default=30.0, help="time between content chunks of one stream")
    ap.add_argument("--tokens-per-chunk", type=int, default=3)
    ap.add_argument("--phase", choices=["request", "stagger", "grid"], default="request",
                    help="chunk times relative to each request (request), spread evenly (stagger), "
                         "or on shared clock ticks like engine steps (grid)")
    ap.add_argument("--vary-length", action="store_true", help="tokens per request in [max_tokens/2, max_tokens]")
    ap.add_argument("--model", default="smol")
    ap.add_argument("--no-role-chunk", action="store_true")
    ap.add_argument("--log-dir", default=None, help="write per-request send times here on SIGTERM")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    a = ap.parse_args(argv)
    cfg = Config(ttft_s=a.ttft_ms / 1e3, gap_s=a.gap_ms / 1e3, tokens_per_chunk=a.tokens_per_chunk,
                 phase=a.phase, vary_length=a.vary_length, model=a.model, role_chunk=not a.no_role_chunk, log_dir=a.log_dir)
    if a.workers <= 1:
        _worker_main(cfg, 0, a.host, a.port, a.loop)
        return
    pids = []
    for i in range(a.workers):
        pid = os.fork()
        if pid == 0:
            try:
                _worker_main(cfg, i, a.host, a.port, a.loop)
            finally:
                os._exit(0)
        pids.append(pid)

    def forward(sig, _frame):
        for p in pids:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for p in pids:
        while True:
            try:
                os.waitpid(p, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
    sys.exit(0)


if __name__ == "__main__":
    main()
