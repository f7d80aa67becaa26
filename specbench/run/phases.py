"""One phase of a cell: warm-up, then the measurement window (a /metrics snapshot on each side of
the timed load) → its ``PhaseInfo`` and request records; and the SLO rate search of a server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import aiohttp

from ..client import RequestSpec, Transport, close_transport, open_transport, transport_clock
from ..client.metrics import scrape
from ..errors import RequestsRefused
from ..load.generate import LoadPass, LoadResult, generate_load, generate_load_processes
from ..measure.engine_counters import prefix_cache_window, read_acceptance
from ..measure.keepup import generation_window
from ..measure.o200k import prompt_lengths
from ..measure.slo import PROBE_PHASE
from ..schemas.cell import LoadPoint
from ..schemas.phase import PhaseInfo
from ..schemas.request import Prompt, RequestRecord
from ..schemas.slo_search import SloProbe
from ..suite import Suite
from ..util.redact import redact_url
from .o200k_file import find_o200k
from .prefix_reset import reset_prefix_cache
from .rate_search import search_server
from .recorder import Recorder
from .refusal import refusal
from .servers import Server, server_info
from .telemetry import PhaseMeter
from .warmup import WarmUp


@dataclass
class Phases:
    """Measures phases against one server after another; adds up the time spent warming up and measuring."""

    suite: Suite
    session: aiohttp.ClientSession
    stop: asyncio.Event
    progress: Callable[..., None]
    grace_s: float = 10.0
    timing: dict[str, float] = field(default_factory=lambda: {"servers_s": 0.0, "warmup_s": 0.0, "measured_s": 0.0})

    def _on_record(self, record: RequestRecord) -> None:
        self.progress("request", record=record)

    async def _timed(self, transport: Transport, spec: RequestSpec, prompts: list[Prompt], load: LoadPass) -> LoadResult:
        processes = self.suite.load.processes_at(load.concurrency) if load.request_rate is None else 1
        if processes > 1:
            return await generate_load_processes(spec, prompts, load, processes, on_record=self._on_record,
                                                 client=self.suite.load.client, stop=self.stop, grace_s=self.grace_s)
        return await generate_load(transport, spec, prompts, load, on_record=self._on_record, stop=self.stop,
                                   grace_s=self.grace_s)

    async def measure(self, server: Server, spec: RequestSpec, prompts: list[Prompt], dataset: str, point: LoadPoint,
                      repeat: int, recorder: Recorder) -> None:
        """Warm up, then the timed pass between two /metrics snapshots; the phase goes to ``recorder``."""
        cfg = server.config
        transport = open_transport(server.url, self.suite.load.client)
        meter = PhaseMeter.for_config(self.suite, cfg)
        try:
            warm = WarmUp(self.suite, self.stop, self.progress, self.grace_s, self.timing, self._on_record)
            warm_records, one_time = await warm.run(transport, spec, prompts, server, dataset, point)
            refused = refusal(warm_records)
            if refused is not None:
                raise RequestsRefused(f"config {cfg.name!r}: all {len(warm_records)} warm-up requests got {refused}; "
                                      "its remaining cells were skipped (every request would get the same answer)")
            reset = None  # load.prefix_cache reset: after the warm-up (it warmed compiles, not the pass's prompts)
            if self.suite.load.prefix_cache == "reset" and not self.stop.is_set():
                await reset_prefix_cache(self.session, server, spec.secrets)
                reset = True
            self.progress("phase", config=cfg.name, dataset=dataset, point=point.label,
                          total=sum(len(p.turns) for p in prompts), warmup=False)
            before = await scrape(self.session, server.url)
            scraped_before = time.time()  # after the scrape: the server is idle until the load starts
            meter.start()
            load = LoadPass(cfg.name, "measure", point.concurrency, point.request_rate,
                            seed=self.suite.load.seed + repeat, repeat=repeat, arrival=self.suite.load.arrival)
            result = await self._timed(transport, spec, prompts, load)
        finally:
            meter.stop()
            recorder.chunk_clock(cfg.name, transport_clock(transport))
            await close_transport(transport)
        scraped_after = time.time()  # before the scrape: every step of the pass came before it
        after = await scrape(self.session, server.url)
        self.timing["measured_s"] += result.wall_s
        died = server.process is not None and (
            not server.process.alive
            # a server killed mid-phase fails its requests a moment before its process is reaped
            or (any(r.error for r in result.records) and await asyncio.to_thread(server.process.exited_within, 1.0)))
        raw = (await server_info(self.session, server.url, server.engine)).raw if server.engine.acceptance_reads_server_info else None
        acceptance = read_acceptance(server.engine, before, after, cfg.num_speculative_tokens, raw)
        if not before.ok or not after.ok:
            acceptance = acceptance.with_error(redact_url(before.error or after.error))
        window = generation_window(before, after, server.engine.generation_counter)
        generation = replace(window, error=redact_url(window.error)).to_dict()
        cache = prefix_cache_window(server.engine, before, after)
        prefix_cache = None if cache is None else replace(cache, error=redact_url(cache.error)).to_dict()
        for r in warm_records + result.records:
            if r.error:
                r.error = redact_url(r.error)
        prompt_lengths(find_o200k(self.suite.load.tiktoken_file), prompts, result.records)  # off the timed window
        phase = PhaseInfo(config=cfg.name, dataset=dataset, concurrency=point.concurrency,
                          request_rate=point.request_rate, repeat=repeat, wall_s=result.wall_s,
                          acceptance=acceptance, server={k: server.info.get(k) for k in ("engine", "version", "url")},
                          interrupted=self.stop.is_set(), server_died=died, telemetry=meter.stop().to_dict(), generation=generation,
                          server_start=server.info.get("start"),

                          scraped_before=scraped_before, scraped_after=scraped_after, steplog=server.info.get("steplog"),
                          warmup_one_time=one_time, prefix_cache=prefix_cache, prefix_cache_reset=reset)
        recorder.store_phase(phase, warm_records + result.records)

    async def search_rate(self, server: Server, spec: RequestSpec, prompts: list[Prompt], dataset: str,
                          recorder: Recorder) -> None:
        """--max-rate-at-slo for one config × data set; probe requests and the result go to ``recorder``."""
        name = server.config.name

        def on_probe(probe: SloProbe, records: list[RequestRecord]) -> None:
            assert probe.rate is not None  # every probe is at a rate
            recorder.store_probes(records, probe.rate)

        def on_start(rate: float) -> None:
            self.progress("phase", config=name, dataset=dataset, point=f"{PROBE_PHASE} {rate:g} req/s",
                          total=len(prompts), warmup=False)

        load = self.suite.load
        result = await search_server(url=server.url, client=load.client, spec=spec, prompts=prompts, config=name,
                                     slo=load.slo, search=load.rate_search, seed=load.seed, stop=self.stop,
                                     grace_s=self.grace_s, on_probe=on_probe, on_record=self._on_record,
                                     on_start=on_start)
        if not result.interrupted:
            recorder.store_search(name, dataset, result)
