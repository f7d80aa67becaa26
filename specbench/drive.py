"""Drive a server with prompts under a load shape → request records and the phase's wall time.

Closed loop (``concurrency``: C conversations in flight, each worker starts the next as soon as
its last one ends) or open loop (``request_rate``: Poisson arrivals, seeded). Multi-turn prompts
feed the model's own answer back, one measured request per turn.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp

from .client import RequestSpec, stream_request
from .records import Prompt, RequestRecord


@dataclass(frozen=True)
class Phase:
    """One measured (or warm-up) pass over prompts."""

    config: str
    phase: str = "measure"
    concurrency: int = 1  # in request-rate mode: the cap on requests in flight, 0 = none
    request_rate: float | None = None
    seed: int = 0
    repeat: int = 0


@dataclass
class PhaseResult:
    records: list[RequestRecord]
    wall_s: float
    started: float
    ended: float


def _messages(prompt: Prompt, answers: list[str], turn: int) -> list[dict[str, str]]:
    msgs: list[dict[str, str]] = []
    if prompt.system:
        msgs.append({"role": "system", "content": prompt.system})
    for i in range(turn + 1):
        msgs.append({"role": "user", "content": prompt.turns[i]})
        if i < turn:
            msgs.append({"role": "assistant", "content": answers[i]})
    return msgs


async def _conversation(
    session: aiohttp.ClientSession, spec: RequestSpec, prompt: Prompt, phase: Phase,
    on_record: Callable[[RequestRecord], None] | None, stop: asyncio.Event | None,
) -> list[RequestRecord]:
    answers: list[str] = []
    out: list[RequestRecord] = []
    for turn in range(len(prompt.turns)):
        if stop is not None and stop.is_set():
            break
        rec = RequestRecord(
            prompt_id=prompt.id, dataset=prompt.dataset, config=phase.config, turn=turn,
            category=prompt.category, phase=phase.phase, concurrency=phase.concurrency, repeat=phase.repeat,
        )
        await stream_request(session, spec, _messages(prompt, answers, turn), rec)
        out.append(rec)
        if on_record:
            on_record(rec)
        if rec.error is not None:
            break
        answers.append(rec.text)
    return out


async def drive(
    session: aiohttp.ClientSession,
    spec: RequestSpec,
    prompts: Sequence[Prompt],
    phase: Phase,
    on_record: Callable[[RequestRecord], None] | None = None,
    stop: asyncio.Event | None = None,
) -> PhaseResult:
    """Run every prompt once; the wall time spans first dispatch to last completion."""
    records: list[RequestRecord] = []
    started = time.perf_counter()
    if phase.request_rate is None:
        queue = list(reversed(prompts))

        async def worker() -> None:
            while queue and not (stop is not None and stop.is_set()):
                records.extend(await _conversation(session, spec, queue.pop(), phase, on_record, stop))

        await asyncio.gather(*(worker() for _ in range(min(phase.concurrency, len(prompts)) or 1)))
    else:
        rng = random.Random(phase.seed)
        limit = asyncio.Semaphore(phase.concurrency) if phase.concurrency > 0 else None
        tasks: list[asyncio.Task] = []
        next_at = started

        async def one(p: Prompt) -> None:
            if limit is None:
                records.extend(await _conversation(session, spec, p, phase, on_record, stop))
                return
            async with limit:
                records.extend(await _conversation(session, spec, p, phase, on_record, stop))

        for p in prompts:
            if stop is not None and stop.is_set():
                break
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(p)))
            next_at += rng.expovariate(phase.request_rate)
        await asyncio.gather(*tasks)
    ended = time.perf_counter()
    return PhaseResult(records=records, wall_s=ended - started, started=started, ended=ended)
