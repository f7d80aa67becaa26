"""Scale a run out: configs side by side on disjoint GPU sets of one machine (``--parallel gpus``),
or as Ray tasks on a cluster (``--ray ADDRESS``). See docs/parallel.md.

One config = one worker: it starts the config's server and drives it with the ordinary
``Runner`` (``only_configs=[name]``), on the same machine as its server, and streams every
measured phase back as plain dicts. The driver (this process) is the only writer of the run
dir: each phase goes through ``RunDir.append_phase`` and the runner's rewrite of results, so a
parallel run leaves exactly the files a sequential run leaves, and ``--resume`` works on either.

- ``gpus``: workers are subprocesses of the driver (``python -m specbench.parallel --worker``),
  each given its own ``CUDA_VISIBLE_DEVICES`` set; a config starts as soon as enough GPUs are
  free, so no GPU is ever shared and at most ``total // gpus_per_server`` configs run at once.
- ``ray``: workers are Ray generator tasks with ``num_gpus`` = the config's GPU count; Ray picks
  a node with that many free GPUs and sets ``CUDA_VISIBLE_DEVICES``. A lost worker or node fails
  only its config (``meta.json`` ``failed_configs``); ``--resume`` reruns its missing cells.

A worker that dies hard (SIGKILL, OOM, lost node) cannot stop its server itself: a tiny
watchdog process started next to each worker kills the server process groups the worker had
started once the worker is gone.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .errors import LaunchError, SuiteError

MODES = ("gpus", "ray")
RAY_EXTRA = "specbench[ray]"
# forwarded to Ray workers (a cluster's workers do not inherit the driver's environment)
FORWARDED_ENV = ("SPECBENCH_LAUNCHERS", "SPECBENCH_ENGINE_PYTHON")
MAX_LOG_BYTES = 32 << 20  # server log shipped back from a Ray worker: its last 32 MiB


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


# ---- planning: how many GPUs each config needs, and which GPUs there are ----------------------

_PARALLEL_FLAGS = {
    "tp": ("--tensor-parallel-size", "-tp", "--tp-size", "--tp"),
    "pp": ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp"),
    "dp": ("--data-parallel-size", "-dp", "--dp-size", "--dp"),
}


def parallel_size(args: tuple[str, ...] | list[str], where: str = "args") -> int | None:
    """GPUs an engine argv asks for: tensor × pipeline × data parallel size (vLLM and SGLang
    spellings; the last occurrence wins, as in argparse). None when no such flag is given.
    SGLang's ``--enable-dp-attention`` runs data parallelism inside the TP group: tp × pp."""
    sizes: dict[str, int] = {}
    args = list(args)
    for i, arg in enumerate(args):
        for key, flags in _PARALLEL_FLAGS.items():
            for flag in flags:
                value = None
                if arg == flag and i + 1 < len(args):
                    value = args[i + 1]
                elif arg.startswith(flag + "="):
                    value = arg.split("=", 1)[1]
                if value is None:
                    continue
                try:
                    sizes[key] = int(value)
                except ValueError:
                    raise SuiteError(f"{where}: {flag} expects an integer, got {value!r}") from None
                if sizes[key] < 1:
                    raise SuiteError(f"{where}: {flag} expects a positive integer, got {value!r}")
    if not sizes:
        return None
    dp = 1 if "--enable-dp-attention" in args else sizes.get("dp", 1)
    return sizes.get("tp", 1) * sizes.get("pp", 1) * dp


def suite_gpus_per_server(suite, override: int | None = None) -> int:
    """``server.gpus_per_server`` (default 1); ``override`` (the API argument) wins."""
    if override is not None:
        value = override
    else:
        value = getattr(suite.server, "gpus_per_server", None)
        if value is None:
            value = (suite.raw.get("server") or {}).get("gpus_per_server", 1) if isinstance(suite.raw, dict) else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SuiteError(f"{suite.path}: server.gpus_per_server: expected 0 or a positive integer, got {value!r}")
    return value


def config_gpu_count(suite, config, default: int) -> int:
    """GPUs one config needs: its ``gpus:`` list (its length: in a parallel run the scheduler owns
    the ids), else the parallel size of its argv (``server.args`` then the config's ``args``), else
    ``default`` (gpus_per_server). A config reached at a URL needs none."""
    if not config.launched:
        return 0
    if config.gpus:
        return len([g for g in config.gpus.split(",") if g.strip()])
    size = parallel_size(tuple(suite.server.args) + tuple(config.args), f"{suite.path}: configs {config.name!r}")
    return size if size is not None else default


