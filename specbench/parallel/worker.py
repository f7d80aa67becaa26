"""Worker side: one config, in a subprocess (gpus) or a Ray task (ray), streaming its phases back."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LaunchError
from .planning import MAX_LOG_BYTES, _now

if TYPE_CHECKING:
    from ..records import Prompt
    from ..runner import Runner

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
    from ..launch.process import free_port

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
        self.runner: Runner | None = None
        self.requested = False

    def stop(self) -> None:
        self.requested = True
        if self.loop is not None and self.runner is not None:
            try:
                self.loop.call_soon_threadsafe(self.runner.stop.set)
            except RuntimeError:  # loop already closed
                pass


async def run_config(job: dict[str, Any], prompts: dict[str, list[Prompt]], emit: Callable[[dict[str, Any]], None],
                     control: WorkerControl | None = None) -> None:
    """Run one config with the ordinary Runner and ``emit`` plain-dict messages:
    ``start``, ``server`` (its meta entry), ``phase`` (PhaseInfo + records), ``log``, ``done``."""
    from .. import runner as runner_mod
    from ..store import RunDir

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

            def check_resumable(self) -> None:
                """The scratch dir holds only the done phases the driver sent: the driver has already
                checked the real run dir (its meta.json and the suite's comparability)."""

            def write_meta(self, meta: dict[str, Any]) -> None:
                super().write_meta(meta)
                info = (meta.get("servers") or {}).get(name)
                clock = (meta.get("chunk_clock") or {}).get(name)
                if info is not None and (info, clock) != self.last_server:
                    self.last_server = (dict(info), clock)
                    emit({"type": "server", "config": name, "info": info, "chunk_clock": clock})

            def record_server(self, config: str, identity: dict[str, Any]) -> None:
                emit({"type": "launched", "config": config, "identity": identity})

            def forget_server(self, config: str) -> None:
                emit({"type": "launched", "config": config, "identity": None})

        run = WorkerRunDir(scratch)
        run.create()
        # gpus: straight into the run dir; ray: a node-local dir that outlives a crashed worker
        run.logs = Path(job["log_dir"]) if job.get("log_dir") else node_log_dir(job["run_id"])
        run.logs.mkdir(parents=True, exist_ok=True)
        if job.get("done_phases"):
            # only which cells are done: their records stay with the driver (no count to check here)
            (scratch / "phases.jsonl").write_text("".join(json.dumps({**p, "requests": None}) + "\n"
                                                          for p in job["done_phases"]))

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
            runner_mod.preflight = lambda suite: prompts
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
        from ..launch import reap_all

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
