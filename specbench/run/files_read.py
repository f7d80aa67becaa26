"""How a run directory's files are read, one way for every reader: meta.json in the mode of whoever reads it
(``read_meta``), and a JSONL file's lines, plain or gzip (``file_lines``), each scanned into its record or the
reason it is none (``scan_lines``). What to do with a bad line stays with the reader: ``--resume`` moves every one
aside (``rundir``), the report stops at a torn line and skips one that is no request (``readback``)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Literal, TypeVar

from ..errors import ResultsError, RunDirError
from ..schemas.meta import RunMeta
from ..schemas.record import Record, RowError
from ..util.jsonio import read_json

#: who reads meta.json, which decides what a wrong value and a newer specbench's file do (``read_meta``)
Mode = Literal["resume", "gate", "report"]


@dataclass
class MetaRead:
    """meta.json as read: the meta (None: there is none), the values dropped (one line each), and what says a
    newer specbench wrote it (``report`` mode only: elsewhere such a file is refused)."""

    meta: RunMeta | None
    problems: list[str] = field(default_factory=list)
    newer: list[str] = field(default_factory=list)


def read_meta(path: Path, mode: Mode) -> MetaRead:
    """meta.json as ``mode`` needs it; a file that is not JSON, or not an object, is one line naming it.

    ``resume``: strictly: a value of the wrong type or a newer specbench's file is a ``RunDirError``, since the run
    would go on from a state it cannot read. ``gate``: a wrong value is dropped and said (``problems``); a newer
    specbench's file is refused (``ResultsError``): a verdict on keys whose meaning may have changed would be a
    guess. ``report``: a wrong value dropped and said; a newer specbench's file is read with what this version
    knows (``newer`` says why it is newer; its dropped values are then keys this version ignored)."""
    path = Path(path)
    if not path.exists():
        return MetaRead(None)
    read = MetaRead(None)
    try:
        read.meta = RunMeta.from_dict(read_json(path), path, None if mode == "resume" else read.problems,
                                      read.newer if mode == "report" else None)
    except ResultsError as err:
        if mode == "resume":
            raise RunDirError(f"{err}; cannot continue this run") from None
        raise
    return read


# ----------------------------------------------------------------------------- JSONL lines

R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Line(Generic[R]):
    """A line that is not blank: its number (from 1), its bytes, and its record or why it is none; ``torn``: not
    JSON at all (cut by a crash, or not text), so nothing after it can be trusted to be what the run wrote."""

    number: int
    raw: bytes
    record: R | None
    why: str | None = None
    torn: bool = False


def scan_line(number: int, raw: bytes, record: type[R], replace: bool = False) -> Line[R]:
    """One line → its record (the declaration's strict line reader), or why not; ``replace``: undecodable bytes
    become U+FFFD instead of making the line no text."""
    try:
        obj = json.loads(raw.decode("utf-8", errors="replace" if replace else "strict"))
    except UnicodeDecodeError:
        return Line(number, raw, None, "not UTF-8", torn=True)
    except json.JSONDecodeError as err:
        return Line(number, raw, None, f"not JSON ({err.msg} at column {err.colno})", torn=True)
    except RecursionError:
        return Line(number, raw, None, "not JSON (nested too deep)", torn=True)
    if not isinstance(obj, dict):
        return Line(number, raw, None, f"not a JSON object (a {type(obj).__name__})")
    try:
        return Line(number, raw, record.from_line(obj))
    except RowError as err:
        return Line(number, raw, None, str(err))


def scan_lines(lines: Iterable[bytes], record: type[R], *, replace: bool = False) -> Iterator[Line[R]]:
    """Every line that is not blank, in order, scanned (``scan_line``); lazily, so a reader that stops early
    parses no more."""
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            yield scan_line(number, raw, record, replace)


def gunzip(data: bytes) -> tuple[bytes, str | None]:
    """What a gzip file holds, up to where its stream is damaged (every byte the damage left readable: a part
    that fails is fed again in smaller pieces), and the damage (None: whole). Members follow each other; zero
    bytes after the last are padding."""
    out, pos = bytearray(), 0
    while pos < len(data) and data[pos:].strip(b"\0"):
        d, step = zlib.decompressobj(wbits=31), GZIP_STEP
        while not d.eof:
            if pos >= len(data):
                return bytes(out + d.flush()), "cut before the end of its stream"
            piece, saved = data[pos:pos + step], d.copy()
            try:
                out += d.decompress(piece)
            except zlib.error as err:
                if step == 1:
                    return bytes(out), str(err).removeprefix("Error -3 while decompressing data: ")
                d, step = saved, max(1, step // 64)
                continue
            pos += len(piece) - len(d.unused_data)
    return bytes(out), None


GZIP_STEP = 1 << 16  # compressed bytes fed at a time


def file_lines(path: Path) -> tuple[list[bytes], str | None]:
    """The lines of a JSONL file (none when there is no file), or of a ``.gz`` up to where its stream is damaged
    (a cut or corrupt gzip keeps every whole line before it), and the damage (None: whole). Lines end at ``\\n``
    only, as JSONL's do."""
    if not path.exists():
        return [], None
    if path.suffix != ".gz":
        return path.read_bytes().split(b"\n"), None
    raw, damage = gunzip(path.read_bytes())
    lines = raw.split(b"\n")
    if damage is not None and lines and lines[-1]:
        lines.pop()  # cut by the damage: not a whole line
    return lines, damage