def detect_gpus() -> list[str]:
    """GPU ids of this machine: ``SPECBENCH_GPUS`` ("0,1,2,3"), else ``CUDA_VISIBLE_DEVICES``,
    else ``nvidia-smi -L``."""
    for var in ("SPECBENCH_GPUS", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(var)
        if value is not None and (value.strip() or var == "SPECBENCH_GPUS"):
            ids = [g.strip() for g in value.split(",") if g.strip()]
            if not ids or ids == ["-1"]:
                raise LaunchError(f"--parallel gpus: {var}={value!r} names no GPU")
            if len(set(ids)) != len(ids):
                raise LaunchError(f"--parallel gpus: {var}={value!r} names a GPU twice")
            return ids
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise LaunchError("--parallel gpus: no GPU found (nvidia-smi is not installed); "
                          "name them with SPECBENCH_GPUS=0,1,...") from None
    except subprocess.TimeoutExpired:
        raise LaunchError("--parallel gpus: nvidia-smi -L did not answer within 60 s") from None
    ids = re.findall(r"^GPU (\d+):", out.stdout, flags=re.M)
    if out.returncode != 0 or not ids:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise LaunchError(f"--parallel gpus: nvidia-smi -L found no GPU ({detail[0] if detail else f'exit {out.returncode}'}); "
                          "name them with SPECBENCH_GPUS=0,1,...")
    return ids


@dataclass
class Job:
    """One config's share of the run, as planned by the driver."""

    config: str
    gpus: int  # how many
    launched: bool
    done_phases: list[dict[str, Any]] = field(default_factory=list)
    exclusive: frozenset[str] = frozenset()  # keys no two running jobs may hold (url lane, fixed ports)


# ---- worker side: one config, in a subprocess (gpus) or a Ray task (ray) ----------------------

_PORT_DIR = Path(tempfile.gettempdir()) / f"specbench-ports-{os.getuid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_port(host: str) -> tuple[int, Path]:
    """A free port no other specbench worker on this machine holds (a claim file per port, so
    servers that take minutes to bind cannot be handed the same port)."""
    from .launch.process import free_port

    _PORT_DIR.mkdir(parents=True, exist_ok=True)
    for _ in range(200):
        port = free_port(host)
        path = _PORT_DIR / str(port)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder and not _pid_alive(holder):  # left by a worker that died
                path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return port, path
    raise LaunchError(f"no free port on {host} after 200 tries")


def node_log_dir(run_id: str) -> Path:
    """Where a Ray worker writes its server's log on its node (shipped to the driver at the end)."""
    return Path(tempfile.gettempdir()) / "specbench-logs" / re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)


def sweep_stale() -> None:
    """Remove port claims and scratch dirs left by workers that were killed with their watchdog
    (Ray kills a dead worker's whole process tree)."""
    for path in list(_PORT_DIR.glob("*")) if _PORT_DIR.is_dir() else []:
        try:
            holder = int(path.read_text() or 0)
        except (OSError, ValueError):
            continue
        if holder and not _pid_alive(holder):
            path.unlink(missing_ok=True)
    for path in Path(tempfile.gettempdir()).glob("specbench-w*-*"):
        m = re.match(r"specbench-w(\d+)-", path.name)
        if m and path.is_dir() and not _pid_alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)


# Runs as `python -c` next to a worker: remembers the server process groups the worker starts
# (children of the worker that lead their own session, as ServerProcess starts them) and kills
# them if the worker dies without stopping them; removes the worker's scratch dir and port claims too.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
worker, scratch, ports, me = int(sys.argv[1]), sys.argv[2], sys.argv[3], os.getpid()
def children():
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[1]) == worker and int(rest[3]) == int(d):
            out.add(int(d))
    return out
seen = set()
while os.getppid() == worker:
    seen |= children()
    time.sleep(0.5)
alive = []
for pid in seen:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGTERM)
            alive.append(pid)
    except OSError:
        pass
deadline = time.time() + 15
while alive and time.time() < deadline:
    time.sleep(0.5)
    alive = [p for p in alive if os.path.exists(f"/proc/{p}")]
