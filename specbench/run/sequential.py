"""A sequential run: for each config (baseline first), launch or reach its server; for each data
set and load point, measure a phase → a cell; results are rewritten after every cell."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ..errors import LaunchError, RequestsRefused, RunDirWriteError, ServerError
from ..launch import reap_all
from ..schemas.cell import Cell, LoadPoint
from ..schemas.meta import RunMeta, ServerMeta, Timing
from ..schemas.request import Prompt
from ..schemas.row import ResultRow
from ..suite import ServerConfig, Suite
from .interrupts import Interrupts
from .phases import Phases
from .prefix_reset import reset_prefix_cache
from .preflight import load_points, preflight
from .recorder import Recorder
from .rounds import run_order, visits
from .servers import Server, auth_headers, open_server, request_spec, server_info
from .session import Progress, Render, RunSession


@dataclass
class RunOutcome:
    path: Path
    rows: list[ResultRow]
    failed_configs: dict[str, str]
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failed_configs or any(r.status != "ok" for r in self.rows) else 0


class SequentialRun:
    """Configs one after another into ``recorder`` (a ``RunSession``, or a parallel worker's channel).
    ``only_configs`` runs a subset; ``prompts`` given means they were loaded (and checked) already; ``cells``:
    one server visit per config measuring just these (cell, repeat), a parallel worker's round of ``load.restart``."""

    def __init__(self, suite: Suite, recorder: Recorder, *, progress: Progress | None = None,
                 restart_on_failure: bool = False, only_configs: list[str] | None = None,
                 grace_s: float = 10.0, prompts: dict[str, list[Prompt]] | None = None,
                 cells: Collection[tuple[Cell, int]] | None = None) -> None:
        self.suite, self.recorder, self.cells = suite, recorder, cells
        self.progress = progress or (lambda *a, **k: None)
        self.restart_on_failure, self.only_configs = restart_on_failure, only_configs
        self.grace_s, self.prompts = grace_s, prompts
        self.interrupts = Interrupts(self.progress)
        self.stop = self.interrupts.stop
        self.timing = {"servers_s": 0.0, "warmup_s": 0.0, "measured_s": 0.0}

    def interrupt(self) -> None:
        """What SIGINT/SIGTERM do (``Interrupts.interrupt``)."""
        self.interrupts.interrupt()

    async def execute(self) -> RunOutcome:
        t_start = time.monotonic()
        prompts = prepared(self.recorder, self.suite, self.prompts)
        failed: dict[str, str] = {}
        stopped_by: RunDirWriteError | None = None
        with self.interrupts.forwarded():
            try:
                self.recorder.begin(prompts)
            except BaseException:
                self.recorder.close()
                raise
            try:
                self.interrupts.body = asyncio.ensure_future(self._configs(prompts, failed))
                await self.interrupts.body
            except asyncio.CancelledError:
                if not self.interrupts.aborted:  # cancelled from outside, not by a second signal
                    raise
            except RunDirWriteError as err:  # the disk is full: measuring on would record nothing
                stopped_by = err
            finally:
                try:
                    await asyncio.to_thread(reap_all)  # off the loop: a signal meanwhile still kills at once
                    rows = self.recorder.finish(run_timing(self.timing, time.monotonic() - t_start))
                except RunDirWriteError:
                    if stopped_by is None:
                        raise
                    rows = []
                finally:
                    self.recorder.close()
        if stopped_by is not None:
            raise stopped_by
        return RunOutcome(self.recorder.path, rows, failed, interrupted=self.interrupts.interrupted)

    async def _configs(self, prompts: dict[str, list[Prompt]], failed: dict[str, str]) -> None:
        """Every config of the run, baseline first; ``failed`` gets each one's error."""
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                         headers=auth_headers(self.suite)) as session:
            phases = Phases(self.suite, session, self.stop, self.progress, self.grace_s, self.timing)
            await take_visits(self, phases, prompts, failed)

    async def attempt_config(self, phases: Phases, config: ServerConfig, prompts: dict[str, list[Prompt]],
                             only: Collection[tuple[Cell, int]] | None = None) -> str | None:
        """Run one config (``only``: just these (cell, repeat)); on a launch or server failure optionally
        restart it once. Returns the error, if any."""
        error = None
        for attempt in range(2 if self.restart_on_failure else 1):
            if attempt:
                self.recorder.config_restarting(config.name, attempt)
            try:
                await self._config(phases, config, prompts, only)
                return None
            except RequestsRefused as err:  # a restart would be refused the same way
                self.recorder.config_failed(config.name, str(err))
                return str(err)
            except (LaunchError, ServerError) as err:
                if self.stop.is_set():
                    return None  # stopped by the user, not a failure of the config
                error = str(err)
                self.recorder.config_failed(config.name, error)
        return error

    async def _config(self, phases: Phases, config: ServerConfig, prompts: dict[str, list[Prompt]],
                      only: Collection[tuple[Cell, int]] | None) -> None:
        load, mine = self.suite.load, [spec.name for spec in self.suite.datasets if config.runs_on(spec.name)]
        todo = to_measure(self.suite, config.name, mine, self.recorder.done(), only)
        searched = self.recorder.searched(config.name)
        searches = [] if load.rate_search is None else [name for name in mine if name not in searched]
        if not todo and not searches:
            return
        self.progress("server", config=config.name, launching=config.launched)
        server_cm = open_server(self.suite, config, self.recorder, phases.session, self.stop)
        async with timed_server(server_cm, phases.timing) as server:
            found = await server_info(phases.session, server.url, server.engine)
            server.info["version"] = found.version
            if found.error is not None:
                server.info["version_error"] = found.error
            self.recorder.server_ready(config.name, ServerMeta.from_dict(server.info, f"server of config {config.name}"))
            spec = request_spec(self.suite, server)
            if load.prefix_cache == "reset" and todo:  # a server without the endpoint fails before any warm-up
                await reset_prefix_cache(phases.session, server, spec.secrets)
            for dataset, point, rep in todo:
                if self.stop.is_set():
                    return
                if server.process is not None and not server.process.alive:
                    raise server.process.death("between cells")
                pool = prompts[dataset]
                chosen = pool[: load.prompts_at(point.concurrency, len(pool))]
                await phases.measure(server, spec, chosen, dataset, point, rep, self.recorder)
                if server.process is not None and not server.process.alive:
                    raise server.process.death(f"during data set {dataset!r} ({point.label})")
            for dataset in searches:
                if self.stop.is_set():
                    return
                await phases.search_rate(server, spec, prompts[dataset], dataset, self.recorder)


