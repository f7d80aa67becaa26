"""Load generation: send prompts to a server under a load shape → request records and the phase's wall time.

Closed loop (``concurrency``: C conversations in flight, each worker starts the next as soon as
its last one ends) or open loop (``request_rate``: arrivals due on a schedule computed up front,
``schedule.py``: Poisson, gamma, a ramp or a trace). In open loop each request records when it was
due (``scheduled_time``) beside when it was sent, so a client that falls behind shows as waiting
(``measure/arrivals.py``), never as a fast server. Multi-turn prompts feed the model's own answer
back, one measured request per turn.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import queue
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from ..client import RequestSpec, Transport, close_transport, open_transport, stream_request
from ..schemas.request import Prompt, RequestRecord
from ..suite.arrival import Arrival
from .schedule import schedule


def phase_window(records: Sequence[RequestRecord]) -> tuple[float, float] | None:
    """The throughput window: the first request's send stamp (taken once its connection is set up) to
    the last request's end (``end_time``); None when no request was sent. Every process stamps on
    ``perf_counter`` (CLOCK_MONOTONIC), so records of several load processes give one exact window."""
    sent = [r for r in records if r.send_time > 0]
    if not sent:
        return None
    start = min(r.send_time for r in sent)
    return start, max((r.end_time for r in sent if r.end_time is not None), default=start)


@dataclass(frozen=True)
class LoadPass:
    """One measured (or warm-up) pass over prompts."""

    config: str
    phase: str = "measure"
    concurrency: int = 1  # in request-rate mode: the cap on requests in flight, 0 = none
    request_rate: float | None = None
    seed: int = 0
    repeat: int = 0
    arrival: Arrival = Arrival()  # open loop: when each request is due (schedule.py)


@dataclass
class LoadResult:
    """A pass's records and its window: first dispatch to last completion (``phase_window``)."""

    records: list[RequestRecord]
    wall_s: float
    started: float
    ended: float

    @classmethod
    def over(cls, records: list[RequestRecord], started: float, ended: float) -> LoadResult:
        """The records' own window, or (when none was sent) the loop's ``started``…``ended``."""
        started, ended = phase_window(records) or (started, ended)
        return cls(records=records, wall_s=ended - started, started=started, ended=ended)


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
    session: Transport, spec: RequestSpec, prompt: Prompt, phase: LoadPass, sink: list[RequestRecord],
    on_record: Callable[[RequestRecord], None] | None, stop: asyncio.Event | None, due: float | None = None,
) -> None:
    """One prompt's turns in order; each record lands in ``sink`` as soon as it ends, even if cancelled.
    ``due``: when its arrival was scheduled (open loop); a later turn is due when the one before it ended."""
    answers: list[str] = []
    line = prompt.trace
    if line is not None:  # a trace's line asks for its own output length
        spec = replace(spec, max_tokens=max(1, line.output_length))
    for turn in range(len(prompt.turns)):
        if stop is not None and stop.is_set():
            break
        rec = RequestRecord(
            prompt_id=prompt.id, dataset=prompt.dataset, config=phase.config, turn=turn,
            category=prompt.category, phase=phase.phase, concurrency=phase.concurrency, repeat=phase.repeat,
            request_rate=phase.request_rate, scheduled_time=due,
            prefix_group=getattr(prompt, "group", None),  # the shared_prefix set's Prompt.group (datasets/)
        )
        if line is not None:
            rec.trace_line, rec.trace_session = line.line, line.session_id
            rec.trace_input_length, rec.trace_output_length = line.input_length, line.output_length
        try:
            await stream_request(session, spec, _messages(prompt, answers, turn), rec)
        except asyncio.CancelledError:
            rec.error = "cancelled: run stopped before the request finished"
            rec.end_time = time.perf_counter()
            sink.append(rec)
            raise
        sink.append(rec)
        if on_record:
            on_record(rec)
        if rec.error is not None:
            break
        answers.append(rec.text)
        due = rec.end_time if due is not None else None


async def generate_load(
    session: Transport,
    spec: RequestSpec,
    prompts: Sequence[Prompt],
    phase: LoadPass,
    on_record: Callable[[RequestRecord], None] | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = 10.0,
) -> LoadResult:
    """Run every prompt once; the wall time spans the first request's send to the last one's end
    (``phase_window``: not the set-up before the first send, not the wind-down after the last end).

    When ``stop`` is set no new request starts; requests in flight get ``grace_s`` to finish and
    are then cancelled (recorded with an error, never dropped).
    """
    records: list[RequestRecord] = []
    with _quiet_gc():
        return await _generate(session, spec, prompts, phase, records, on_record, stop, grace_s)