for pid in alive:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
shutil.rmtree(scratch, ignore_errors=True)
for name in os.listdir(ports) if os.path.isdir(ports) else []:
    try:
        with open(os.path.join(ports, name)) as f:
            if f.read().strip() == str(worker):
                os.unlink(os.path.join(ports, name))
    except OSError:
        pass
"""


def _start_watchdog(scratch: Path) -> subprocess.Popen | None:
    if not Path("/proc/self/stat").exists():
        return None
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(scratch), str(_PORT_DIR)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop_watchdog(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    proc.kill()  # our own child, by its handle
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class WorkerControl:
    """Lets the thread that owns a worker ask its runner to stop (Ray cancellation)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.runner = None
        self.requested = False

    def stop(self) -> None:
        self.requested = True
        if self.loop is not None and self.runner is not None:
            try:
                self.loop.call_soon_threadsafe(self.runner.stop.set)
            except RuntimeError:  # loop already closed
                pass


async def run_config(job: dict[str, Any], prompts: dict[str, Any], emit: Callable[[dict[str, Any]], None],
                     control: WorkerControl | None = None) -> None:
    """Run one config with the ordinary Runner and ``emit`` plain-dict messages:
    ``start``, ``server`` (its meta entry), ``phase`` (PhaseInfo + records), ``log``, ``done``."""
    from . import runner as runner_mod
    from .store import RunDir

    suite, name = job["suite"], job["config"]
    saved_env = {key: os.environ.get(key) for key in job.get("env") or {}}
    os.environ.update(job.get("env") or {})
    config = next(c for c in suite.configs if c.name == name)
    sweep_stale()
    scratch = Path(tempfile.mkdtemp(prefix=f"specbench-w{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-"))
    watchdog = _start_watchdog(scratch)
    claim: Path | None = None
    done: dict[str, Any] = {"type": "done", "config": name, "failed": {}, "interrupted": False}
    try:
        port = config.port
        if config.launched and port is None:
            port, claim = claim_port(suite.server.host)
        gpus = job.get("gpus")
        wconfig = replace(config, port=port, gpus=gpus if gpus is not None else config.gpus)
        wsuite = replace(suite, configs=tuple(wconfig if c.name == name else c for c in suite.configs))
        emit({"type": "start", "config": name, "gpus": wconfig.gpus, "port": port, "host": socket.gethostname(),
              "node": job.get("node"), "pid": os.getpid(), "started_at": _now()})

        class WorkerRunDir(RunDir):
            """The worker's private copy of its phases; reports the server's meta entry."""

            last_server: Any = None

            def write_meta(self, meta: dict[str, Any]) -> None:
                super().write_meta(meta)
                info = (meta.get("servers") or {}).get(name)
                clock = (meta.get("chunk_clock") or {}).get(name)
                if info is not None and (info, clock) != self.last_server:
                    self.last_server = (dict(info), clock)
                    emit({"type": "server", "config": name, "info": info, "chunk_clock": clock})

        run = WorkerRunDir(scratch)
        run.create()
        # gpus: straight into the run dir; ray: a node-local dir that outlives a crashed worker
        run.logs = Path(job["log_dir"]) if job.get("log_dir") else node_log_dir(job["run_id"])
        run.logs.mkdir(parents=True, exist_ok=True)
        if job.get("done_phases"):
            (scratch / "phases.jsonl").write_text("".join(json.dumps(p) + "\n" for p in job["done_phases"]))

        def on_phase(info, records) -> None:
            run.append_phase(info, records)  # so a restart (--restart-on-failure) skips it
            emit({"type": "phase", "config": name, "info": info.to_dict(), "records": [r.to_dict() for r in records]})

        kwargs: dict[str, Any] = dict(resume=bool(job.get("done_phases")), only_configs=[name], on_phase=on_phase,
                                      restart_on_failure=bool(job.get("restart_on_failure")))
        hooked = "prompts" in inspect.signature(runner_mod.Runner).parameters
        if hooked:
            kwargs["prompts"] = prompts
        runner = runner_mod.Runner(wsuite, scratch, **kwargs)
        runner.run = run
        if control is not None:
            control.loop, control.runner = asyncio.get_running_loop(), runner
            if control.requested:
                runner.stop.set()
        original = runner_mod.preflight
        if not hooked:  # prompts were loaded by the driver: the data files need not exist here
            runner_mod.preflight = lambda _suite: prompts
        try:
            outcome = await runner.execute()
        finally:
            runner_mod.preflight = original
        done["failed"], done["interrupted"] = dict(outcome.failed_configs), outcome.interrupted
        if not job.get("log_dir"):
            log = run.logs / f"{name}.log"
            if log.exists():
                with log.open("rb") as f:
                    size = f.seek(0, os.SEEK_END)
                    f.seek(max(0, size - MAX_LOG_BYTES))
                    text = f.read().decode(errors="replace")
                emit({"type": "log", "config": name, "text": text, "truncated": size > MAX_LOG_BYTES})
                log.unlink(missing_ok=True)  # shipped; kept on the node only when the worker dies
            try:
                run.logs.rmdir()
            except OSError:  # another config's log of the same run is still there
                pass
    except Exception as err:  # a worker bug must not look like a silent success
        done["failed"] = {name: f"worker error: {type(err).__name__}: {err}"}
        done["traceback"] = traceback.format_exc()
    finally:
        if claim is not None:
            claim.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
        _stop_watchdog(watchdog)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    done["finished_at"] = _now()
    emit(done)


