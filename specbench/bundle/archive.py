"""One tar of wheels written straight into parts of a fixed size, each with its sha256."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import IO, Any


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class PartWriter(io.RawIOBase):
    """A write-only stream that cuts what it gets into ``bundle.tar.partNNN`` files of ``size`` bytes."""

    parts: list[dict[str, Any]]
    _f: IO[bytes] | None
    _h: hashlib._Hash | None

    def __init__(self, out: Path, size: int):
        self.out, self.size, self.parts = out, size, []
        self.total = hashlib.sha256()
        self._f = None
        self._h = None
        self._n = 0

    def writable(self) -> bool:
        return True

    def _next(self) -> None:
        self._close_part()
        name = f"bundle.tar.part{len(self.parts):03d}"
        self._f, self._h, self._n = open(self.out / name, "wb"), hashlib.sha256(), 0
        self.parts.append({"name": name})

    def _close_part(self) -> None:
        if self._f is not None:
            assert self._h is not None  # opened together with _f in _next
            self._f.close()
            self.parts[-1].update(size=self._n, sha256=self._h.hexdigest())
            self._f = None

    def write(self, b) -> int:
        data = memoryview(b).cast("B")
        self.total.update(data)
        done = 0
        while done < len(data):
            if self._f is None or self._n >= self.size:
                self._next()
            assert self._f is not None and self._h is not None  # _next opened both
            take = min(len(data) - done, self.size - self._n)
            chunk = data[done:done + take]
            self._f.write(chunk)
            self._h.update(chunk)
            self._n += take
            done += take
        return len(data)

    def close(self) -> None:
        self._close_part()
        super().close()


def write_archive(wheels: list[Path], out: Path, part_size: int) -> tuple[list[dict], str, int]:
    """One deterministic tar of ``wheels/<file>`` in the given order (no mtimes, owners), split into parts.

    Deterministic so that a re-run with a corrected host list rewrites only the parts after the
    first changed wheel (put the big, stable wheels first).
    """
    writer = PartWriter(out, part_size)
    total = 0
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for path in wheels:
            info = tarfile.TarInfo("wheels/" + path.name)
            info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
            total += info.size
    writer.close()
    return writer.parts, writer.total.hexdigest(), total
