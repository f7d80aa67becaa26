"""The driver: the one writer of the run dir, and the gpus / Ray modes that feed it."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..errors import LaunchError, SuiteError
from .planning import FORWARDED_ENV, MAX_LOG_BYTES, MODES, RAY_EXTRA, Job, _now, detect_gpus, plan, suite_gpus_per_server
from .worker import _ray_config_task


class Driver:
    """The one writer of the run dir: a Runner used for its meta, resume and results logic."""

    def __init__(self, suite, out: Path, *, resume: bool, progress, mode: str, overwrite: bool = False) -> None:
        from ..runner import Runner

        self.runner = Runner(suite, out, resume=resume, progress=progress, overwrite=overwrite)
        self.suite, self.mode, self.resume = suite, mode, resume
        self.progress = self.runner.progress
        self.failed: dict[str, str] = {}
        self.interrupted = False
        self.stopping = False
        self.done_configs: set[str] = set()
        self.t_start = time.monotonic()

    @property
    def meta(self) -> dict[str, Any]:
        return self.runner.meta

    @property
    def logs(self) -> Path:
        return self.runner.run.logs

    def prepare(self) -> None:
        """The run dir checks and leftover servers, before prompts are loaded (``Runner.prepare``)."""
        self.runner.prepare()

    def begin(self, extra: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """Create, clear or reopen the run dir; return the phases already measured, per config."""
        r = self.runner
        r.begin()  # on resume: damaged lines quarantined, phases cut short set aside to be measured again
        done_by: dict[str, list[dict[str, Any]]] = {}
        if self.resume:
            for p in r.run.load_phases():
                if p.complete:
                    done_by.setdefault(p.config, []).append(p.to_dict())
        self.meta["parallel"] = {"mode": self.mode, **extra, "configs": {}}
        self.meta["runs"][-1]["parallel"] = self.mode
        r.run.write_meta(self.meta)
        return done_by

    def handle(self, msg: dict[str, Any]) -> None:
        from ..measure import PhaseInfo
        from ..records import RequestRecord

        kind, name = msg.get("type"), msg.get("config", "")
        if kind == "start":
            self.meta["parallel"]["configs"][name] = {k: msg.get(k) for k in ("gpus", "port", "host", "node", "started_at")}
            self.runner.run.write_meta(self.meta)
        elif kind == "server":
            info = dict(msg["info"])
            if self.mode == "ray" and info.get("log"):  # shipped here when the worker ends
                entry = self.meta["parallel"]["configs"].setdefault(name, {})
                entry["log_on_node"] = info["log"]
                info["log"] = str(self.logs / f"{name}.log")
            self.meta["servers"][name] = info
            if msg.get("chunk_clock"):
                self.meta.setdefault("chunk_clock", {})[name] = msg["chunk_clock"]
            self.runner.run.write_meta(self.meta)
        elif kind == "phase":
            phase = PhaseInfo.from_dict(msg["info"])
            self.runner.store_phase(phase, [RequestRecord.from_dict(r) for r in msg["records"]])
        elif kind == "launched":  # a worker's server, recorded here so --resume can stop it if all are killed
            if msg.get("identity"):
                self.runner.run.record_server(name, msg["identity"])
            else:
                self.runner.run.forget_server(name)
        elif kind == "log":
            self.logs.mkdir(parents=True, exist_ok=True)
            with (self.logs / f"{name}.log").open("a") as f:
                if msg.get("truncated"):
                    f.write(f"[specbench: log from the worker cut to its last {MAX_LOG_BYTES >> 20} MiB]\n")
                f.write(msg["text"])
        elif kind == "done":
            entry = self.meta["parallel"]["configs"].setdefault(name, {})
            entry["finished_at"] = msg.get("finished_at")
            if msg.get("interrupted"):
                self.interrupted = True
            if msg.get("failed"):
                for cfg, err in msg["failed"].items():
                    self.fail(cfg, err, traceback_text=msg.get("traceback"))
            else:
                self.succeed(name)
            self.runner.run.write_meta(self.meta)

    def fail(self, name: str, error: str, traceback_text: str | None = None) -> None:
        self.failed[name] = error
        self.meta["failed_configs"][name] = error
        if traceback_text:
            self.meta["parallel"]["configs"].setdefault(name, {})["traceback"] = traceback_text
        self.progress("config_failed", config=name, error=error)
        self.runner.run.write_meta(self.meta)

    def succeed(self, name: str) -> None:
        """A config that completed every cell this time is no longer failed (from an earlier run)."""
        self.done_configs.add(name)
        if not self.interrupted:
            self.meta["failed_configs"].pop(name, None)

    def finish(self):
        from ..runner import RunOutcome

        self.meta["finished_at"] = _now()
        total = time.monotonic() - self.t_start
        measured = sum(p.wall_s for p in self.runner.run.load_phases())
        # configs run side by side, so per-config times overlap and do not add up to the total
        self.meta["timing"] = {"total_s": round(total, 3), "measured_s": round(measured, 3),
                               "parallel": True, "harness_s": None, "harness_share": None}
        rows = self.runner.write()
        return RunOutcome(self.runner.run.path, rows, dict(self.failed), interrupted=self.interrupted)


def _worker_env(suite) -> dict[str, str]:
    names = list(FORWARDED_ENV) + ([suite.api_key_env] if suite.api_key_env else [])
    return {k: os.environ[k] for k in names if k in os.environ}


def _load_prompts(suite) -> dict[str, Any]:
    """The data-set half of preflight (engines may exist only on the cluster's nodes)."""
    from ..launch import load_engine
    from ..runner import load_suite_prompts

    for config in suite.configs:
        load_engine(config.engine or suite.engine)
    return load_suite_prompts(suite)


class _Signals:
    """First Ctrl-C/SIGTERM: stop starting configs and let running ones finish their phase
    (marked interrupted, as in a sequential run); second: abort them."""

    def __init__(self, driver: Driver, on_first: Callable[[], None], on_second: Callable[[], None]) -> None:
        self.driver, self.on_first, self.on_second = driver, on_first, on_second
        self.handled: list[int] = []
        self.count = 0

    def __enter__(self) -> _Signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal)
                self.handled.append(sig)
            except (RuntimeError, ValueError):  # not the main thread: the caller owns signals
                pass
        return self

    def __exit__(self, *exc) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.handled:
            loop.remove_signal_handler(sig)

    def _on_signal(self) -> None:
        self.count += 1
        self.driver.stopping = True
        self.driver.interrupted = True
        if self.count == 1:
            self.driver.progress("interrupt")
            self.on_first()
        else:
            self.on_second()
            raise KeyboardInterrupt


