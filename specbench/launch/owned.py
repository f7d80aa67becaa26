"""Whose process it is: a pid recorded earlier (launched.json, a server reaped since) is signalled only once
proven to be the process recorded, never one that merely reuses the pid.

The proof is the pid's start time (clock ticks since boot, /proc/<pid>/stat) with the boot and the host: a
pid is unique among live processes, and its start time tells it apart from any later holder. The command
line is not used: an engine may rewrite its own (vLLM's workers set their process titles), which would
disown a server that is ours. A server's workers share its process group and started no earlier than it;
while the leader lives, or any member does, no new process can be given the group's id. Each process is
held by a pidfd from before its check until its signal, so a pid freed and reused in between is never hit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..schemas.launched import ProcessIdentity


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_and_group(pid: int) -> tuple[int, int, bool] | None:
    """A process's start ticks (field 22), its process group (field 5) and whether it is a zombie."""
    fields = _stat(pid)
    return (int(fields[19]), int(fields[2]), fields[0] == "Z") if fields else None


def process_identity(pid: int) -> ProcessIdentity:
    """What tells this process apart from a later one given the same pid: its start time (clock
    ticks since boot), the boot, the host (a value not found is written as null)."""
    seen = _start_and_group(pid)
    ticks = seen[0] if seen is not None and not seen[2] else None
    return ProcessIdentity.from_dict({"pid": pid, "start_ticks": ticks, "boot_id": boot_id(),
                                      "host": socket.gethostname()}, "process identity")


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


def _elsewhere(identity: ProcessIdentity) -> str | None:
    """Why the record cannot name a process here: another host or another boot (an identity without a host is
    taken as this host's)."""
    host = identity.host if "host" in identity.keys() else socket.gethostname()
    if host != socket.gethostname():
        return f"recorded on host {host!r}, not this one"
    if identity.boot_id != boot_id():
        return "recorded in another boot of this host"
    return None


def not_the_recorded(identity: ProcessIdentity) -> str | None:
    """Why the process holding the recorded pid here is not the one recorded (None: it is, or no process
    holds the pid), in words for a one-line notice."""
    pid, ticks = identity.pid, identity.start_ticks
    seen = _start_and_group(pid) if pid is not None and pid > 1 else None
    if seen is None:
        return None
    if (why := _elsewhere(identity)) is not None:
        return why
    if ticks is None:
        return "no start time was recorded to prove the process holding it is the server"
    if seen[0] != ticks:
        return f"another process holds it now (started at tick {seen[0]} after boot, the server at tick {ticks})"
    return None


def owned_members(identity: ProcessIdentity) -> list[int]:
    """The live processes that are provably the recorded server: its leader (same pid, same start time) and the
    members of its process group started no earlier; none when the pid now names another process."""
    pid, ticks = identity.pid, identity.start_ticks
    if pid is None or ticks is None or pid <= 1 or _elsewhere(identity) is not None or not_the_recorded(identity):
        return []
    return [m for m in group_members(pid) if _is_member(m, pid, ticks)]


def _is_member(m: int, pid: int, ticks: int) -> bool:
    seen = _start_and_group(m)
    return seen is not None and seen[1] == pid and (seen[0] == ticks if m == pid else seen[0] >= ticks)


def _signal_checked(m: int, pid: int, ticks: int, sig: int) -> bool:
    """``sig`` to ``m`` if it is (still) a member of the recorded server, through a pidfd opened before the check."""
    try:
        fd: int | None = os.pidfd_open(m)
    except ProcessLookupError:
        return False
    except (OSError, AttributeError):  # no pidfd (an old kernel, not Linux): checked, then signalled by pid
        fd = None
    try:
        if not _is_member(m, pid, ticks):
            return False
        if fd is None:
            os.kill(m, sig)
        else:
            signal.pidfd_send_signal(fd, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd is not None:
            os.close(fd)


def signal_owned(identity: ProcessIdentity, sig: int) -> int:
    """``sig`` to every process ``owned_members`` finds, each checked again under its pidfd; how many got it."""
    pid, ticks = identity.pid, identity.start_ticks
    if pid is None or ticks is None:
        return 0
    return sum(_signal_checked(m, pid, ticks, sig) for m in owned_members(identity))


def stop_leftover(identity: ProcessIdentity, grace_s: float = 10.0) -> bool:
    """Stop the process group a killed run left behind, if it is still the one recorded (SIGTERM, SIGKILL after
    ``grace_s``); True if anything was stopped. A live process with the pid but another start time is someone
    else's, and so is its group. With the leader gone, its group's workers are still ours: Linux reuses no pid
    while a group bears it. An identity without a host is taken as this host's."""
    stopped = False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not signal_owned(identity, sig):
            break
        stopped = True
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5)
        while owned_members(identity) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not owned_members(identity):
            break
    return stopped


def signal_server(proc: subprocess.Popen | None, identity: ProcessIdentity | None, sig: int) -> None:
    """``sig`` to a server's process group: by its id while the leader is our child not yet reaped (its pid,
    the group's id, cannot be reused until we reap it); after, only to the members ``owned_members`` proves
    are the server's."""
    if proc is None:
        return
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    elif identity is not None:
        signal_owned(identity, sig)


def group_alive(pgid: int) -> bool:
    if not Path("/proc/self/stat").exists():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return bool(group_members(pgid))


def wait_server_gone(proc: subprocess.Popen, identity: ProcessIdentity | None, timeout_s: float) -> None:
    """A SIGKILLed engine core freeing its memory takes a moment to exit: wait, so the next config does not
    start next to it (for the members that are the server's: the reaped leader's pid may be another's now)."""
    deadline = time.monotonic() + timeout_s
    while (owned_members(identity) if identity is not None and identity.start_ticks is not None
           else group_alive(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
