"""A synthetic OpenAI-compatible streaming server with a known, deterministic schedule.

It exists to measure benchmark *clients* (issue #8, "Measure without disturbing"): every request
streams on a schedule fixed in advance, so a client's TTFT / ITL / TPOT can be compared with the
truth.

Schedule of one request (times on the machine-wide monotonic clock, ``time.perf_counter()``):

* ``t_recv`` = when the handler starts (request line, headers and body read);
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

Several workers (``--workers N``) bind the same port with SO_REUSEPORT and the kernel spreads the
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

from aiohttp import web

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
    def __init__(self, cfg: Config, index: int) -> None:
        self.cfg = cfg
        self.index = index
        self.seq = 0
        self.requests = 0
        self.chunks = 0
        self.active = 0
        self.max_active = 0
        self.peers: set = set()  # distinct client (host, port) pairs = TCP connections opened
        # per request: [key, t_recv, ttft_s, gap_s, tokens, [send times]]
        self.log: list[list] = []
        self.lateness: list[float] = []  # a bounded sample for /stats
        self.created = int(time.time())
        self.app = web.Application()
        self.app.add_routes([
            web.post("/v1/chat/completions", self.complete),
            web.post("/v1/completions", self.complete),
            web.get("/v1/models", self.models),
            web.get("/health", self.health),
            web.get("/metrics", self.metrics),
            web.get("/stats", self.stats),
        ])

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text="", content_type="text/plain")

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": self.cfg.model, "object": "model", "created": self.created, "owned_by": "specbench",
             "root": "synthetic", "max_model_len": 1 << 20}]})

    async def stats(self, request: web.Request) -> web.Response:
        lat = sorted(self.lateness[-20000:])

        def pct(p: float) -> float | None:
            return lat[min(len(lat) - 1, int(p / 100 * len(lat)))] * 1e3 if lat else None

        return web.json_response({
            "worker": self.index, "pid": os.getpid(), "requests": self.requests, "chunks": self.chunks,
            "active": self.active, "max_active": self.max_active, "connections": len(self.peers),
            "send_late_p50_ms": pct(50), "send_late_p99_ms": pct(99),
            "cpu_s": time.process_time(),
        })

    async def complete(self, request: web.Request) -> web.StreamResponse:
        t_recv = perf()
        try:
            req = json.loads(await request.read())
        except ValueError:
            return web.json_response({"error": {"message": "bad json", "type": "BadRequestError", "code": 400}}, status=400)
        cfg = self.cfg
        if request.transport is not None:
            self.peers.add(request.transport.get_extra_info("peername"))
        chat = request.path.endswith("/chat/completions")
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
        usage_each = bool(sopt.get("continuous_usage_stats"))
        usage_end = bool(sopt.get("include_usage"))
        rid = ("chatcmpl-" if chat else "cmpl-") + key
        if not req.get("stream"):
            return await self._unary(request, t_recv, ttft, gap, sizes, key, rid, chat, prompt_len)

        # Pre-built pieces: the hot loop only formats numbers and the text.
        head = ('data: {"id":"%s","object":"%s","created":%d,"model":"%s","choices":[{"index":0,' % (
            rid, "chat.completion.chunk" if chat else "text_completion", self.created, cfg.model)).encode()
        if chat:
            body_fmt = '"delta":{"content":"%s"},"logprobs":null,"finish_reason":%s}]'
        else:
            body_fmt = '"text":"%s","logprobs":null,"finish_reason":%s,"stop_reason":null}]'
        usage_fmt = ',"usage":{"prompt_tokens":%d,"total_tokens":%%d,"completion_tokens":%%d}' % prompt_len

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        sends: list[float] = []
        if cfg.log_dir is not None:
            self.log.append([key, t_recv, ttft, gap, n_tokens, sends])
        self.requests += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        done = 0
        last = len(sizes) - 1
        base = t_recv + ttft
        try:
            for i, n in enumerate(sizes):
                due = base + i * gap
                if due > perf():
                    fut = loop.create_future()
                    loop.call_at(due, _wake, fut)  # loop.time() is CLOCK_MONOTONIC, like perf_counter
                    await fut
                done += n
                text = (f"[{key}]" + " tok" * (n - 1)) if i == 0 else " tok" * n
                fin = finish if i == last else "null"
                parts = []
                if i == 0 and chat and cfg.role_chunk:
                    parts.append(head + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
                                 + ((usage_fmt % (prompt_len, 0)).encode() if usage_each else b"") + b"}\n\n")
                parts.append(head + (body_fmt % (text, fin)).encode()
                             + ((usage_fmt % (prompt_len + done, done)).encode() if usage_each else b"") + b"}\n\n")
                if i == last:
                    if usage_end:
                        parts.append(head[:head.index(b'"choices"')] + b'"choices":[]'
                                     + (usage_fmt % (prompt_len + done, done)).encode() + b"}\n\n")
                    parts.append(b"data: [DONE]\n\n")
                t = perf()
                await resp.write(b"".join(parts))
                sends.append(t)
                self.chunks += 1
                late = t - due
                if len(self.lateness) < 200000:
                    self.lateness.append(late)
                else:
                    self.lateness[self.chunks % 200000] = late
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.active -= 1
        return resp

    async def _unary(self, request, t_recv, ttft, gap, sizes, key, rid, chat, prompt_len) -> web.Response:
        await asyncio.sleep(max(0.0, t_recv + ttft + (len(sizes) - 1) * gap - perf()))
        n = sum(sizes)
        text = f"[{key}]" + " tok" * (n - 1)
        choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"} if chat
                  else {"index": 0, "text": text, "finish_reason": "length"})
        return web.json_response({"id": rid, "object": "chat.completion" if chat else "text_completion",
                                  "created": self.created, "model": self.cfg.model, "choices": [choice],
                                  "usage": {"prompt_tokens": prompt_len, "total_tokens": prompt_len + n,
                                            "completion_tokens": n}})

    def dump(self) -> None:
        if self.cfg.log_dir is None:
            return
        os.makedirs(self.cfg.log_dir, exist_ok=True)
        path = os.path.join(self.cfg.log_dir, f"worker-{self.index}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"worker": self.index, "pid": os.getpid(), "cpu_s": time.process_time(),
                       "connections": len(self.peers), "requests": self.log}, f)
        os.replace(path + ".tmp", path)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


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
    runner = web.AppRunner(worker.app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.SockSite(runner, _socket(host, port), backlog=4096)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    worker.dump()  # before cleanup, so a client still streaming cannot delay the log
    await runner.cleanup()


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