def _worker_main(job_path: str) -> int:
    """``python -m specbench.parallel --worker JOB``: one config; JSON lines on stdout."""
    chan = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed goes to stderr, never into the channel
    sys.stdout = sys.stderr
    with open(job_path, "rb") as f:
        job, prompts = pickle.load(f)
    parent = os.getppid()

    def orphan_watch() -> None:  # the driver died: stop our server, then go
        while os.getppid() == parent:
            time.sleep(1)
        from .launch import reap_all

        reap_all(grace_s=5)
        os._exit(3)

    threading.Thread(target=orphan_watch, daemon=True).start()

    def emit(msg: dict[str, Any]) -> None:
        chan.write(json.dumps(msg, default=str) + "\n")
        chan.flush()

    asyncio.run(run_config(job, prompts, emit))
    chan.close()
    return 0


def _ray_config_task(job: dict[str, Any], prompts: dict[str, Any]):
    """The Ray task: a generator of messages; the runner runs in a thread with its own loop."""
    import queue

    import ray

    job = dict(job)
    gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    if job.get("gpus_needed"):
        job["gpus"] = ",".join(gpu_ids)
    job["node"] = ray.get_runtime_context().get_node_id()
    messages: queue.Queue = queue.Queue()
    control = WorkerControl()

    def body() -> None:
        try:
            asyncio.run(run_config(job, prompts, messages.put, control))
        finally:
            messages.put(None)

    thread = threading.Thread(target=body, name=f"specbench-{job['config']}", daemon=True)
    thread.start()
    try:
        while True:
            msg = messages.get()
            if msg is None:
                break
            yield msg
    except KeyboardInterrupt:  # ray.cancel(): let the runner stop its server before we go
        control.stop()
        thread.join(timeout=60)
        raise
    thread.join()


# ---- driver ------------------------------------------------------------------------------------


