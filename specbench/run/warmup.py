"""The warm-up before a timed pass: a few requests, one full matching pass, or — ``steady`` — full passes until
the engine's step log sees no one-time event (a compile, a graph capture, a Triton compile or autotune, the
allocator growing) in a whole one (issue 39; docs/suites.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..client import RequestSpec, Transport
from ..load.generate import LoadPass, generate_load
from ..schemas.cell import LoadPoint
from ..schemas.request import Prompt, RequestRecord
from ..suite import Suite
from .refusal import refusal
from .servers import Server, settle
from .steplog import read_events


@dataclass
class WarmUp:
    """Warms one server up for one cell, adding the time it took to ``timing["warmup_s"]``."""

    suite: Suite
    stop: asyncio.Event
    progress: Callable[..., None]
    grace_s: float
    timing: dict[str, float]
    on_record: Callable[[RequestRecord], None]

    async def run(self, transport: Transport, spec: RequestSpec, prompts: list[Prompt], server: Server,
                       dataset: str, point: LoadPoint) -> tuple[list[RequestRecord], list[int] | None]:
        """The warm-up's records, and with ``steady`` the one-time events the step log saw in each of its passes."""
        cfg = server.config
        warmup = cfg.warmup if cfg.warmup is not None else self.suite.load.warmup
        if warmup == "steady":
            return await self._steady(transport, spec, prompts, server, dataset, point)
        warm = warmup if isinstance(warmup, int) else len(prompts)  # or "pass"
        if not warm:
            return [], None
        chosen = prompts if warmup == "pass" else [Prompt(p.id, p.dataset, p.turns[:1], p.category, p.system)
                                                   for p in prompts[:warm]]
        return await self._warm_pass(transport, spec, chosen, cfg.name, dataset, point), None

    async def _warm_pass(self, transport: Transport, spec: RequestSpec, chosen: list[Prompt], config: str,
                         dataset: str, point: LoadPoint) -> list[RequestRecord]:
        self.progress("phase", config=config, dataset=dataset, point=point.label, total=len(chosen), warmup=True)
        res = await generate_load(transport, spec, chosen, LoadPass(config, "warmup", max(point.concurrency, 1), None),
                                  on_record=self.on_record, stop=self.stop, grace_s=self.grace_s)
        self.timing["warmup_s"] += res.wall_s
        return res.records

    async def _steady(self, transport: Transport, spec: RequestSpec, prompts: list[Prompt], server: Server,
                      dataset: str, point: LoadPoint) -> tuple[list[RequestRecord], list[int]]:
        """``warmup: steady``: full matching passes until the step log sees no one-time event (a compile, a graph
        capture, a Triton compile or autotune, the allocator growing) in a whole one, at most ``warmup_max_passes``.
        Every pass is read back after the log settles, so its last events are on disk."""
        records: list[RequestRecord] = []
        seen: list[int] = []
        folder = server.steplog_dir
        for _ in range(self.suite.load.warmup_max_passes):
            began = time.time()
            records += await self._warm_pass(transport, spec, prompts, server.config.name, dataset, point)
            if self.stop.is_set() or folder is None or refusal(records) is not None:
                break
            await settle(folder)
            events, _ = await asyncio.to_thread(read_events, folder)
            seen.append(sum(1 for e in events if e.one_time and e.wall >= began))
            if seen[-1] == 0:
                break
        return records, seen
