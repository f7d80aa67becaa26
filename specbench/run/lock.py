"""One run per directory: ``DIR/.specbench.lock``, held (``flock``) for the run's whole life.

Two runs into one directory would each skip the other's cells, count requests twice or rename
each other's temporary files. The kernel drops the lock when its holder dies, SIGKILL included,
so a killed run never blocks ``--resume``. The file is removed by the run that holds it; a run
that locked a file another one removed meanwhile notices (another inode) and locks anew.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import RunDirError
from ..schemas.run_files import LOCK


class RunLock:
    """The lock of one run directory; ``acquire`` before anything is read, ``release`` at the end."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK
        self.fd: int | None = None
        self.made_dir = False

    def claim(self, make: Callable[[], bool] | None) -> None:
        """``make`` the directory (it says whether it was new; None: it must be there, as for
        ``--resume``), then ``acquire``. A missing directory is left for the caller to refuse."""
        if make is not None:
            self.made_dir = make()
        if self.path.parent.is_dir():
            self.acquire()

    def acquire(self) -> None:
        """Hold the lock, or refuse (one line, exit 2) while another run holds it."""
        while self.fd is None:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as err:
                raise RunDirError(f"{self.path.parent}: cannot use it as a run directory: {err.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip()
                os.close(fd)
                raise RunDirError(f"{self.path.parent} is in use by another specbench run"
                                  + (f" (pid {holder})" if holder.isdigit() else "")
                                  + ": wait for it to end, or give another -o") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
            else:  # removed by the run that held it while we waited to lock it
                os.close(fd)

    def mark(self) -> None:
        """Write our pid into the lock file (what a refused run names), once the run is accepted."""
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, str(os.getpid()).encode(), 0)
        except OSError:  # only a name for the message of a refused run; a full disk fails the next real write
            pass

    def release(self, used: bool = True) -> None:
        """Remove the lock file and let go of it; a directory ``claim`` made and nothing ``used`` goes
        too. Idempotent."""
        if self.fd is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None
        if self.made_dir and not used:
            try:
                self.path.parent.rmdir()
            except OSError:  # not empty after all
                pass
        self.made_dir = False
