"""The one write layer of a run directory: a whole-file rewrite is atomic, an append is all or
nothing, and a failing write (disk full, a read-only or vanished file system) is one line naming
the file. What was on disk before a failed write is left as it was.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import RunDirWriteError

_TMP_SERIAL = itertools.count()


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an ``OSError`` of a write to ``path`` into ``RunDirWriteError`` (no traceback, the path named)."""
    try:
        yield
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise RunDirWriteError(f"{path}: cannot write: {why}; the run stopped there, what it wrote before is intact "
                               "(--resume continues it once the disk can be written)") from None


def temp_name(path: Path) -> Path:
    """A temporary sibling of ``path`` that no other process or call shares (``.NAME.PID-N.tmp``)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{next(_TMP_SERIAL)}.tmp")


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (written and synced under a temporary name first)."""
    tmp = temp_name(path)
    with writing(path):
        try:
            with tmp.open("w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def append_text(path: Path, text: str) -> None:
    """Append ``text`` and sync; when the write fails part way the file is cut back to where it was,
    so no torn line is left behind."""
    data = memoryview(text.encode())
    with writing(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            start = os.fstat(fd).st_size
            try:
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            except BaseException:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)
