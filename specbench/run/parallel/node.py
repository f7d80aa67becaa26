"""What a worker leaves on its node and how it is cleaned up: port claims shared by the workers of
one machine, the server log directory of a Ray worker, and the watchdog that stops a dead
worker's servers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ...errors import LaunchError
from ...launch.process import free_port

PORT_DIR = Path(tempfile.gettempdir()) / f"specbench-ports-{os.getuid()}"


def pid_alive(pid: int) -> bool:
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
    PORT_DIR.mkdir(parents=True, exist_ok=True)
    for _ in range(200):
        port = free_port(host)
        path = PORT_DIR / str(port)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(path.read_text() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder and not pid_alive(holder):  # left by a worker that died
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
    for path in list(PORT_DIR.glob("*")) if PORT_DIR.is_dir() else []:
        try:
            holder = int(path.read_text() or 0)
        except (OSError, ValueError):
            continue
        if holder and not pid_alive(holder):
            path.unlink(missing_ok=True)
    for path in Path(tempfile.gettempdir()).glob("specbench-w*-*"):
        m = re.match(r"specbench-w(\d+)-", path.name)
        if m and path.is_dir() and not pid_alive(int(m.group(1))):
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


def start_watchdog(scratch: Path) -> subprocess.Popen | None:
    if not Path("/proc/self/stat").exists():
        return None
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(scratch), str(PORT_DIR)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop_watchdog(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    proc.kill()  # our own child, by its handle
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
