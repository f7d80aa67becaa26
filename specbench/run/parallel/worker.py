"""Worker side: one config, in a subprocess (gpus) or a Ray task (ray), measured by the ordinary
``SequentialRun`` into a ``WorkerChannel`` that streams every report back as a typed message
(``messages``), encoded only where it leaves the process."""

from __future__ import annotations

import asyncio
import os
import pickle
import queue
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from ...launch import reap_all
from ...schemas.cell import Cell
from ...schemas.launched import ProcessIdentity
from ...schemas.meta import ServerMeta, Timing
from ...schemas.phase import PhaseInfo
from ...schemas.request import Prompt, RequestRecord
from ...schemas.row import ResultRow
from ...schemas.slo_search import SloSearch
from ..hardware import accelerator_of
from ..preflight import now
from ..sequential import SequentialRun
from ..servers import server_log_name
from .messages import (
    ChunkClock,
    Emit,
    LogShipped,
    PhaseMeasured,
    ProbesMeasured,
    Restarting,
    SearchDone,
    ServerLaunched,
    ServerReady,
    WorkerFinished,
    WorkerMessage,
    WorkerStarted,
    encode,
)
from .node import claim_port, node_log_dir, start_watchdog, stop_watchdog, sweep_stale
from .planning import MAX_LOG_BYTES, WorkerJob
from .shipping import StepLogShipper


class WorkerChannel:
    """A worker's ``Recorder``: every report becomes a message to the collector, the one writer of
    the run dir. Only which cells are done is kept here, so a restarted config skips them."""

    def __init__(self, job: WorkerJob, emit: Emit, path: Path, logs: Path, shipper: StepLogShipper | None = None) -> None:
        self.name, self.suite, self.emit, self.path, self.logs = job.config, job.suite, emit, path, logs
        self.completed = {(p.cell, p.repeat) for p in job.done_phases}
        self.searched_datasets: set[str] = set()
        self.first_start, self.starts = job.first_start, list[int]()
        self.shipper = shipper

    def prepare(self) -> None:
        """The collector has checked the run dir."""

    def begin(self, prompts: dict[str, list[Prompt]]) -> None:
        """The collector has opened the run dir (and checked ``prompts``)."""

    def done(self) -> set[tuple[Cell, int]]:
        return set(self.completed)

    def searched(self, config: str) -> set[str]:
        return set(self.searched_datasets)

    def record_server(self, name: str, identity: ProcessIdentity) -> None:
        self.emit(ServerLaunched(name, identity, self.starts[-1] if self.starts else None))

    def forget_server(self, name: str) -> None:
        self.emit(ServerLaunched(name, None))

    def next_start(self, name: str) -> int:
        """Numbered on from the run's launches of the config so far (``WorkerJob.first_start``), as a sequential
        run numbers them: a restart, or a --resume, gets the next number, its own log and step-log folder."""
        self.starts.append(self.first_start + len(self.starts))
        return self.starts[-1]

    def launch_folders(self) -> list[str]:
        """The step-log folder names of this worker's server starts (``servers.steplog_launch``)."""
        return [f"{self.name}-s{start}" for start in self.starts]

    def rows(self) -> list[ResultRow]:
        return []

    def server_ready(self, name: str, server: ServerMeta) -> None:
        server.accelerator = accelerator_of(self.suite, name)  # on the server's machine, with the GPUs it was given
        self.emit(ServerReady(name, server))

    def chunk_clock(self, name: str, clock: str) -> None:
        self.emit(ChunkClock(name, clock))

    def store_phase(self, info: PhaseInfo, records: list[RequestRecord]) -> None:
        if info.complete:
            self.completed.add((info.cell, info.repeat))
        if self.shipper is not None and info.steplog:  # the steps the cell is cut from come back before it
            self.shipper.ship(Path(info.steplog).name)
        self.emit(PhaseMeasured(self.name, info, list(records)))

    def store_probes(self, records: list[RequestRecord], rate: float) -> None:
        self.emit(ProbesMeasured(self.name, rate, list(records)))

    def store_search(self, name: str, dataset: str, result: SloSearch) -> None:
        self.searched_datasets.add(dataset)
        self.emit(SearchDone(name, dataset, result))

    def config_failed(self, name: str, error: str) -> None:
        """Reported with the worker's ``done``, unless a restart fixes it."""

    def config_restarting(self, name: str, attempt: int) -> None:
        self.emit(Restarting(name, attempt))

    def config_succeeded(self, name: str) -> None:
        """Reported with the worker's ``done``."""

    def finish(self, timing: Timing) -> list[ResultRow]:
        return []  # rows are the collector's

    def close(self) -> None:
        """The collector holds the run dir's lock."""


