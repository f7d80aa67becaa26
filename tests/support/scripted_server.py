"""A scripted OpenAI-compatible streaming server for known-answer tests.

Each request streams: a role chunk, one prefill token after ``ttft_s``, then decode chunks whose
token counts cycle through ``pattern`` (one chunk = one engine step), ``gap_s`` apart, until
``max_tokens``. It keeps vLLM-format spec-decode counters consistent with what it streamed
(a chunk of n tokens = one draft of k with n−1 accepted), so every metric has a known answer.

Faults for reliability tests: ``fault`` = http500 | http429 | http400 (vLLM's missing chat template) |
http401echo | malformed | stall | drop, applied to requests whose number (1-based) is in ``fault_on``
(``--fault-on all``: every one); ``die_after`` exits the process after that many requests.
Hostile-server knobs (tests/faults/test_hostile_server.py): ``final_usage`` / ``final_extra``
merged into the final usage chunk, ``merge_every`` two engine steps in one chunk, ``phantom_tokens``
tokens counted in ``vllm:generation_tokens_total`` but never streamed, ``chunk_usage`` overriding the cumulative count of chosen content
chunks, ``counters`` replacing counter values in ``/metrics`` by raw text (``NaN``), ``models_body``
/ ``version_body`` raw probe answers, ``empty_data`` an empty ``data:`` line before the first chunk,
``gzip`` a gzip-encoded stream whatever the client asked, ``api_key`` required on every path (a
401 echoes the request's headers), ``metrics_format: sglang`` SGLang's counters instead of vLLM's.
Bounds (tests/faults/test_hostile_server.py): ``long_line`` pads the first content chunk's text with
that many characters (one ``data:`` line longer than that), ``bulk`` streams that many bytes of 64 KiB
content lines before the usual end, fault ``http500long`` answers 500 with a 64 MiB body
(``hung_up`` counts the bodies a client left before their end, ``sent_whole`` those it read to the end).
``capacity``: at most that many requests are served at once, the rest queue before their prefill
(a server with that many batch slots: C ÷ service time requests per second, tests/integration/measure/test_slo.py).
``prefix_cache``: blocks of that many prompt words are cached (``PrefixCache``): cached_tokens in the final usage,
vLLM's prefix-cache counters, and a TTFT shortened to the uncached share.
``reset``: a prefix-cache reset endpoint (``load.prefix_cache: reset``): ``vllm`` (``POST /reset_prefix_cache``,
``{"success": bool}``; standalone, mounted only with ``VLLM_SERVER_DEV_MODE=1`` like vLLM's) or ``sglang`` (``POST
/flush_cache``, 200 or 400); ``reset_refused`` the calls (1-based) that refuse, ``reset_body`` a raw answer instead;
``events`` lists every ``request`` and ``reset`` in the order they arrived.
Its own clock (tests/integration/client/test_send_clock.py): ``timelines[n]`` holds request n's receive time
(``perf_counter`` when its first middleware ran), its messages/prompt and the write time of each content chunk.

Run standalone: ``python tests/support/scripted_server.py --port 8123 --pattern 1,2,4 --k 3``. As a fake engine
for signal tests, each moment a file the test can wait for and each wait one the test ends: ``--started-flag FILE``
once it handles SIGTERM, ``--start-until FILE`` (listen only once FILE exists: a start as long as the test wants;
``--start-delay S`` a fixed one), ``--stop-flag FILE`` written the moment SIGTERM arrives, ``--stop-until FILE``
(exit only once FILE exists: a big engine freeing its GPU; ``--stop-delay S`` a fixed one), ``--hold-on N``
``--held-flag FILE`` ``--release-flag FILE`` (request N stays in flight after its first token until FILE exists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from dataclasses import dataclass, field

from aiohttp import web

RECEIVED = web.RequestKey("received", float)
CHAT_TEMPLATE_ERROR = ("As of transformers v4.44, default chat template is no longer allowed, so you must provide a "
                       "chat template if the tokenizer does not define one.")


@dataclass
class Timeline:
    """What the server saw of one request, on ``time.perf_counter()`` (the clients' clock, in process)."""

    received: float
    prompt: str = ""  # json of its messages or prompt
    writes: list[float] = field(default_factory=list)  # just before each content chunk went to the transport


@dataclass
class Script:
    pattern: list[int] = field(default_factory=lambda: [1])
    k: int | None = None  # None: no speculative counters (a baseline server)
    ttft_s: float = 0.01
    gap_s: float = 0.005
    model: str = "smol"
    usage_per_chunk: bool = True
    token_ids: bool = False
    diverge_at: int | None = None  # change the output from this token on (fidelity tests)
    fault: str | None = None
    fault_on: tuple[int, ...] = ()
    die_after: int | None = None
    version: str = "scripted-1.0"
    extra_engine_label: bool = False
    spec_stats: bool = False  # vLLM >= 0.32 --per-request-spec-decode-metrics summary
    final_usage: dict = field(default_factory=dict)
    final_extra: dict = field(default_factory=dict)
    chunk_usage: dict = field(default_factory=dict)  # content chunk index → cumulative completion_tokens sent
    counters: dict = field(default_factory=dict)  # counter name (no prefix/_total) → raw value text
    models_body: str | None = None
    version_body: str | None = None
    empty_data: bool = False
    gzip: bool = False
    api_key: str | None = None
    metrics_format: str = "vllm"  # or "sglang", or "none" (no spec-decode counters)
    capacity: int | None = None  # requests served at once; the rest wait in a queue
    paced: bool = False  # each chunk leaves when due on one timeline from the request's arrival (TTFT, then one step
    # after the previous chunk was due): a late wake-up delays that chunk only, never the ones after it
    merge_every: int = 0  # every Nth decode step goes out in one chunk with the step after it (an engine that merges steps)
    phantom_tokens: int = 0  # per request, tokens vllm:generation_tokens_total adds beyond those streamed (other traffic)
    long_line: int = 0  # characters added to the first content chunk's text (one data: line longer than that)
    bulk: int = 0  # bytes of 64 KiB content lines streamed after the last chunk, before usage and [DONE]
    hold_on: int | None = None  # this request (1-based) stays in flight after its first token until release_flag exists
    held_flag: str | None = None  # written when request hold_on is held: the run is known to be mid-request
    release_flag: str | None = None  # None: held until the process dies
    prefix_cache: int = 0  # a prefix cache of blocks of this many prompt words (PrefixCache): 0 = none
    reset: str | None = None  # "vllm" | "sglang": a prefix-cache reset endpoint of that engine's; None: none (404)
    reset_refused: tuple[int, ...] = ()  # reset calls (1-based) refused: {"success": false} / HTTP 400
    reset_body: str | None = None  # answer every reset with this text (HTTP 200) instead


class PrefixCache:
    """vLLM's prefix cache in small: a prompt's words in blocks of ``block``; a request finds the longest run of whole
    blocks an earlier prompt began with (never its last word, which vLLM always recomputes), and its blocks are kept.
    The server reports the cached words as ``usage.prompt_tokens_details.cached_tokens``, counts them in
    ``vllm:prefix_cache_queries`` / ``_hits``, and shortens the request's TTFT to its uncached share."""

    def __init__(self, block: int) -> None:
        self.block, self.blocks, self.queries, self.hits = block, set(), 0, 0

    def lookup(self, words: list[str]) -> int:
        full = (len(words) - 1) // self.block
        cached = 0
        while cached < full and tuple(words[:(cached + 1) * self.block]) in self.blocks:
            cached += 1
        self.blocks.update(tuple(words[:(i + 1) * self.block]) for i in range(full))
        self.queries += len(words)
        self.hits += cached * self.block
        return cached * self.block


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.s = script
        self.requests = 0
        self.drafts = self.draft_tokens = self.accepted = 0
        self.per_pos: list[int] = [0] * (script.k or 0)
        self.finished = self.generated = self.verify_calls = 0  # SGLang-style, added as each request ends
        self.stepped = 0  # vLLM-style vllm:generation_tokens_total, added as each step is made
        self.probe_headers: list[tuple[str, dict]] = []
        self.hung_up = self.sent_whole = 0  # bulk / http500long bodies the client left before their end, or read whole
        self.bodies: list[dict] = []
        self.timelines: dict[int, Timeline] = {}
        self.headers: list[dict] = []
        self.slots = asyncio.Semaphore(script.capacity) if script.capacity else None
        self.cache = PrefixCache(script.prefix_cache) if script.prefix_cache else None
        self.resets = 0
        self.events: list[str] = []  # "request" / "reset", in arrival order
        self.app = web.Application(middlewares=[self.auth, self.queue])
        self.app.add_routes([
            web.post("/v1/chat/completions", self.complete), web.post("/v1/completions", self.complete),
            web.get("/metrics", self.metrics), web.get("/health", self.health),
            web.get("/v1/models", self.models), web.get("/version", self.version),
            web.get("/get_server_info", self.version), web.post("/tokenize", self.tokenize),
        ])
        if script.reset is not None:
            self.app.router.add_post("/flush_cache" if script.reset == "sglang" else "/reset_prefix_cache", self.reset)

    @web.middleware
    async def auth(self, request: web.Request, handler):
        """With ``api_key``: 401 on every path without it, echoing the headers like a careless proxy."""
        request[RECEIVED] = time.perf_counter()
        if request.method == "GET":
            self.probe_headers.append((request.path, dict(request.headers)))
        if self.s.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.s.api_key}":
            return web.json_response({"error": {"message": "unauthorized", "headers": dict(request.headers)}}, status=401)
        return await handler(request)

    @web.middleware
    async def queue(self, request: web.Request, handler):
        """With ``capacity``: a completion waits for a free slot before it is served."""
        if self.slots is None or request.method != "POST" or "completions" not in request.path:
            return await handler(request)
        async with self.slots:
            return await handler(request)

    async def reset(self, request: web.Request) -> web.Response:
        """Empty the prefix cache (``Script.reset``), unless this call is refused."""
        self.resets += 1
        self.events.append("reset")
        if self.s.reset_body is not None:
            return web.Response(text=self.s.reset_body)
        refused = self.resets in self.s.reset_refused
        if not refused and self.cache is not None:
            self.cache.blocks.clear()
        if self.s.reset == "sglang":
            return web.Response(text="Cache flushed.\n(When there are running or waiting requests, the operation will not "
                                     "be performed.)\n", status=400 if refused else 200)
        return web.json_response({"success": not refused})

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"count": len(str(body.get("prompt", "")).split())})

    def schedule(self, max_tokens: int) -> list[int]:
        """Tokens per content chunk: 1 prefill token, then the pattern cycled, cut at max_tokens."""
        chunks, total, i = [1], 1, 0
        while total < max_tokens:
            n = min(self.s.pattern[i % len(self.s.pattern)], max_tokens - total)
            chunks.append(n)
            total += n
            i += 1
        return chunks

    def step_gap(self) -> float:
        """Seconds before the next decode chunk (a subclass may make it depend on load)."""
        return self.s.gap_s

    def token(self, seed: int, idx: int) -> tuple[int, str]:
        tid = (seed * 31 + idx * 7) % 1000
        if self.s.diverge_at is not None and idx >= self.s.diverge_at:
            tid = (tid + 1) % 1000
        return tid, f"t{tid} "

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        if self.s.models_body is not None:
            return web.Response(text=self.s.models_body, content_type="application/json")
        return web.json_response({"object": "list", "data": [{"id": self.s.model, "object": "model", "root": "/models/x"}]})

    async def version(self, request: web.Request) -> web.Response:
        if self.s.version_body is not None:
            return web.Response(text=self.s.version_body, content_type="application/json")
        return web.json_response({"version": self.s.version})

    async def metrics(self, request: web.Request) -> web.Response:
        if self.s.metrics_format == "sglang":
            return web.Response(text=self.sglang_metrics(), content_type="text/plain")
        if self.s.metrics_format == "none":
            return web.Response(text="# TYPE up gauge\nup 1\n", content_type="text/plain")
        lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                 "# TYPE vllm:num_requests_running gauge",
                 f'vllm:num_requests_running{{engine="0",model_name="{self.s.model}"}} 0.0',
                 "# TYPE vllm:generation_tokens counter",
                 f'vllm:generation_tokens_total{{engine="0",model_name="{self.s.model}"}} '
                 f'{self.s.counters.get("generation_tokens", float(self.stepped))}']
        if self.cache is not None:
            for name, value in (("prefix_cache_queries", self.cache.queries), ("prefix_cache_hits", self.cache.hits)):
                lines += [f"# TYPE vllm:{name} counter",
                          f'vllm:{name}_total{{engine="0",model_name="{self.s.model}"}} {float(value)}']
        if self.s.k is not None:
            now = time.time()
            engines = ["0", "1"] if self.s.extra_engine_label else ["0"]

            def counter(name: str, value: float, extra: str = "") -> None:
                lines.append(f"# TYPE vllm:{name} counter")
                for e in engines:
                    v = self.s.counters.get(name, float(value)) if e == "0" else 0.0
                    lines.append(f'vllm:{name}_total{{engine="{e}",model_name="{self.s.model}"{extra}}} {v}')
                    lines.append(f'vllm:{name}_created{{engine="{e}",model_name="{self.s.model}"{extra}}} {now}')

            counter("spec_decode_num_drafts", self.drafts)
            counter("spec_decode_num_draft_tokens", self.draft_tokens)
            counter("spec_decode_num_accepted_tokens", self.accepted)
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            for pos, v in enumerate(self.per_pos):
                for e in engines:
                    val = v if e == "0" else 0.0
                    lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="{self.s.model}",'
                                 f'position="{pos}"}} {float(val)}')
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    def sglang_metrics(self) -> str:
        """SGLang's tokenizer counters: each finished request adds its completion tokens (prefill
        token included), its verify steps and 1 request."""
        lines = []
        for name, value in (("generation_tokens", self.generated), ("spec_verify_calls", self.verify_calls),
                            ("num_requests", self.finished)):
            if name == "spec_verify_calls" and self.s.k is None:
                continue
            lines += [f"# TYPE sglang:{name} counter",
                      f'sglang:{name}_total{{model_name="{self.s.model}",tp_rank="0"}} {self.s.counters.get(name, float(value))}']
        return "\n".join(lines) + "\n"

    async def long_error(self, request: web.Request) -> web.StreamResponse:
        """A 500 with a 64 MiB body, in 64 KiB pieces; a client that leaves before its end is counted."""
        resp = web.StreamResponse(status=500, headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        piece = b"scripted failure " + b"x" * ((64 << 10) - 17)
        try:
            for _ in range(1024):
                await resp.write(piece)
            await resp.write_eof()
            self.sent_whole += 1
        except ConnectionError:
            self.hung_up += 1
        return resp

    async def hold(self) -> None:
        """Keep request ``hold_on`` in flight until ``release_flag`` exists, having written ``held_flag``: a test
        acts on a run known to be mid-request (and releases it when it chooses), never after a guessed sleep."""
        if self.s.held_flag:
            with open(self.s.held_flag, "a") as f:
                f.write(f"{self.requests}\n")
        while self.s.release_flag is None or not os.path.exists(self.s.release_flag):
            await asyncio.sleep(0.01)

    def _count_step(self, n: int) -> None:
        if self.s.k is None:
            return
        self.drafts += 1
        self.draft_tokens += self.s.k
        self.accepted += n - 1
        for i in range(n - 1):
            self.per_pos[i] += 1

    async def complete(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        began = loop.time()  # paced: every chunk's time is fixed from here, so a late wake-up never shifts the next
        self.requests += 1
        self.events.append("request")
        number = self.requests
        timeline = self.timelines[number] = Timeline(request[RECEIVED])
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        if self.s.die_after is not None and number > self.s.die_after:
            os._exit(3)
        fault = self.s.fault if number in self.s.fault_on else None
        if fault == "http500":
            return web.json_response({"error": {"message": "scripted failure"}}, status=500)
        if fault == "http429":
            return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"})
        if fault == "http400":  # vLLM on a model folder without a chat template
            return web.json_response({"object": "error", "message": CHAT_TEMPLATE_ERROR, "type": "BadRequestError",
                                      "param": None, "code": 400}, status=400)
        if fault == "http500long":
            return await self.long_error(request)
        if fault == "http401echo":
            return web.json_response({"error": {"message": "bad key", "got": request.headers.get("Authorization"),
                                                "headers": dict(request.headers)}}, status=401)
        chat = request.path.endswith("chat/completions")
        prompt = timeline.prompt = json.dumps(body.get("messages") or body.get("prompt"))
        seed = sum(prompt.encode()) % 997
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        usage_each = self.s.usage_per_chunk and (body.get("stream_options") or {}).get("continuous_usage_stats")
        prompt_tokens = len(prompt.split())
        cached = self.cache.lookup(prompt.split()) if self.cache is not None else None
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if self.s.gzip:
            resp.enable_compression(web.ContentCoding.gzip)  # forced, whatever Accept-Encoding said
        await resp.prepare(request)

        async def send(obj: dict | str) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            await resp.write(f"data: {data}\n\n".encode())

        if self.s.empty_data:
            await resp.write(b"data:\n\n")

        def chunk(text: str, ids: list[int], done: int, finish: str | None = None, index: int = 0) -> dict:
            choice: dict = {"index": 0, "finish_reason": finish}
            if chat:
                choice["delta"] = {"content": text}
            else:
                choice["text"] = text
            if self.s.token_ids:
                choice["token_ids"] = ids
            msg: dict = {"id": f"req-{number}", "object": "chat.completion.chunk", "model": self.s.model, "choices": [choice]}
            if usage_each:
                sent = self.s.chunk_usage.get(index, done)
                msg["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": sent, "total_tokens": prompt_tokens + done}
            return msg

        if chat:
            await send({"id": f"req-{number}", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                        **({"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 0, "total_tokens": prompt_tokens}} if usage_each else {})})
        deadline = began + self.s.ttft_s * (1 - (cached or 0) / max(prompt_tokens, 1))
        await asyncio.sleep(max(0.0, deadline - loop.time()) if self.s.paced else deadline - began)
        done = 0
        sched = self.schedule(max_tokens)
        held: list[tuple[int, str]] = []
        for i, n in enumerate(sched):
            if i == 1 and number == self.s.hold_on:
                await self.hold()
                deadline = loop.time()  # its timeline goes on from the release
            if i > 0:
                gap = self.step_gap()
                deadline += gap
                await asyncio.sleep(max(0.0, deadline - loop.time()) if self.s.paced else gap)
                self._count_step(n)
            if fault == "stall" and i == 2:
                await asyncio.sleep(3600)
            if fault == "drop" and i == 2:
                request.transport.close()
                return resp
            if fault == "malformed" and i == 2:
                await resp.write(b"data: {not json\n\n")
            toks = held + [self.token(seed, done + j) for j in range(n)]
            done += n
            self.stepped += n + (self.s.phantom_tokens if i == 0 else 0)
            finish = "length" if i == len(sched) - 1 else None
            if self.s.merge_every and i and i % self.s.merge_every == 0 and finish is None:
                held = toks  # counted as a step above; written with the next one
                continue
            held = []
            msg = chunk("".join(t for _, t in toks), [t for t, _ in toks], done, finish, i)
            if i == 0 and self.s.long_line:  # its text padded: the one data: line is longer than long_line bytes
                choice = msg["choices"][0]
                if chat:
                    choice["delta"]["content"] += "x" * self.s.long_line
                else:
                    choice["text"] += "x" * self.s.long_line
            timeline.writes.append(time.perf_counter())
            await send(msg)
        if self.s.bulk:
            line = f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': 'x' * (64 << 10)}}]})}\n\n".encode()
            try:
                for _ in range(-(-self.s.bulk // len(line))):
                    await resp.write(line)
            except ConnectionError:  # the client left: what this knob is for
                self.hung_up += 1
                return resp
            self.sent_whole += 1
        if (body.get("stream_options") or {}).get("include_usage"):
            final: dict = {"id": f"req-{number}", "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": done,
                                                                   "total_tokens": prompt_tokens + done}}
            if self.s.spec_stats and self.s.k:
                steps = len(sched) - 1
                accepted = sum(n - 1 for n in sched[1:])
                final["metrics"] = {"speculative_decoding": {
                    "mean_acceptance_length": 1 + accepted / steps, "num_spec_steps": steps,
                    "num_accepted_draft_tokens": accepted, "num_draft_tokens": steps * self.s.k, "num_spec_tokens": self.s.k}}
            if cached is not None:
                final["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
            final["usage"].update(self.s.final_usage)
            final.update(self.s.final_extra)
            await send(final)
        self.finished += 1
        self.generated += done
        self.verify_calls += len(sched) - 1
        await send("[DONE]")
        return resp


async def serve_app(app: web.Application, host: str = "127.0.0.1", port: int = 0, **runner_kw) -> tuple[web.AppRunner, str]:
    """Serve any aiohttp app in the running loop (port 0: a free one); its runner (``await runner.cleanup()``)
    and base URL. The one place tests start an in-process server."""
    runner = web.AppRunner(app, access_log=None, **runner_kw)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, f"http://{host}:{site._server.sockets[0].getsockname()[1]}"


async def start(script: Script, host: str = "127.0.0.1", port: int = 0) -> tuple[ScriptedServer, web.AppRunner, str]:
    """Start in the running loop; returns the server, its runner (``await runner.cleanup()``) and base URL."""
    server = ScriptedServer(script)
    runner, url = await serve_app(server.app, host, port)
    return server, runner, url


def engine_flags(parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """The vLLM flags a scripted engine started through a launcher YAML reads (the rest it ignores):
    ``--port``, ``--host``, ``--served-model-name``, ``--speculative-config``, plus any ``parser`` adds."""
    p = parser or argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--served-model-name", default="smol")
    p.add_argument("--speculative-config")
    return p.parse_known_args()[0]


class ScriptedServers:
    """Servers started in the running loop for one test: ``await servers(**script)`` gives (server, URL) of a
    ScriptedServer, ``await servers.serve(server)`` the URL of any (subclass) instance; ``close()`` stops all,
    giving a stalled handler 0.2 s."""

    def __init__(self) -> None:
        self.runners: list[web.AppRunner] = []

    async def __call__(self, **script) -> tuple[ScriptedServer, str]:
        server = ScriptedServer(Script(**script))
        return server, await self.serve(server)

    async def serve(self, server: ScriptedServer) -> str:
        runner, url = await serve_app(server.app, shutdown_timeout=0.2)
        self.runners.append(runner)
        return url

    async def close(self) -> None:
        for runner in self.runners:
            await runner.cleanup()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pattern", default="1")
    p.add_argument("--k", type=int)
    p.add_argument("--ttft", type=float, default=0.01)
    p.add_argument("--gap", type=float, default=0.005)
    p.add_argument("--model", default="smol")
    p.add_argument("--die-after", type=int)
    p.add_argument("--fault")
    p.add_argument("--fault-on", default="")
    p.add_argument("--api-key")
    p.add_argument("--load-format")  # accepted like vLLM's; a scripted server has no weights either way
    p.add_argument("--start-delay", type=float, default=0.0)
    p.add_argument("--stop-delay", type=float)
    p.add_argument("--stop-flag")
    p.add_argument("--started-flag")
    p.add_argument("--start-until", help="listen only once this file exists (a start that lasts until the test says)")
    p.add_argument("--stop-until", help="after SIGTERM, exit only once this file exists")
    p.add_argument("--hold-on", type=int)
    p.add_argument("--held-flag")
    p.add_argument("--release-flag")
    a = p.parse_args()
    fault_on = tuple(range(1, 100_000)) if a.fault_on == "all" else tuple(int(x) for x in a.fault_on.split(",") if x)
    script = Script(pattern=[int(x) for x in a.pattern.split(",")], k=a.k, ttft_s=a.ttft, gap_s=a.gap, model=a.model,
                    die_after=a.die_after, fault=a.fault, fault_on=fault_on, api_key=a.api_key, hold_on=a.hold_on,
                    held_flag=a.held_flag, release_flag=a.release_flag,
                    reset="vllm" if os.environ.get("VLLM_SERVER_DEV_MODE") == "1" else None)
    slow_stop = a.stop_delay is not None or a.stop_flag is not None or a.stop_until is not None
    if slow_stop:
        def on_term(signum, frame) -> None:
            if a.stop_flag:
                with open(a.stop_flag, "a") as f:
                    f.write(f"{os.getpid()}\n")
            time.sleep(a.stop_delay or 0.0)
            while a.stop_until and not os.path.exists(a.stop_until):
                time.sleep(0.01)
            os._exit(0)

        signal.signal(signal.SIGTERM, on_term)
    if a.started_flag:
        open(a.started_flag, "w").close()
    time.sleep(a.start_delay)
    while a.start_until and not os.path.exists(a.start_until):
        time.sleep(0.01)
    web.run_app(ScriptedServer(script).app, host="127.0.0.1", port=a.port, access_log=None, print=None,
                handle_signals=not slow_stop)


if __name__ == "__main__":
    main()
