"""The collector: the parallel run's side of the run dir. Workers' messages become calls on one
``RunSession``, so a parallel run leaves exactly the files a sequential run leaves."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ...schemas.meta import Timing
from ...schemas.notes import Note, NoteCode
from ...schemas.placement import Placement, WorkerPlace
from ..interrupts import forward_signals
from ..sequential import RunOutcome
from ..servers import STEPLOG_DIR, server_log_name
from ..session import RunSession
from .messages import (
    ChunkClock,
    LogShipped,
    PhaseMeasured,
    ProbesMeasured,
    Restarting,
    SearchDone,
    ServerLaunched,
    ServerReady,
    StepLogShipped,
    WorkerFinished,
    WorkerMessage,
    WorkerStarted,
)
from .planning import MAX_LOG_BYTES
from .shipping import store_piece


class Collector:
    """Applies each worker message to the run session; keeps which configs failed and whether the
    run was interrupted. ``meta.json`` ``parallel`` holds the mode and where each config ran."""

    def __init__(self, session: RunSession, mode: str) -> None:
        self.session, self.mode = session, mode
        self.progress = session.progress
        self.failed: dict[str, str] = {}
        self.interrupted = False
        self.stopping = False
        self.defer_success = False  # load.restart's rounds: a config succeeds after its last round (restart_rounds)
        self.steplogs_missing: set[str] = set()
        self.t_start = time.monotonic()

    @property
    def parallel(self) -> Placement:
        """meta.json's ``parallel`` (set when the session began)."""
        placement: Placement = self.session.meta.grown("parallel", Placement())
        return placement

    @property
    def logs(self) -> Path:
        return self.session.logs

    def signalled(self) -> None:
        """A signal arrived: start no more configs; the run ends as interrupted."""
        self.stopping = self.interrupted = True

    def placement(self, name: str) -> WorkerPlace:
        """Where config ``name`` runs (meta.json ``parallel.configs``)."""
        return self.parallel.place(name)

    def handle(self, msg: WorkerMessage) -> None:
        name, s = msg.config, self.session
        if isinstance(msg, WorkerStarted):
            self.parallel.started(name, msg.gpus, msg.port, msg.host, msg.node, msg.started_at)
            s.save_meta()
        elif isinstance(msg, ServerReady):
            info = msg.info.copy()
            if self.mode == "ray" and info.log:  # shipped here when the worker ends
                place = self.placement(name)
                place.log_on_node = info.log
                if info.steplog:
                    place.steplog_on_node = str(Path(info.log).parent / STEPLOG_DIR / Path(info.steplog).name)
                info.log = str(self.logs / server_log_name(name, info.start or 0))
            s.server_ready(name, info)
        elif isinstance(msg, ChunkClock):
            s.chunk_clock(name, msg.clock)
        elif isinstance(msg, PhaseMeasured):
            s.store_phase(msg.info, msg.records)
        elif isinstance(msg, ProbesMeasured):
            s.store_probes(msg.records, msg.rate)
        elif isinstance(msg, SearchDone):
            s.store_search(name, msg.dataset, msg.result)
        elif isinstance(msg, Restarting):
            s.config_restarting(name, msg.attempt)
        elif isinstance(msg, ServerLaunched):  # a worker's server, recorded here so --resume can stop it if all are killed
            if msg.identity:
                s.record_server(name, msg.identity)
                if msg.start is None:
                    s.next_start(name)
                else:  # the worker numbered it on from the run's count (WorkerJob.first_start)
                    s.meta.start_taken(name, msg.start)
            else:
                s.forget_server(name)
        elif isinstance(msg, StepLogShipped):
            self.steplog_piece(msg)
        elif isinstance(msg, LogShipped):
            self.logs.mkdir(parents=True, exist_ok=True)
            with (self.logs / server_log_name(name, msg.start)).open("a") as f:
                if msg.truncated:
                    f.write(f"[specbench: log from the worker cut to its last {MAX_LOG_BYTES >> 20} MiB]\n")
                f.write(msg.text)
        elif isinstance(msg, WorkerFinished):
            self.finished(msg)

    def first_start(self, name: str) -> int:
        """The number config ``name``'s next server start gets: its launches in the run so far (``--resume`` too)."""
        return int((self.session.meta.server_launches or {}).get(name, 0))

    def steplog_piece(self, msg: StepLogShipped) -> None:
        """A piece of a Ray worker's step log into logs/steplog/; a folder the worker could not read, or a piece
        that cannot go where it says, is said under the tables (its cells' steplog_error names the folder)."""
        why = msg.error or store_piece(self.logs, msg)
        if why is None or msg.folder in self.steplogs_missing:
            return
        self.steplogs_missing.add(msg.folder)
        where = self.placement(msg.config)
        note = Note.of(NoteCode.STEPLOG_NOT_COPIED, folder=f"logs/{STEPLOG_DIR}/{msg.folder}", config=msg.config,
                       host=where.host or "?", why=why, stays=where.steplog_on_node if msg.error else None)
        self.progress("notice", message=note)
        self.session.meta.set_aside([], [note])
        self.session.save_meta()

    def finished(self, msg: WorkerFinished) -> None:
        self.placement(msg.config).finished_at = msg.finished_at
        if msg.interrupted:
            self.interrupted = True
        if msg.failed:
            for cfg, err in msg.failed.items():
                self.fail(cfg, err, traceback_text=msg.traceback)
        elif not self.interrupted and not self.defer_success:
            self.session.config_succeeded(msg.config)
        self.session.save_meta()

    def fail(self, name: str, error: str, traceback_text: str | None = None) -> None:
        self.failed[name] = error
        if traceback_text:
            self.placement(name).traceback = traceback_text
        self.session.config_failed(name, error)
        self.session.save_meta()

    def finish(self) -> RunOutcome:
        total = time.monotonic() - self.t_start
        measured = sum(p.wall_s for p in self.session.dir.read_phases())
        # configs run side by side, so per-config times overlap and do not add up to the total
        rows = self.session.finish(Timing.from_dict({"total_s": round(total, 3), "measured_s": round(measured, 3),
                                                     "parallel": True, "harness_s": None, "harness_share": None}, "timing"))
        return RunOutcome(self.session.path, rows, dict(self.failed), interrupted=self.interrupted)


class StopSignals:
    """First Ctrl-C/SIGTERM: stop starting configs and let running ones finish their phase
    (marked interrupted, as in a sequential run); second: abort them (each worker then kills its
    server). Nothing is raised into the loop (``forward_signals``)."""

    def __init__(self, collector: Collector, on_first: Callable[[], None], on_second: Callable[[], None]) -> None:
        self.collector, self.on_first, self.on_second = collector, on_first, on_second
        self.count = 0
        self.forwarding = forward_signals(self.on_signal, collector.signalled)

    def __enter__(self) -> StopSignals:
        self.forwarding.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.forwarding.__exit__(None, None, None)

    def on_signal(self) -> None:
        self.count += 1
        self.collector.signalled()
        if self.count == 1:
            self.collector.progress("interrupt")
            self.on_first()
        else:
            if self.count == 2:
                self.collector.progress("notice", message="stopping now: workers told to kill their servers")
            self.on_second()
