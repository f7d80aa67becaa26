"""One run directory in use: meta.json's life (start, resume, comparability, supersede, notes,
timing) on top of ``RunDir``'s files. A sequential run and the parallel collector both record
through it, so both leave the same files."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..errors import SuiteError
from ..grade import grade_phase
from ..launch.owned import not_the_recorded, stop_leftover
from ..measure.best_k import tune_analysis
from ..measure.explained import Explained, explain
from ..measure.slo import attach_capacity
from ..schemas.cell import Cell
from ..schemas.launched import ProcessIdentity, StoppedLeftover
from ..schemas.meta import RunMeta, ServerMeta, Timing
from ..schemas.notes import Note
from ..schemas.phase import PhaseInfo
from ..schemas.request import Prompt, RequestRecord
from ..schemas.row import ResultRow
from ..schemas.run_files import META
from ..schemas.slo_search import SloSearch
from ..suite import Suite
from .hardware import accelerator_of
from .lock import RunLock
from .preflight import now
from .prompt_prints import check_resumed_prompts, merge_prints, prompt_prints
from .provenance import suite_file_provenance
from .results import LiveRows, redact_raw, run_notes, weights_meta
from .rundir import RunDir

Progress = Callable[..., None]
#: results.md from the rows and meta.json: the report stage's table, handed in by the command (run never imports report)
Render = Callable[[list[ResultRow], RunMeta, Explained], str]


def changed_comparability(suite: Suite, previous: RunMeta, phases: list[PhaseInfo]) -> list[str]:
    """The comparability keys a resumed suite changed; of configs and data sets only those with
    measured cells must stay the same (a config that never ran may be fixed)."""
    old, new = previous.comparability.to_dict() if previous.comparability else {}, suite.comparability().to_dict()
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k not in ("configs", "datasets"))
    measured = {"configs": {p.config for p in phases}, "datasets": {p.dataset for p in phases}}
    for group in ("configs", "datasets"):
        o, n = old.get(group, {}), new.get(group, {})
        changed += [f"{group}.{name}" for name in sorted(set(o) & set(n) & measured[group]) if o[name] != n[name]]
    return changed


def check_usable(run: RunDir, suite: Suite, *, resume: bool, overwrite: bool) -> None:
    """A fresh run needs an empty ``run``; a resumed one a run of a comparable suite."""
    if resume:
        run.check_resumable()
        previous = run.read_meta()
        changed = changed_comparability(suite, previous, run.read_phases()) if previous else []
        if changed:
            raise SuiteError(f"{suite.path}: cannot resume {run.path}: the suite changed in ways that "
                             f"break comparability: {', '.join(changed)}")
    elif not overwrite:
        run.check_fresh()


def resumed_meta(run: RunDir, suite: Suite, prompts: dict[str, list[Prompt]]) -> RunMeta | None:
    """The meta.json of the run to resume, once the prompts of its measured data sets are found
    unchanged (``check_resumed_prompts``)."""
    previous = run.read_meta()
    if previous is not None:
        check_resumed_prompts(suite, run.path, previous, prompt_prints(suite, prompts),
                              {p.dataset for p in run.read_phases() if p.complete})
    return previous


def new_meta(suite: Suite, prompts: dict[str, list[Prompt]]) -> RunMeta:
    """meta.json of a run that starts afresh."""
    return RunMeta.from_dict({
        "specbench_version": __version__,
        "suite": {"name": suite.name, "path": str(suite.path), "raw": redact_raw(suite.raw)},
        "suite_file": suite_file_provenance(suite.path).to_dict(),
        "comparability": suite.comparability().to_dict(),
        "prompts": {name: p.to_dict() for name, p in prompt_prints(suite, prompts).items()},
        **weights_meta(suite),
        "started_at": now(),
        "host": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "servers": {},
        "failed_configs": {},
    }, f"{suite.path}: {META}")


def stop_leftovers(run: RunDir, progress: Progress) -> list[StoppedLeftover]:
    """Stop the servers an earlier, killed run left running in ``run``; the ones stopped. A recorded pid now held
    by another process is left alone, and the run says so in one line."""
    stopped = []
    for name, identity in run.launched().items():
        if (why := not_the_recorded(identity)) is not None:
            progress("notice", message=f"not signalled: pid {identity.pid}, recorded for config {name!r} in launched.json: {why}")
        elif stop_leftover(identity):
            stopped.append(StoppedLeftover.of(name, identity))
            progress("notice", message=f"stopped a leftover server of config {name!r} (pid {identity.pid}) "
                                       f"that an earlier, killed run had left running")
    run.forget_all_servers()
    return stopped


def take(run: RunDir, lock: RunLock, suite: Suite, *, resume: bool, overwrite: bool) -> None:
    """Make ``run`` (unless resuming) and lock it, then ``check_usable``; on a refusal let go of both."""
    try:
        lock.claim(run.make if not resume else None)
        check_usable(run, suite, resume=resume, overwrite=overwrite)
    except BaseException:
        lock.release(used=False)
        raise


class ServerStarts:
    """What ``load.restart``'s rounds ask of a session: each launch's index, and the rows as last written (written
    now when none were yet)."""

    meta: RunMeta
    latest: tuple[ResultRow, ...] = ()
    write: Callable[..., list[ResultRow]]

    def next_start(self, name: str) -> int:
        return self.meta.next_start(name)  # saved with the server's ready record

    def rows(self) -> list[ResultRow]:
        return list(self.latest) if self.latest else self.write()

    def written(self, rows: list[ResultRow]) -> list[ResultRow]:
        self.latest = tuple(rows)
        return rows


class RunSession(ServerStarts):
    """The run dir of one ``specbench run``: fresh (``out`` must hold no run), ``resume`` (continue
    it) or ``overwrite`` (replace it). The keys set in ``extra_meta`` (a command's plan, a parallel run's
    placement) are set in meta.json at ``begin``; ``render`` writes results.md beside every results.json."""

    def __init__(self, suite: Suite, out: Path, *, render: Render, resume: bool = False, overwrite: bool = False,
                 progress: Progress | None = None, extra_meta: RunMeta | None = None) -> None:
        if resume and overwrite:
            raise SuiteError("--resume and --overwrite exclude each other")
        self.suite, self.dir, self.render = suite, RunDir(out), render
        self.resume, self.overwrite = resume, overwrite
        self.progress = progress or (lambda *a, **k: None)
        self.extra_meta = extra_meta or RunMeta()
        self.stopped_leftovers: list[StoppedLeftover] = []
        self.meta = RunMeta()  # until ``begin``: the new run's, or the resumed run's from disk
        self.live = LiveRows(suite, self.dir.path)  # the rows so far: read from the files at ``begin``, then kept
        self.path, self.logs = self.dir.path, self.dir.logs
        self.lock = RunLock(self.path)

    def prepare(self) -> None:
        """Before anything is loaded or launched: take the run dir's lock (until ``close``), refuse a
        run dir that cannot be used as asked (one line, exit 2, nothing left behind), then stop
        servers a killed earlier run left running in it."""
        take(self.dir, self.lock, self.suite, resume=self.resume, overwrite=self.overwrite)
        if self.resume or self.overwrite:
            self.stopped_leftovers = stop_leftovers(self.dir, self.progress)

    def close(self) -> None:
        """Let go of the run dir (``RunLock.release``)."""
        self.lock.release(used=bool(self.meta.keys()))

    def begin(self, prompts: dict[str, list[Prompt]]) -> None:
        """Open the run dir for writing: cleared (--overwrite), or once ``prompts`` are found unchanged
        (``resumed_meta``) its damaged lines quarantined and its cut phases set aside (--resume)."""
        if self.overwrite:
            self.dir.clear()
        self.dir.create()
        self.lock.mark()
        self.meta = (resumed_meta(self.dir, self.suite, prompts) if self.resume else None) or new_meta(self.suite, prompts)
        self.meta.start_run(now(), resume=self.resume, overwrite=self.overwrite, stopped_leftovers=self.stopped_leftovers)
        self.meta.update({key: getattr(self.extra_meta, key) for key in self.extra_meta.keys()})
        if self.resume:
            self.supersede_incomplete(merge_prints(self.meta, prompt_prints(self.suite, prompts)))
        self.save_meta()

    def supersede_incomplete(self, said: tuple[Note, ...] = ()) -> None:
        """Set aside what must be measured again (the cut phases are listed in meta.json), after
        quarantining unreadable lines (``RunDir.supersede_incomplete``); ``said``: notes kept already."""
        cut, notes = self.dir.supersede_incomplete()
        for note in (*said, *notes):  # said now (the progress sink words it) and kept under the table
            self.progress("notice", message=note)
        self.meta.set_aside(cut, notes)
        self.live.reset(self.dir.read_phases(), self.dir.read_requests())  # the files as they now are, read once

    def done(self) -> set[tuple[Cell, int]]:
        return {(p.cell, p.repeat) for p in self.live.phases if p.complete}

    def searched(self, config: str) -> set[str]:
        return self.meta.searched(config)

    def save_meta(self) -> None:
        self.dir.write_meta(self.meta)

    # ---- what a run reports, in the order it happens ----
    def record_server(self, name: str, identity: ProcessIdentity) -> None:
        self.dir.record_server(name, identity)

    def forget_server(self, name: str) -> None:
        self.dir.forget_server(name)

    def server_ready(self, name: str, server: ServerMeta) -> None:
        if server.accelerator is None:  # a parallel worker read it on its own machine
            server.accelerator = accelerator_of(self.suite, name)
        self.meta.server_ready(name, server)
        self.save_meta()

    def chunk_clock(self, name: str, clock: str) -> None:
        self.meta.set_chunk_clock(name, clock)

    def store_phase(self, info: PhaseInfo, records: list[RequestRecord]) -> None:
        grade_phase(self.suite, info.dataset, records)
        self.live.add(*self.dir.append_phase(info, records))  # the raw files first, then the rows from memory
        rows = self.write()
        self.progress("cell_done", row=next((r for r in rows if Cell.of_row(r) == info.cell), None))

    def store_probes(self, records: list[RequestRecord], rate: float) -> None:
        self.dir.append_probes(records, rate)
        self.progress("cell_done", row=None)

    def store_search(self, name: str, dataset: str, result: SloSearch) -> None:
        self.meta.store_search(name, dataset, result)
        self.write()

    def config_failed(self, name: str, error: str) -> None:
        self.meta.config_failed(name, error)
        self.progress("config_failed", config=name, error=error)

    def config_restarting(self, name: str, attempt: int) -> None:
        self.meta.config_restarting(name, attempt)
        self.supersede_incomplete()

    def config_succeeded(self, name: str) -> None:
        self.meta.config_succeeded(name)

    def write(self, *, final: bool = False) -> list[ResultRow]:
        """The rows so far (``LiveRows``); rewrite meta.json (its notes, which `specbench report` prints too) and the results."""
        rows = self.live.rows()
        attach_capacity(rows, self.meta.slo_search, self.suite.baseline.name if self.suite.baseline else None)
        if final and self.meta.tune is not None:  # a tune run: its choice of K, made once, as the run is written
            self.meta.tune.result = tune_analysis(rows, self.live.records, self.meta)
        self.meta.updated_at = now()
        self.meta.notes = run_notes(self.suite, self.meta.chunk_clock) + (self.meta.run_dir_notes or []) + self.meta.failed_notes()
        self.save_meta()
        self.dir.write_results(rows, self.render(rows, self.meta, explain(rows, self.meta)))
        return self.written(rows)

    def finish(self, timing: Timing) -> list[ResultRow]:
        self.meta.finished_at = now()
        self.meta.timing = timing
        return self.write(final=True)
