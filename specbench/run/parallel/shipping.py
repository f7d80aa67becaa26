"""A Ray worker's step log, copied back into the run directory (``StepLogShipped`` messages).

A Ray worker's server writes its step log on its node (``node.node_log_dir``), under the folder name the run
directory uses (``logs/steplog/<config>-s<start>``, which phases.jsonl names). The worker sends each file's
new bytes before each cell's phase, so the steps a cell is cut from come back with it, and once more after its
server stopped (the rows flushed last); then it removes the folder from the node. The collector writes each
piece at its offset, so a piece sent twice is harmless. A folder the worker cannot read stays on the node and
the run says so under the tables (``Collector``); a worker lost with its node keeps what it had sent.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ...util.diskio import temp_name, writing
from ..servers import STEPLOG_DIR
from .messages import Emit, StepLogShipped

CHUNK = 4 << 20  # bytes per message
WHOLE = ".json"  # a header: rewritten whole by its process, so sent whole when it changed
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def launch_name(config: str, folder: str) -> bool:
    """Whether ``folder`` is a launch folder of ``config`` (``<config>-s<start>``)."""
    return re.fullmatch(rf"{re.escape(config)}-s\d+", folder) is not None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


class StepLogShipper:
    """The worker's side: what of each file was sent already, and sending the rest."""

    def __init__(self, config: str, logs: Path, emit: Emit) -> None:
        self.config, self.root, self.emit = config, logs / STEPLOG_DIR, emit
        self.sent: dict[tuple[str, str], int] = {}  # (folder, file) → bytes sent (a header: its size and mtime)
        self.headers: dict[tuple[str, str], tuple[int, int]] = {}

    def ship(self, folder: str, final: bool = False) -> bool:
        """Send what ``folder`` gained since the last call (``final``: a torn last line too); False, after saying
        why, when it could not be read."""
        if not launch_name(self.config, folder):
            return True  # not a launch of this worker's config: nothing of ours
        try:
            for path in sorted((self.root / folder).iterdir()):
                if FILE_NAME.fullmatch(path.name) and path.is_file():
                    self._file(folder, path, final)
        except FileNotFoundError:
            return True  # the server never wrote one (it died first, or its level wrote no file)
        except OSError as err:
            self.emit(StepLogShipped(self.config, folder, error=f"{err.strerror or type(err).__name__} ({err.filename})"))
            return False
        return True

    def _file(self, folder: str, path: Path, final: bool) -> None:
        key = (folder, path.name)
        if path.name.endswith(WHOLE):
            st = path.stat()
            if self.headers.get(key) != (st.st_size, st.st_mtime_ns):
                self.emit(StepLogShipped(self.config, folder, path.name, None, _text(path.read_bytes()[:CHUNK])))
                self.headers[key] = (st.st_size, st.st_mtime_ns)
            return
        offset = self.sent.get(key, 0)
        with path.open("rb") as f:
            f.seek(offset)
            while data := f.read(CHUNK):
                cut = data.rfind(b"\n") + 1
                if not final and cut:
                    data = data[:cut]  # whole lines only: the rest is still being written
                elif not final and len(data) < CHUNK:
                    break  # a line not finished yet
                self.emit(StepLogShipped(self.config, folder, path.name, offset, _text(data)))
                offset += len(data)
                f.seek(offset)
        self.sent[key] = offset

    def finish(self, folders: list[str]) -> None:
        """The last rows of each folder, then the folder removed from the node (kept there when unreadable)."""
        for folder in folders:
            if self.ship(folder, final=True):
                shutil.rmtree(self.root / folder, ignore_errors=True)


def store_piece(logs: Path, msg: StepLogShipped) -> str | None:
    """Write one piece into the run's logs/steplog/ (``writing``: a failing disk stops the run, as every run-dir
    write does); the problem, in one line, when the piece is not one this config's worker may write."""
    if not launch_name(msg.config, msg.folder) or not FILE_NAME.fullmatch(msg.file) or not isinstance(msg.text, str):
        return f"a step-log piece {msg.folder!r}/{msg.file!r} that is no launch file of config {msg.config!r}"
    if msg.offset is not None and (isinstance(msg.offset, bool) or not isinstance(msg.offset, int) or msg.offset < 0):
        return f"a step-log piece of {msg.folder}/{msg.file} at offset {msg.offset!r}"
    path = logs / STEPLOG_DIR / msg.folder / msg.file
    data = msg.text.encode("utf-8", "surrogateescape")
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if msg.offset is None:
            tmp = temp_name(path)
            tmp.write_bytes(data)
            os.replace(tmp, path)
            return None
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size < msg.offset:
                return f"{msg.folder}/{msg.file}: a piece at byte {msg.offset} of a copy {size} bytes long (one was lost)"
            os.pwrite(fd, data, msg.offset)
            os.ftruncate(fd, msg.offset + len(data))
        finally:
            os.close(fd)
    return None


