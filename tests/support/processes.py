"""Process liveness for the tests that start, kill and reap servers (a zombie counts as gone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import ROOT


def state(pid: int) -> str:
    """The process state letter from /proc (R, S, Z, …), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def alive(pid: int) -> bool:
    return state(pid) not in ("gone", "Z")


def gone(pid: int) -> bool:
    """Exited, or a zombie waiting for a reaper that is not us."""
    return not alive(pid)


def eventually_gone(pid: int, within_s: float = 3.0) -> bool:
    """SIGKILL is delivered asynchronously: a worker nobody waits for may need a moment to die."""
    deadline = time.monotonic() + within_s
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment carries ``marker`` (every process a fake engine started)."""
    needle = marker.encode()
    out = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in env.read_bytes() and alive(int(env.parent.name)):
                out.append(int(env.parent.name))
        except OSError:
            continue
    return out


def reap(marker: str) -> None:
    """Kill what a failed test left behind (processes our fake engines started, found by marker)."""
    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def spawn_cli(args: list[str], tmp_path: Path) -> subprocess.Popen:
    """``specbench`` in a child process (for signals), its output in cli.out / cli.err under ``tmp_path``."""
    return subprocess.Popen([sys.executable, "-m", "specbench.cli", *args], cwd=ROOT, env=os.environ.copy(),
                            stdout=(tmp_path / "cli.out").open("w"), stderr=(tmp_path / "cli.err").open("w"))