class Driver:
    """The one writer of the run dir: a Runner used for its meta, resume and results logic."""

    def __init__(self, suite, out: Path, *, resume: bool, progress, mode: str) -> None:
        from .runner import Runner

        self.runner = Runner(suite, out, resume=resume, progress=progress)
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

    def begin(self, extra: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """Create or reopen the run dir; return the phases already measured, per config."""
        r = self.runner
        r.run.create()
        r._start_meta()
        done_by: dict[str, list[dict[str, Any]]] = {}
        if self.resume:
            if hasattr(r, "_supersede_incomplete"):
                r._supersede_incomplete()  # phases cut short are set aside and measured again
            else:  # older runner
                r._drop_incomplete({(p.config, p.dataset, p.concurrency, p.request_rate, p.repeat)
                                    for p in r.run.load_phases() if not p.interrupted})
            for p in r.run.load_phases():
                if getattr(p, "complete", not p.interrupted):
                    done_by.setdefault(p.config, []).append(p.to_dict())
        self.meta["parallel"] = {"mode": self.mode, **extra, "configs": {}}
        self.meta["runs"][-1]["parallel"] = self.mode
        r.run.write_meta(self.meta)
        return done_by

    def handle(self, msg: dict[str, Any]) -> None:
        from .measure import PhaseInfo
        from .records import RequestRecord

        kind, name = msg.get("type"), msg.get("config")
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
            info = PhaseInfo.from_dict(msg["info"])
            self.runner._store_phase(info, [RequestRecord.from_dict(r) for r in msg["records"]])
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
        from .runner import RunOutcome

        self.meta["finished_at"] = _now()
        total = time.monotonic() - self.t_start
        measured = sum(p.wall_s for p in self.runner.run.load_phases())
        # configs run side by side, so per-config times overlap and do not add up to the total
        self.meta["timing"] = {"total_s": round(total, 3), "measured_s": round(measured, 3),
                               "parallel": True, "harness_s": None, "harness_share": None}
        rows = self.runner._write()
        return RunOutcome(self.runner.run.path, rows, dict(self.failed), interrupted=self.interrupted)


def _todo(suite, config, done: list[dict[str, Any]]) -> int:
    from .runner import load_points

    have = {(p["dataset"], p["concurrency"], p["request_rate"], p["repeat"]) for p in done}
    return sum(1 for spec in suite.datasets for point in load_points(suite) for rep in range(suite.load.repeats)
               if (spec.name, point.concurrency, point.request_rate, rep) not in have)


def plan(suite, done_by: dict[str, list[dict[str, Any]]], gpus_per_server: int) -> list[Job]:
    """Jobs in the sequential order (baseline first); configs with nothing left to do are left out."""
    from .runner import _config_order

    ports = [c.port for c in suite.configs if c.launched and c.port]
    jobs = []
    for config in _config_order(suite):
        done = done_by.get(config.name, [])
        if not _todo(suite, config, done):
            continue
        exclusive = set()
        if not config.launched:
            exclusive.add("url")  # servers at URLs are measured one at a time: they may share hardware
        elif config.port and ports.count(config.port) > 1:
            exclusive.add(f"port:{config.port}")
        jobs.append(Job(config.name, config_gpu_count(suite, config, gpus_per_server), config.launched, done,
                        frozenset(exclusive)))
    return jobs


def _worker_env(suite) -> dict[str, str]:
    names = list(FORWARDED_ENV) + ([suite.api_key_env] if suite.api_key_env else [])
    return {k: os.environ[k] for k in names if k in os.environ}


def _load_prompts(suite) -> dict[str, Any]:
    """The data-set half of preflight (engines may exist only on the cluster's nodes)."""
    from .launch import load_engine
    from .runner import load_suite_prompts

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

    def __enter__(self) -> "_Signals":
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
        from .launch.process import log_tail

        why = f"signal {-code}" if code < 0 else f"code {code}"
        tail = log_tail(err_file, 10)
        driver.fail(name, f"config {name!r}: worker process died ({why}) before finishing its cells"
                          + (f"\n{tail}" if tail and tail != "(no log)" else ""))


async def _run_gpus(driver: Driver, suite, jobs: list[Job], gpu_ids: list[str], prompts, restart_on_failure: bool) -> None:
    from .launch import load_engine

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


# -- entry point --


async def run_parallel(suite, out: Path, *, mode: Literal["gpus", "ray"], address: str | None = None,
                       resume: bool = False, progress=None, gpus_per_server: int | None = None,
                       restart_on_failure: bool = False):
    """Run ``suite`` into ``out`` with configs in parallel; returns the same ``RunOutcome`` as
    ``run_suite``. ``mode="gpus"``: this machine's GPUs (``SPECBENCH_GPUS`` or ``nvidia-smi -L``);
    ``mode="ray"``: the Ray cluster at ``address`` ("auto": the one ``ray start`` made here)."""
    from .runner import preflight

    if mode not in MODES:
        raise SuiteError(f"parallel mode must be one of {', '.join(MODES)}, got {mode!r}")
    per_server = suite_gpus_per_server(suite, gpus_per_server)
    out = Path(out)
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
    driver = Driver(suite, out, resume=resume, progress=progress, mode=mode)
    done_by = driver.begin({**where, "gpus_per_server": per_server})
    jobs = plan(suite, done_by, per_server)
    try:
        await run(driver, jobs)
    finally:
        outcome = driver.finish()
    return outcome


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker_main(sys.argv[2]))
    print("usage: python -m specbench.parallel --worker JOBFILE (internal: started by specbench run --parallel)",
          file=sys.stderr)
    sys.exit(2)