@contextmanager
def _quiet_gc():
    """Fewer, later GC passes while timing: a collection pausing the loop would show up as ITL."""
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


async def _generate(session: Transport, spec: RequestSpec, prompts: Sequence[Prompt], phase: LoadPass,
                 records: list[RequestRecord], on_record: Callable[[RequestRecord], None] | None,
                 stop: asyncio.Event | None, grace_s: float) -> LoadResult:
    started = time.perf_counter()

    async def closed_loop() -> None:
        queue = list(reversed(prompts))

        async def worker() -> None:
            while queue and not (stop is not None and stop.is_set()):
                await _conversation(session, spec, queue.pop(), phase, records, on_record, stop)

        await asyncio.gather(*(worker() for _ in range(min(phase.concurrency, len(prompts)) or 1)))

    async def open_loop() -> None:
        assert phase.request_rate is not None  # started only for a request rate
        offsets = schedule(phase.arrival, phase.request_rate, prompts, phase.seed)  # up front: the loop only keeps to it
        limit = asyncio.Semaphore(phase.concurrency) if phase.concurrency > 0 else None
        arrivals: list[asyncio.Task] = []
        start = time.perf_counter()

        async def one(p: Prompt, due: float) -> None:
            if limit is None:
                await _conversation(session, spec, p, phase, records, on_record, stop, due)
                return
            async with limit:  # a request held by the in-flight cap waits here, and its wait counts from ``due``
                await _conversation(session, spec, p, phase, records, on_record, stop, due)

        try:
            for p, offset in zip(prompts, offsets):
                if not await _wait_until(start + offset, stop):
                    break
                arrivals.append(asyncio.create_task(one(p, start + offset)))
            await asyncio.gather(*arrivals)
        finally:  # cut short: requests in flight are cancelled and recorded before generate_load returns
            pending = [t for t in arrivals if not t.done()]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    main = asyncio.create_task(closed_loop() if phase.request_rate is None else open_loop())
    try:
        if stop is None:
            await main
        else:
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({main, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not main.done():
                done, _ = await asyncio.wait({main}, timeout=grace_s)
                if not done:
                    main.cancel()
            stopped.cancel()
            try:
                await main
            except asyncio.CancelledError:
                if not stop.is_set():
                    raise
    finally:
        if not main.done():  # generate_load itself was cancelled: take its requests down with it
            main.cancel()
            await asyncio.gather(main, return_exceptions=True)
    return LoadResult.over(records, started, time.perf_counter())


async def _wait_until(due: float, stop: asyncio.Event | None) -> bool:
    """Wait until ``due`` on ``perf_counter``, never returning before it (a loop's timer may fire up to its
    clock's resolution early: uvloop's is 1 ms); False when ``stop`` is set first, which ends the wait at once."""
    while (delay := due - time.perf_counter()) > 0:
        if stop is None:
            await asyncio.sleep(delay)
            continue
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except TimeoutError:
            pass
        if stop.is_set():
            return False
    return stop is None or not stop.is_set()


def run_loop(coro):
    """uvloop when installed: ~10% less client CPU per streamed chunk (benchmarks/README.md)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _load_worker(index: int, spec: RequestSpec, prompts: list[Prompt], phase: LoadPass, client: str, grace_s: float,
                 stop_flag, out) -> None:
    """One load-generator process (its own event loop and connections). Each record goes to the
    parent the moment it ends, so a worker that dies loses only the requests it had in flight."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides

    async def go() -> LoadResult:
        stop = asyncio.Event()
        sent: set[int] = set()

        def send(rec: RequestRecord) -> None:
            sent.add(id(rec))
            out.put(("record", index, rec.to_dict()))

        async def watch() -> None:
            while not stop_flag.is_set():
                await asyncio.sleep(0.1)
            stop.set()

        watcher = asyncio.create_task(watch())
        transport = open_transport(spec.base_url, client)
        try:
            result = await generate_load(transport, spec, prompts, phase, on_record=send, stop=stop, grace_s=grace_s)
        finally:
            watcher.cancel()
            await close_transport(transport)
        for rec in result.records:  # cut by a stop: recorded, but not passed to on_record
            if id(rec) not in sent:
                send(rec)
        return result

    try:
        result = run_loop(go())
        out.put(("done", index, result.started, result.ended))
    except BaseException as err:
        out.put(("error", index, f"{type(err).__name__}: {err}"))
        raise


async def generate_load_processes(spec: RequestSpec, prompts: Sequence[Prompt], phase: LoadPass, processes: int,
                          on_record: Callable[[RequestRecord], None] | None = None,
                          client: str = "auto", stop: asyncio.Event | None = None,
                          grace_s: float = 10.0) -> LoadResult:
    """Closed-loop load from several processes, for concurrency one event loop cannot keep up with.

    Prompts and streams are dealt round-robin; ``time.perf_counter`` is CLOCK_MONOTONIC, shared by
    every process on the machine, so records merge with consistent clocks and the phase's window is
    theirs, as in one process: the first send of any worker to the last end of any. Records arrive
    as they end (``on_record`` runs live). ``stop`` reaches every worker (each then behaves like
    ``generate_load``: no new requests, ``grace_s`` for those in flight, cut ones recorded). A worker
    that dies keeps what it sent; its prompts without any record become failed records naming the
    worker's exit.
    """
    processes = max(1, min(processes, phase.concurrency, len(prompts)))
    shares = [list(prompts[i::processes]) for i in range(processes)]
    streams = [phase.concurrency // processes + (1 if i < phase.concurrency % processes else 0) for i in range(processes)]
    ctx = multiprocessing.get_context("spawn")
    flag, out = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_load_worker, daemon=True,
                           args=(i, spec, share, LoadPass(phase.config, phase.phase, n, None, phase.seed, phase.repeat),
                                 client, grace_s, flag, out))
               for i, (share, n) in enumerate(zip(shares, streams))]
    records: list[RequestRecord] = []
    seen: list[set[str]] = [set() for _ in workers]
    spans: list[tuple[float, float]] = []
    ended: dict[int, str | None] = {}  # worker → None (done) or why it failed

    def drain() -> None:
        while True:
            try:
                kind, i, *rest = out.get_nowait()
            except queue.Empty:
                return
            if kind == "record":
                rec = RequestRecord.from_dict(rest[0])
                rec.concurrency, rec.request_rate = phase.concurrency, phase.request_rate
                records.append(rec)
                seen[i].add(rec.prompt_id)
                if on_record:
                    on_record(rec)
            elif kind == "done":
                spans.append((rest[0], rest[1]))
                ended[i] = None
            else:
                ended[i] = f"load-generator process failed: {rest[0]}"

    t0 = time.perf_counter()
    for w in workers:
        w.start()
    try:
        while len(ended) < len(workers):
            if stop is not None and stop.is_set():
                flag.set()
            drain()
            for i, w in enumerate(workers):
                if i not in ended and w.exitcode is not None:
                    drain()  # its last messages may still be in the pipe
                    if i not in ended:
                        ended[i] = f"load-generator process died (exit code {w.exitcode})"
            await asyncio.sleep(0.05)
    except BaseException:  # cancelled: stop the workers like on Ctrl-C, off the event loop
        flag.set()
        await asyncio.shield(asyncio.to_thread(_join, workers, grace_s + 5))
        raise
    await asyncio.to_thread(_join, workers, 5)
    drain()
    for i, why in ended.items():
        if why is not None:
            for rec in _unsent(shares[i], seen[i], phase, why):
                records.append(rec)
                if on_record:
                    on_record(rec)
    return LoadResult.over(records, min((a for a, _ in spans), default=t0),
                           max((b for _, b in spans), default=time.perf_counter()))


def _unsent(share: list[Prompt], seen: set[str], phase: LoadPass, why: str) -> list[RequestRecord]:
    """A dead load-generator process's prompts without any record, as failed records naming its exit."""
    return [RequestRecord(prompt_id=p.id, dataset=p.dataset, config=phase.config, category=p.category,
                          phase=phase.phase, repeat=phase.repeat, concurrency=phase.concurrency,
                          request_rate=phase.request_rate, error=why)
            for p in share if p.id not in seen]


def _join(workers, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
        if w.is_alive():
            w.kill()
            w.join()
