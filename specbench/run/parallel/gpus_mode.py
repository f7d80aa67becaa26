"""``--parallel gpus``: configs side by side on disjoint GPU sets of one machine, each worker a
subprocess (``python -m specbench.run.parallel --worker``) with its own ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from ...errors import RunDirWriteError, SuiteError
from ...launch import read_engine
from ...launch.process import log_tail
from ...schemas.request import Prompt
from ...suite import Suite
from .collector import Collector, StopSignals
from .messages import WorkerFinished, decode
from .planning import Job, WorkerJob


async def gpus_worker(collector: Collector, job_file: Path, err_file: Path, name: str,
                       children: dict[str, asyncio.subprocess.Process]) -> None:
    with err_file.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "specbench.run.parallel", "--worker", str(job_file),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=err,
            limit=1 << 30, start_new_session=True)  # own group: Ctrl-C reaches it through the collector only
    children[name] = proc
    finished = False
    try:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                msg = decode(line)
            except (ValueError, TypeError, KeyError):  # not a message (JSONDecodeError is a ValueError)
                continue
            try:
                collector.handle(msg)
            except RunDirWriteError:  # nothing more can be recorded: the worker goes (its watchdog stops the server)
                _kill_group(proc)
                await proc.wait()
                raise
            finished = finished or isinstance(msg, WorkerFinished)
        code = await proc.wait()
    finally:
        children.pop(name, None)
    if not finished:
        why = f"signal {-code}" if code < 0 else f"code {code}"
        tail = log_tail(err_file, 10)
        collector.fail(name, f"config {name!r}: worker process died ({why}) before finishing its cells"
                          + (f"\n{tail}" if tail and tail != "(no log)" else ""))


def _kill_group(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    """``sig`` to a worker's process group, only while the worker is our child not yet reaped: once asyncio has
    reaped it (``returncode`` set) its pid, the group's id, may be another process's."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def run_gpus(collector: Collector, suite: Suite, jobs: list[Job], gpu_ids: list[str], prompts: dict[str, list[Prompt]],
                   restart_on_failure: bool) -> None:
    """Each config in a subprocess with its own GPUs, started as soon as enough GPUs are free."""
    for job in jobs:
        config = next(c for c in suite.configs if c.name == job.config)
        if job.launched:
            engine = read_engine(config.engine or suite.engine)
            if not engine.gpu_env:
                raise SuiteError(f"{suite.path}: config {job.config!r}: engine {engine.name!r} has no gpu_env "
                                 "in its launcher, so --parallel gpus cannot give it its own GPUs")
    free = list(gpu_ids)
    busy: set[str] = set()
    pending = list(jobs)
    running: dict[asyncio.Task, tuple[Job, list[str]]] = {}
    children: dict[str, asyncio.subprocess.Process] = {}
    tmp = Path(tempfile.mkdtemp(prefix="specbench-parallel-"))

    def signal_children(sig: int) -> None:
        for proc in list(children.values()):
            _kill_group(proc, sig)

    for job in list(pending):
        if job.launched and job.gpus > len(gpu_ids):
            pending.remove(job)
            collector.fail(job.config, f"config {job.config!r} needs {job.gpus} GPUs; this machine has {len(gpu_ids)} "
                                       f"({','.join(gpu_ids)})")
    try:
        with StopSignals(collector, lambda: signal_children(signal.SIGINT), lambda: signal_children(signal.SIGINT)):
            while pending or running:
                if collector.stopping:
                    pending.clear()
                for job in list(pending):
                    need = job.gpus if job.launched else 0
                    if need > len(free) or job.exclusive & busy:
                        continue
                    take, free[:] = free[:need], free[need:]
                    busy |= job.exclusive
                    pending.remove(job)
                    payload = WorkerJob(suite, job.config, job.done_phases, restart_on_failure,
                                        gpus=",".join(take) if job.launched else None, log_dir=str(collector.logs),
                                        first_start=collector.first_start(job.config), only=job.only)
                    job_file = tmp / f"{len(running)}-{time.monotonic_ns()}.pkl"
                    with job_file.open("wb") as f:
                        pickle.dump((payload, prompts), f)
                    collector.progress("server", config=job.config, launching=job.launched)
                    task = asyncio.create_task(gpus_worker(collector, job_file, job_file.with_suffix(".stderr"),
                                                            job.config, children))
                    running[task] = (job, take)
                if not running:
                    break
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    job, take = running.pop(task)
                    free.extend(take)
                    free.sort(key=gpu_ids.index)
                    busy -= job.exclusive
                    if task.exception() is not None:
                        err = task.exception()
                        if isinstance(err, RunDirWriteError):
                            raise err
                        collector.fail(job.config, f"config {job.config!r}: worker could not run: {type(err).__name__}: {err}")
    finally:
        if children:  # aborted: their watchdogs stop the servers
            signal_children(signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
