"""A lock that a second process waits for, up to a bound: ``flock`` on a file that names its holder.

Two installs into one folder at once remove or overwrite each other's files (two ``specbench setup
cpu`` into one engine cache: ``OSError: … libquadmath…: No such file``). The kernel drops the lock
when its holder dies, SIGKILL included, so a holder that is gone never blocks; one that is stuck is
named, with its pid, when the wait runs out. The file stays (empty when free): removing it would let
a waiter lock a file nobody else sees.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import SpecbenchError


class WaitLock:
    """``acquire`` waits for the lock (saying so once), ``release`` lets go; a context manager too."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = Path(path), what
        self.fd: int | None = None

    def holder(self, fd: int) -> str:
        """Who holds it, for a message: the pid it wrote, and whether that pid runs here."""
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if not text.isdigit():
            return "another process"
        try:
            os.kill(int(text), 0)
        except ProcessLookupError:
            return f"pid {text}, which does not run on this machine (another machine or container sharing the folder?)"
        except PermissionError:
            pass
        return f"pid {text}"

    def acquire(self, wait_s: float, waiting: Callable[[str], None] | None = None, poll_s: float = 0.2) -> bool:
        """Hold the lock; whether another holder had to be waited for. Past ``wait_s``: a one-line
        error naming the lock file and its holder."""
        if self.fd is not None:
            return False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            raise SpecbenchError(f"{self.path}: cannot open the lock of {self.what}: {err.strerror}") from None
        deadline, waited = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self.holder(fd)
                if not waited and waiting is not None:
                    waiting(holder)
                waited = True
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise SpecbenchError(f"{self.what}: {self.path} is still held by {holder} after waiting {wait_s:g} s; "
                                         "if it is stuck, end it and try again") from None
                time.sleep(poll_s)
        self.fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:  # only a name for a waiter's message
            pass
        return waited

    def release(self) -> None:
        """Let go (idempotent); the file is left empty."""
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> WaitLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