async def take_visits(run: SequentialRun, phases: Phases, prompts: dict[str, list[Prompt]], failed: dict[str, str]) -> None:
    """Each server visit of ``rounds.visits`` (or the one visit of ``run.cells``) in turn; a config succeeded once its
    visit ended without an error, or with ``load.restart`` once every round is done without one."""
    restart, cells = run.suite.load.restart, run.cells
    taken = (visits(run.suite, run.only_configs, failed, run.recorder.rows) if cells is None
             else ((config, set(cells)) for config in run_order(run.suite, run.only_configs)))
    for config, only in taken:
        if run.stop.is_set():
            return
        error = await run.attempt_config(phases, config, prompts, only)
        if error is not None:
            failed[config.name] = error
        elif not restart:
            run.recorder.config_succeeded(config.name)
    if restart:
        for config in run_order(run.suite, run.only_configs):
            if config.name not in failed and not run.stop.is_set():
                run.recorder.config_succeeded(config.name)


def to_measure(suite: Suite, config: str, mine: list[str], done: set[tuple[Cell, int]],
               only: Collection[tuple[Cell, int]] | None) -> list[tuple[str, LoadPoint, int]]:
    """(data set, load point, repeat) still to measure: ``only``'s, else every repeat of ``load.repeats``."""
    points = load_points(suite)
    wanted = set(only) if only is not None else {(Cell.at(config, name, point), rep) for name in mine
                                                 for point in points for rep in range(suite.load.repeats)}
    return [(name, point, rep) for name in mine for point in points for rep in range(suite.load.most_repeats)
            if (Cell.at(config, name, point), rep) in wanted - done]


def prepared(recorder: Recorder, suite: Suite, prompts: dict[str, list[Prompt]] | None) -> dict[str, list[Prompt]]:
    """The run dir checked (and locked) and the prompts loaded; on any failure the run dir is let go."""
    try:
        recorder.prepare()
        return prompts if prompts is not None else preflight(suite)
    except BaseException:
        recorder.close()
        raise


@asynccontextmanager
async def timed_server(cm: AbstractAsyncContextManager[Server], timing: dict[str, float]) -> AsyncIterator[Server]:
    """Time spent starting and stopping servers, kept apart from the harness's own overhead."""
    t0, t1 = time.monotonic(), None
    try:
        async with cm as server:
            timing["servers_s"] += time.monotonic() - t0
            try:
                yield server
            finally:
                t1 = time.monotonic()
    finally:
        if t1 is not None:
            timing["servers_s"] += time.monotonic() - t1


def run_timing(busy: dict[str, float], total: float) -> Timing:
    """meta.json's timing: servers, warm-up and measured time, and the harness's own share of the rest
    (``harness_share`` null, and written so, when the run took no time)."""
    spent = sum(busy.values())
    return Timing.from_dict({**{k: round(v, 3) for k, v in busy.items()}, "total_s": round(total, 3),
                             "harness_s": round(total - spent, 3),
                             "harness_share": round((total - spent) / total, 4) if total else None}, "timing")


async def run_suite(suite: Suite, out: Path, *, render: Render, resume: bool = False, overwrite: bool = False,
                    progress: Progress | None = None, extra_meta: RunMeta | None = None,
                    **kwargs: Any) -> RunOutcome:
    """``specbench run``: ``out`` must hold no run unless ``resume`` (continue it) or ``overwrite``
    (replace it); the keys set in ``extra_meta`` are set in meta.json."""
    session = RunSession(suite, out, render=render, resume=resume, overwrite=overwrite, progress=progress, extra_meta=extra_meta)
    return await SequentialRun(suite, session, progress=progress, **kwargs).execute()

