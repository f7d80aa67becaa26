"""One server process: start in its own process group, wait until it serves the model, stop it.

Every live server is tracked so that Ctrl-C, SIGTERM or an error anywhere reaps all of them. What
no handler can catch (SIGKILL of specbench) is covered twice: the server gets a parent-death signal,
and its pid + start time (``process_identity``) is recorded in the run dir, so a later run stops a
leftover that still matches (``stop_leftover``) and never a process that merely reuses its pid.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import aiohttp

from ..errors import LaunchError
from ..schemas.launched import ProcessIdentity
from ..util.bounded import PROBE_LIMIT, read_capped
from ..util.diskio import writing
from ..util.redact import scrub, secret_values

_LIVE: set[ServerProcess] = set()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        with path.open(errors="replace") as f:
            return "".join(deque(f, maxlen=lines)).rstrip()
    except OSError:
        return "(no log)"


def served_models(body: bytes) -> list[str]:
    """The model ids of an OpenAI ``/v1/models`` answer; ValueError (one line, no body text: it could
    echo the request's headers) for anything else."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError(f"answered {len(body)} bytes that are not JSON, not an OpenAI model list") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        what = f"a JSON {type(data).__name__}" if not isinstance(data, dict) else "an object without a \"data\" list"
        raise ValueError(f"answered {what}, not an OpenAI model list")
    ids = [d.get("id") if isinstance(d, dict) else None for d in data["data"]]
    if not all(isinstance(i, str) for i in ids):
        raise ValueError("a model list entry has no string \"id\"")
    return cast(list[str], ids)
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` (Linux) that has the child sent SIGTERM when the thread that started it
    dies, so a server never outlives a killed specbench (SIGTERM: vLLM then stops its own workers).
    The caller's thread must live as long as the server: the event loop's, not a pool thread."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child must not import
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return set_signal


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields and fields[0] != "Z" else None  # field 22: starttime


def process_identity(pid: int) -> ProcessIdentity:
    """What tells this process apart from a later one given the same pid: its start time (clock
    ticks since boot), the boot, the host (a value not found is written as null)."""
    return ProcessIdentity.from_dict({"pid": pid, "start_ticks": _start_ticks(pid), "boot_id": _boot_id(),
                                      "host": socket.gethostname()}, "process identity")


def stop_leftover(identity: ProcessIdentity, grace_s: float = 10.0) -> bool:
    """Stop the process group a killed run left behind, if it is still the one recorded; True if
    anything was stopped. A live process with the pid but another start time is someone else's.
    With the leader gone, its group's workers are still ours: Linux reuses no pid while a group bears it.
    An identity without a host is taken as this host's."""
    pid, ticks = identity.pid, identity.start_ticks
    if pid is None or ticks is None or pid <= 1:
        return False
    host = identity.host if "host" in identity.keys() else socket.gethostname()
    if identity.boot_id != _boot_id() or host != socket.gethostname():
        return False

    def ours() -> list[int]:
        leader = [pid] if _start_ticks(pid) == ticks else []
        return leader + [m for m in group_members(pid) if m != pid and (_start_ticks(m) or -1) >= ticks]

    found = ours()
    if not found:
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for member in ours():
            try:
                os.kill(member, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5)
        while ours() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not ours():
            break
    return True


def _copy_scrubbed(source: Any, log: Any, values: list[str]) -> None:
    """Engine output → log with secret values masked, line by line (the engine echoes its argv).
    Once the log cannot be written (disk full) the output is still drained, so the engine never
    blocks on a full pipe; the run itself stops at its own next write."""
    writable = True
    with source, log:
        for line in source:
            if not writable:
                continue
            try:
                log.write(scrub(line, values))
                log.flush()
            except OSError:
                writable = False


def open_log(path: Path, first_line: str) -> Any:
    """A server's log, opened for appending with ``first_line`` written; a disk fault is one line."""
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        log = path.open("ab")
        try:
            log.write(first_line.encode())
            log.flush()
        except OSError:
            log.close()
            raise
    return log


class ServerProcess:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path, base_url: str,
                 health_path: str, models_path: str, model: str, startup_timeout_s: float,
                 display_argv: list[str] | None = None) -> None:
        self.name, self.argv, self.env, self.log_path = name, argv, env, log_path
        self.base_url, self.health_path, self.models_path = base_url, health_path, models_path
        self.model, self.startup_timeout_s = model, startup_timeout_s
        self.display_argv = display_argv or argv
        self.secrets = secret_values(argv, self.display_argv, env)
        self.proc: subprocess.Popen | None = None
        self._log_copier: threading.Thread | None = None
        self.started_at: float | None = None
        self.ready_s: float | None = None
        self._stopping = threading.Lock()

    def start(self) -> None:
        exe = self.argv[0]
        if os.sep in exe and not os.access(exe, os.X_OK):
            raise LaunchError(f"config {self.name!r}: engine executable not found: {exe} (run `specbench setup cpu` or set server.python)")
        log = open_log(self.log_path, f"$ {' '.join(self.display_argv)}\n")
        try:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE if self.secrets else log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **self.env}, start_new_session=True,
                                         preexec_fn=die_with_parent())
        except FileNotFoundError:
            log.close()
            raise LaunchError(f"config {self.name!r}: engine executable not found: {exe}") from None
        if self.secrets:
            self._log_copier = threading.Thread(target=_copy_scrubbed, args=(self.proc.stdout, log, self.secrets),
                                                name=f"log-{self.name}", daemon=True)
            self._log_copier.start()
        else:
            log.close()
        self.started_at = time.monotonic()
        _LIVE.add(self)

    def identity(self) -> ProcessIdentity | None:
        return process_identity(self.proc.pid) if self.proc is not None else None

    def exited_within(self, timeout_s: float) -> bool:
        if self.proc is None:
            return False
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def death(self, when: str) -> LaunchError:
        """The error for a server found dead mid-run: exit code and log tail; the group is reaped."""
        code = self.proc.poll() if self.proc else None
        return self._fail(f"server exited with code {code} {when}")

    def _fail(self, why: str) -> LaunchError:
        """The error, with the log tail; whoever started the server stops it (``open_server``)."""
        tail = log_tail(self.log_path)
        return LaunchError(f"config {self.name!r}: {why} (log: {self.log_path})\n{tail}")

    async def wait_ready(self, session: aiohttp.ClientSession, stop: asyncio.Event | None = None) -> float:
        """Poll until /health is 200 and /v1/models lists the model; return seconds to ready."""
        assert self.proc is not None and self.started_at is not None  # start() ran
        deadline = self.started_at + self.startup_timeout_s
        last = "no answer yet"
        while True:
            if stop is not None and stop.is_set():
                raise LaunchError(f"config {self.name!r}: stopped while the server was starting")
            if not self.alive:
                raise self._fail(f"server exited with code {self.proc.returncode} while starting")
            if time.monotonic() > deadline:
                raise self._fail(f"server not ready after {self.startup_timeout_s:g} s ({last})")
            body, last = await probe_ready(session, self.base_url, self.health_path, self.models_path, last)
            if isinstance(body, NotServing):
                raise self._fail(str(body))
            if body is not None:
                try:
                    served = served_models(body)
                except ValueError as err:
                    raise self._fail(f"GET {self.models_path}: {err}") from None
                if self.model in served:
                    self.ready_s = time.monotonic() - self.started_at
                    return self.ready_s
                raise self._fail(f"server serves {served}, not the suite's model {self.model!r}")
            await asyncio.sleep(0.5)

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM to the whole process group, SIGKILL after ``grace_s``; idempotent. Live until its group
        is gone; a second caller (``reap_all``, another thread) waits for a stop under way."""
        with self._stopping:
            code = self._stop(grace_s)
        _LIVE.discard(self)
        return code

    def _stop(self, grace_s: float) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.proc.pid, signal.SIGKILL)  # stragglers in the group (engine workers)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _wait_group_gone(self.proc.pid, timeout_s=10)
        if self._log_copier is not None:
            self._log_copier.join(timeout=5)
        return self.proc.returncode


class NotServing(str):
    """A probe answer that waiting cannot fix (an oversized model list, an API key wanted): the reason."""


async def probe_ready(session: aiohttp.ClientSession, base_url: str, health_path: str, models_path: str,
                      last: str) -> tuple[bytes | NotServing | None, str]:
    """One readiness probe: the model list's body once health is 200 (None before, or ``NotServing``),
    and what the server answered last (for the timeout's message)."""
    try:
        timeout = aiohttp.ClientTimeout(total=5)
        async with session.get(base_url + health_path, timeout=timeout) as r:
            last = f"{health_path} returned {r.status}"
        if r.status != 200:
            return None, last
        async with session.get(base_url + models_path, timeout=timeout) as m:
            last = f"{models_path} returned {m.status}"
            if m.status in (401, 403):
                return NotServing(f"GET {models_path} returned HTTP {m.status}: the server wants an API key "
                                  "(api_key_env in the suite names the variable holding it)"), last
            if m.status != 200:
                return None, last
            try:
                return await read_capped(m, PROBE_LIMIT), last
            except ValueError as err:
                return NotServing(f"GET {models_path}: {err}"), last
    except (TimeoutError, aiohttp.ClientError) as err:
        return None, type(err).__name__


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids of a process group, from /proc. Zombies don't count: ``killpg(pgid, 0)``
    would count them, and an init that never reaps orphans would make a group look alive forever."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            out.append(int(stat.parent.name))
    return out


def _group_alive(pgid: int) -> bool:
    if not Path("/proc/self/stat").exists():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return bool(group_members(pgid))


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """A SIGKILLed engine core freeing its memory takes a moment to exit: wait, so the next config
    does not start next to it."""
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def live_servers() -> frozenset[ServerProcess]:
    """The servers started and not yet stopped (what ``reap_all`` would stop)."""
    return frozenset(_LIVE)


def reap_all(grace_s: float = 10.0) -> None:
    """Stop every server still running (Ctrl-C, errors, interpreter exit)."""
    for server in list(_LIVE):
        server.stop(grace_s)


async def stop_off_loop(server: ServerProcess, grace_s: float = 20.0) -> int | None:
    """``server.stop`` in a thread: the loop keeps answering signals meanwhile, and ``kill_all``
    (a second Ctrl-C) ends the grace at once."""
    return await asyncio.to_thread(server.stop, grace_s)


def kill_all() -> None:
    """SIGKILL every live server's group now, without waiting (the waiting is ``stop``'s); for the event loop."""
    for server in list(_LIVE):
        if server.proc is not None:
            _signal_group(server.proc.pid, signal.SIGKILL)
