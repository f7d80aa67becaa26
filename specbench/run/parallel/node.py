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
# (children of the worker that lead their own session, as ServerProcess starts them) with their start
# times, and stops them if the worker dies without stopping them, each process proven the recorded server's
# (launch/owned.py's rule: the leader's pid and start time, members of its group started no earlier; a pid
# another process holds now is left alone) and held by a pidfd from its check to its signal; removes the
# worker's scratch dir and port claims too. WATCHDOG_STOP is the part that signals, on its own for a test.
WATCHDOG_STOP = r"""
import os, signal, time
def stat_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1]), int(rest[2]), int(rest[19])  # state, parent, group, start ticks
    except (OSError, IndexError, ValueError):
        return None
def is_member(m, pid, ticks):
    s = stat_of(m)
    return s is not None and s[0] != "Z" and s[2] == pid and (s[3] == ticks if m == pid else s[3] >= ticks)
def members(pid, ticks):
    lead = stat_of(pid)
    if lead is not None and lead[3] != ticks:
        return []  # another process holds the server's pid now: its group is not the server's
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and is_member(int(d), pid, ticks)]
def hit(pid, ticks, sig):
    n = 0
    for m in members(pid, ticks):
        try:
            fd = os.pidfd_open(m)
        except ProcessLookupError:
            continue
        except (OSError, AttributeError):
            fd = None
        try:
            if is_member(m, pid, ticks):
                os.kill(m, sig) if fd is None else signal.pidfd_send_signal(fd, sig)
                n += 1
        except OSError:
            pass
        finally:
            if fd is not None:
                os.close(fd)
    return n
def stop_seen(seen, grace_s=15):
    alive = [(p, t) for p, t in seen.items() if hit(p, t, signal.SIGTERM)]
    deadline = time.time() + grace_s
    while alive and time.time() < deadline:
        time.sleep(0.5)
        alive = [(p, t) for p, t in alive if members(p, t)]
    for p, t in alive:
        hit(p, t, signal.SIGKILL)
"""
_WATCHDOG = WATCHDOG_STOP + r"""
import shutil, sys
worker, scratch, ports, me = int(sys.argv[1]), sys.argv[2], sys.argv[3], os.getpid()
def children():
    out = {}
    for d in os.listdir("/proc"):
        s = stat_of(int(d)) if d.isdigit() and int(d) != me else None
        if s is not None and s[1] == worker and s[2] == int(d):
            out[int(d)] = s[3]
    return out
seen = {}
while os.getppid() == worker:
    seen.update(children())
    time.sleep(0.5)
stop_seen(seen)
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