# -- gpus mode --


async def _gpus_worker(driver: Driver, job_file: Path, err_file: Path, name: str,
                       children: dict[str, asyncio.subprocess.Process]) -> None:
    with err_file.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "specbench.parallel", "--worker", str(job_file),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=err,
            limit=1 << 30, start_new_session=True)  # own group: Ctrl-C reaches it through the driver only
    children[name] = proc
    finished = False
    try:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            driver.handle(msg)
            finished = finished or msg.get("type") == "done"
        code = await proc.wait()
    finally:
        children.pop(name, None)
    if not finished:
        from ..launch.process import log_tail

        why = f"signal {-code}" if code < 0 else f"code {code}"
        tail = log_tail(err_file, 10)
        driver.fail(name, f"config {name!r}: worker process died ({why}) before finishing its cells"
                          + (f"\n{tail}" if tail and tail != "(no log)" else ""))


async def _run_gpus(driver: Driver, suite, jobs: list[Job], gpu_ids: list[str], prompts, restart_on_failure: bool) -> None:
    from ..launch import load_engine

    for job in jobs:
        config = next(c for c in suite.configs if c.name == job.config)
        if job.launched:
            engine = load_engine(config.engine or suite.engine)
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
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    for job in list(pending):
        if job.launched and job.gpus > len(gpu_ids):
            pending.remove(job)
            driver.fail(job.config, f"config {job.config!r} needs {job.gpus} GPUs; this machine has {len(gpu_ids)} "
                                    f"({','.join(gpu_ids)})")
    try:
        with _Signals(driver, lambda: signal_children(signal.SIGINT), lambda: signal_children(signal.SIGINT)):
            while pending or running:
                if driver.stopping:
                    pending.clear()
                for job in list(pending):
                    need = job.gpus if job.launched else 0
                    if need > len(free) or job.exclusive & busy:
                        continue
                    take, free[:] = free[:need], free[need:]
                    busy |= job.exclusive
                    pending.remove(job)
                    payload = {"suite": suite, "config": job.config, "gpus": ",".join(take) if job.launched else None,
                               "done_phases": job.done_phases, "log_dir": str(driver.logs),
                               "restart_on_failure": restart_on_failure, "env": {}}
                    job_file = tmp / f"{len(running)}-{time.monotonic_ns()}.pkl"
                    with job_file.open("wb") as f:
                        pickle.dump((payload, prompts), f)
                    driver.progress("server", config=job.config, launching=job.launched)
                    task = asyncio.create_task(_gpus_worker(driver, job_file, job_file.with_suffix(".stderr"),
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
                        driver.fail(job.config, f"config {job.config!r}: worker could not run: {type(err).__name__}: {err}")
    finally:
        if children:  # aborted: their watchdogs stop the servers
            signal_children(signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


# -- ray mode --


def import_ray():
    try:
        import ray
    except ImportError:
        raise LaunchError(f"--ray needs Ray: pip install '{RAY_EXTRA}' (or pip install ray)") from None
    return ray


async def _run_ray(driver: Driver, suite, jobs: list[Job], address: str | None, prompts, restart_on_failure: bool) -> None:
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address or "auto", log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise LaunchError(f"--ray {address or 'auto'}: cannot connect to a Ray cluster: {err}") from None
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        largest = max((int(n.get("Resources", {}).get("GPU", 0)) for n in nodes), default=0)
        driver.meta["parallel"].update(ray_version=ray.__version__, nodes=len(nodes),
                                       cluster_resources={k: v for k, v in ray.cluster_resources().items()
                                                          if not k.startswith("node:")})
        here = ray.get_runtime_context().get_node_id()
        prompts_ref = ray.put(prompts)
        remote = ray.remote(_ray_config_task)
        cpus = float(os.environ.get("SPECBENCH_RAY_CPUS", "1"))
        env = _worker_env(suite)
        run_id = f"{driver.runner.run.path.name}-{driver.meta.get('started_at', '')}"
        gens: dict[str, Any] = {}

        def cancel(force: bool) -> None:
            for gen in list(gens.values()):
                try:
                    ray.cancel(gen, force=force)
                except Exception:  # already finished, or the node is gone
                    pass

        async def consume(job: Job) -> None:
            if driver.stopping:
                return
            if job.launched and job.gpus > largest:
                driver.fail(job.config, f"config {job.config!r} needs {job.gpus} GPUs on one node; the largest node of "
                                        f"the Ray cluster has {largest}")
                return
            opts: dict[str, Any] = dict(num_cpus=cpus, num_gpus=job.gpus if job.launched else 0, max_retries=0,
                                        num_returns="streaming")
            if not job.launched:  # a URL the driver was given: measure it from the driver's node
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
            payload = {"suite": suite, "config": job.config, "gpus": None, "gpus_needed": job.launched and job.gpus > 0,
                       "done_phases": job.done_phases, "log_dir": None, "run_id": run_id,
                       "restart_on_failure": restart_on_failure, "env": env}
            driver.progress("server", config=job.config, launching=job.launched)
            gen = remote.options(**opts).remote(payload, prompts_ref)
            gens[job.config] = gen
            finished = False
            try:
                async for ref in gen:
                    msg = await ref
                    driver.handle(msg)
                    finished = finished or msg.get("type") == "done"
            except ray.exceptions.TaskCancelledError:
                driver.interrupted = True
                return
            except ray.exceptions.RayError as err:
                if not finished:
                    where = driver.meta["parallel"]["configs"].get(job.config, {})
                    node = f" on node {where.get('host')} ({str(where.get('node'))[:12]})" if where else ""
                    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                    log = where.get("log_on_node")
                    driver.fail(job.config, f"config {job.config!r}: Ray worker lost{node}: {type(err).__name__}: {first}"
                                            + (f" (its server log stays on that node: {log})" if log else ""))
                    return
            finally:
                gens.pop(job.config, None)
            if not finished and not driver.stopping:
                driver.fail(job.config, f"config {job.config!r}: Ray task ended without finishing its cells")

        async def url_lane(url_jobs: list[Job]) -> None:
            for job in url_jobs:
                await consume(job)

        with _Signals(driver, lambda: cancel(False), lambda: cancel(True)):
            launched = [j for j in jobs if j.launched]
            url_jobs = [j for j in jobs if not j.launched]
            # Ray queues the tasks in submission order (baseline first) and packs them onto nodes
            await asyncio.gather(*(consume(j) for j in launched), url_lane(url_jobs))
    finally:
        if started_here:
            ray.shutdown()


async def run_parallel(suite, out: Path, *, mode: Literal["gpus", "ray"], address: str | None = None,
                       resume: bool = False, progress=None, gpus_per_server: int | None = None,
                       restart_on_failure: bool = False, overwrite: bool = False):
    """Run ``suite`` into ``out`` with configs in parallel; returns the same ``RunOutcome`` as
    ``run_suite``. ``mode="gpus"``: this machine's GPUs (``SPECBENCH_GPUS`` or ``nvidia-smi -L``);
    ``mode="ray"``: the Ray cluster at ``address`` ("auto": the one ``ray start`` made here)."""
    from ..runner import preflight

    if mode not in MODES:
        raise SuiteError(f"parallel mode must be one of {', '.join(MODES)}, got {mode!r}")
    per_server = suite_gpus_per_server(suite, gpus_per_server)
    out = Path(out)
    driver = Driver(suite, out, resume=resume, progress=progress, mode=mode, overwrite=overwrite)
    driver.prepare()
    if mode == "gpus":
        gpu_ids = detect_gpus()
        prompts = preflight(suite)
        where: dict[str, Any] = {"gpus": gpu_ids}

        def run(driver, jobs):
            return _run_gpus(driver, suite, jobs, gpu_ids, prompts, restart_on_failure)
    else:
        import_ray()
        prompts = _load_prompts(suite)
        where = {"address": address}

        def run(driver, jobs):
            return _run_ray(driver, suite, jobs, address, prompts, restart_on_failure)
    done_by = driver.begin({**where, "gpus_per_server": per_server})
    jobs = plan(suite, done_by, per_server)
    try:
        await run(driver, jobs)
    finally:
        outcome = driver.finish()
    return outcome