class WorkerControl:
    """Lets the thread that owns a worker ask its run to stop (Ray cancellation)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.run: SequentialRun | None = None
        self.requested = False

    def attach(self, run: SequentialRun) -> None:
        self.loop, self.run = asyncio.get_running_loop(), run
        if self.requested:
            run.stop.set()

    def stop(self) -> None:
        self.requested = True
        if self.loop is not None and self.run is not None:
            try:
                self.loop.call_soon_threadsafe(self.run.stop.set)
            except RuntimeError:  # loop already closed
                pass


def ship_logs(logs: Path, channel: WorkerChannel, emit: Emit) -> None:
    """A Ray worker's server logs (the last ``MAX_LOG_BYTES`` of each start's) and step logs to the collector;
    removed once sent (kept on the node only when the worker dies)."""
    for start in channel.starts:
        log = logs / server_log_name(channel.name, start)
        if log.exists():
            with log.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - MAX_LOG_BYTES))
                text = f.read().decode(errors="replace")
            emit(LogShipped(channel.name, text, size > MAX_LOG_BYTES, start))
            log.unlink(missing_ok=True)
    if channel.shipper is not None:
        channel.shipper.finish(channel.launch_folders())
    try:
        logs.rmdir()
    except OSError:  # another config's log of the same run is still there (or the step log's plugin folder)
        pass


async def run_config(job: WorkerJob, prompts: dict[str, list[Prompt]], emit: Emit,
                     control: WorkerControl | None = None) -> None:
    """Run one config with ``SequentialRun`` (``job.only``: one round of ``load.restart``, on one server start) and
    ``emit`` its messages, ``WorkerStarted`` first and ``WorkerFinished`` last."""
    suite, name = job.suite, job.config
    saved_env = {key: os.environ.get(key) for key in job.env}
    os.environ.update(job.env)
    config = next(c for c in suite.configs if c.name == name)
    sweep_stale()
    scratch = Path(tempfile.mkdtemp(prefix=f"specbench-w{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-"))
    watchdog = start_watchdog(scratch)
    claim: Path | None = None
    failed: dict[str, str] = {}
    interrupted, trace = False, None
    try:
        port = config.port
        if config.launched and port is None:
            port, claim = claim_port(suite.server.host)
        gpus = job.gpus
        wconfig = replace(config, port=port, gpus=gpus if gpus is not None else config.gpus)
        wsuite = replace(suite, configs=tuple(wconfig if c.name == name else c for c in suite.configs))
        emit(WorkerStarted(name, gpus=wconfig.gpus, port=port, host=socket.gethostname(), node=job.node,
                           pid=os.getpid(), started_at=now()))
        # gpus: straight into the run dir; ray: a node-local dir that outlives a crashed worker
        logs = Path(job.log_dir) if job.log_dir else node_log_dir(job.run_id or "")
        logs.mkdir(parents=True, exist_ok=True)
        channel = WorkerChannel(replace(job, suite=wsuite), emit, scratch, logs,
                                None if job.log_dir else StepLogShipper(name, logs, emit))
        run = SequentialRun(wsuite, channel, only_configs=[name], prompts=prompts,
                            restart_on_failure=job.restart_on_failure, cells=job.only)
        if control is not None:
            control.attach(run)
        outcome = await run.execute()
        failed, interrupted = dict(outcome.failed_configs), outcome.interrupted
        if not job.log_dir:
            ship_logs(logs, channel, emit)
    except Exception as err:  # a worker bug must not look like a silent success
        failed = {name: f"worker error: {type(err).__name__}: {err}"}
        trace = traceback.format_exc()
    finally:
        if claim is not None:
            claim.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
        stop_watchdog(watchdog)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    emit(WorkerFinished(name, now(), failed, interrupted, trace))


def worker_main(job_path: str) -> int:
    """``python -m specbench.run.parallel --worker JOB``: one config; JSON lines on stdout."""
    chan = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to stderr, never into the channel
    sys.stdout = sys.stderr
    with open(job_path, "rb") as f:
        job, prompts = pickle.load(f)
    parent = os.getppid()

    def orphan_watch() -> None:  # the collector died: stop our server, then go
        while os.getppid() == parent:
            time.sleep(1)

        reap_all(grace_s=5)
        os._exit(3)

    threading.Thread(target=orphan_watch, daemon=True).start()

    def emit(msg: WorkerMessage) -> None:
        chan.write(encode(msg) + "\n")
        chan.flush()

    asyncio.run(run_config(job, prompts, emit))
    chan.close()
    return 0


def ray_config_task(job: WorkerJob, prompts: dict[str, list[Prompt]]) -> Iterator[str]:
    """The Ray task: a generator of encoded messages; the run goes in a thread with its own loop."""
    import ray

    gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    job = replace(job, gpus=",".join(gpu_ids) if job.gpus_needed else job.gpus,
                  node=ray.get_runtime_context().get_node_id())
    messages: queue.Queue[str | None] = queue.Queue()
    control = WorkerControl()

    def body() -> None:
        try:
            asyncio.run(run_config(job, prompts, lambda msg: messages.put(encode(msg)), control))
        finally:
            messages.put(None)

    thread = threading.Thread(target=body, name=f"specbench-{job.config}", daemon=True)
    thread.start()
    try:
        while True:
            msg = messages.get()
            if msg is None:
                break
            yield msg
    except KeyboardInterrupt:  # ray.cancel(): let the run stop its server before we go
        control.stop()
        thread.join(timeout=60)
        raise
    thread.join()
