"""The one write layer: of a run directory, and of every file or folder a command writes where ``-o``
says. A whole-file rewrite is atomic, an append is all or nothing, and a failing write (disk full, a
read-only or vanished file system) is one line naming the file. What was on disk before a failed
write is left as it was.

An output named with ``-o`` is checked before the command does its work (``check_output_file``,
``check_output_dir``) and written under a temporary name beside it, then renamed (``output_file``,
``write_output``): a missing parent, a directory where a file is wanted or the reverse, a path under
a file or a read-only place is ``OutputPathError`` (exit 2); a full disk or an I/O error while writing
is ``OutputWriteError`` (exit 1, as a run's failed write) and leaves nothing under the output's name.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import OutputPathError, OutputWriteError, RunDirWriteError

_TMP_SERIAL = itertools.count()
#: what a failing disk says, as opposed to a place that cannot hold the output
DISK_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


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


# ---- outputs named with -o -------------------------------------------------------------------

def _first_existing(path: Path) -> Path:
    """``path`` or the nearest of its parents that exists (``.`` for a relative path)."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _probe(folder: Path) -> str | None:
    """Why a file cannot be created in the existing directory ``folder`` (the system's reason), or None."""
    tmp = temp_name(folder / "probe")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        return err.strerror or type(err).__name__
    tmp.unlink(missing_ok=True)
    return None


def _place_problem(path: Path, want: str) -> str | None:
    """Why ``path`` cannot be written as a ``want`` ("file" or "directory"), or None. A file's parent
    must exist; a directory's missing parents are made when it is written."""
    if want == "file" and path.is_dir():
        return "is a directory, and a file is wanted here"
    if want == "directory" and os.path.lexists(path) and not path.is_dir():
        return "is a file, and a directory is wanted here"
    parent = path.parent if want == "file" or not path.is_dir() else path
    found = _first_existing(parent)
    if not found.is_dir():
        return f"{found} is a file, not a directory"
    if want == "file" and found != parent:
        return f"the directory {parent} does not exist (create it first)"
    why = _probe(found)
    return None if why is None else f"cannot write in {found}: {why}"


def check_output_file(path: Path) -> Path:
    """``path`` can be written as a file, or one ``OutputPathError`` line saying why not (before any work)."""
    why = _place_problem(Path(path), "file")
    if why:
        raise OutputPathError(f"{path}: {why}")
    return Path(path)


def check_output_dir(path: Path) -> Path:
    """``path`` is, or can be made, a directory to write in; one ``OutputPathError`` line otherwise."""
    why = _place_problem(Path(path), "directory")
    if why:
        raise OutputPathError(f"{path}: {why}")
    return Path(path)


def output_failure(path: Path, err: OSError, want: str = "file") -> OutputPathError:
    """The one line for ``err`` raised while ``path`` was written."""
    if err.errno in DISK_FAULTS:
        return OutputWriteError(f"{path}: cannot write: {err.strerror}; nothing was left under that name")
    why = _place_problem(path, want) or f"cannot write: {err.strerror or type(err).__name__}"
    return OutputPathError(f"{path}: {why}")


@contextmanager
def output_errors(path: Path, want: str = "file") -> Iterator[None]:
    """An ``OSError`` inside becomes the one line about ``path`` (``want``: what it should be)."""
    try:
        yield
    except OSError as err:
        raise output_failure(Path(path), err, want) from None


def make_output_dir(path: Path) -> Path:
    """``path`` as a directory, made with its parents when missing."""
    with output_errors(path, "directory"):
        Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


@contextmanager
def output_file(path: Path) -> Iterator[Path]:
    """A temporary name beside ``path`` to write to; renamed onto ``path`` when the block ends, removed
    when it fails, so ``path`` is either the whole new file or what it was before."""
    tmp = temp_name(Path(path))
    try:
        with output_errors(path):
            yield tmp
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def all_or_none() -> Iterator[list[Path]]:
    """A list to add each file written to; when the block fails, those files are removed again, so a
    set of files that only reads right whole (an export) is never left in part."""
    written: list[Path] = []
    try:
        yield written
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def write_output(path: Path, data: str | bytes) -> None:
    """Replace the output ``path`` with ``data`` (text as UTF-8), synced, all or nothing."""
    raw = data.encode() if isinstance(data, str) else data
    with output_file(path) as tmp, tmp.open("wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
