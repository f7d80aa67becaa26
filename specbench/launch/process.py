"""One server process: start in its own process group, wait until it serves the model, stop it.

Every live server is tracked so that Ctrl-C, SIGTERM or an error anywhere reaps all of them. What
no handler can catch (SIGKILL of specbench) is covered twice: the server gets a parent-death signal,
and its pid + start time (``owned.process_identity``) is recorded in the run dir, so a later run stops a
leftover that still matches (``owned.stop_leftover``) and never a process that merely reuses its pid.
A server's group is signalled by its id only while its leader is our child not yet reaped (the zombie
holds the pid); after, only what ``owned`` proves is its own.
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
from .owned import process_identity, signal_server, wait_server_gone

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
        self._identity: ProcessIdentity | None = None
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
        self._identity = process_identity(self.proc.pid)  # before anything can reap it
        _LIVE.add(self)

    def identity(self) -> ProcessIdentity | None:
        return self._identity

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
            signal_server(self.proc, self._identity, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        signal_server(self.proc, self._identity, signal.SIGKILL)  # stragglers in the group (engine workers)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        wait_server_gone(self.proc, self._identity, timeout_s=10)
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
        signal_server(server.proc, server.identity(), signal.SIGKILL)
