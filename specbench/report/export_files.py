"""How exported tables are named and written (``specbench export``): one rule for every table, so files of
many runs and machines stack under one root, and a re-export replaces its own run's files all or nothing.

A re-export (``Replacement``) writes every new file under a temporary name beside its place; only when all are
written does it set the run's earlier files aside (renamed), move the new ones in, then remove the earlier
ones. A failure before that last step — a write, or an earlier file that cannot be set aside — leaves the
earlier export whole and nothing of the new one (one line says which file and why); another run's files are
never touched. Tables of long step logs are written batch by batch (``TableWriter``: pyarrow's ParquetWriter).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import OutputPathError, OutputWriteError
from ..schemas.meta import RunMeta
from ..util.diskio import DISK_FAULTS, make_output_dir, output_errors, output_failure, temp_name

#: the columns a file is per: one directory per (gpu, target, split, drafter, k), one file per (run, start)
PART_KEYS = ("gpu", "target", "split", "drafter", "k", "start")
#: every table an export writes: a re-export replaces the run's files in each
TABLES = ("runs", "requests", "steps", "tokens", "outputs")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "none"


def run_id(meta: RunMeta | None, fallback: str) -> str:
    """A run's name in file names, the same wherever its directory is copied or moved: the suite, the
    time it started and a hash of what meta.json recorded first (suite file, host), so two runs started
    in the same second elsewhere still differ. Without meta.json: ``fallback`` (the directory's name)."""
    if meta is None or not meta.started_at:
        return slug(fallback)
    first = {"started_at": meta.started_at, "suite": meta.suite_name,
             "suite_file": meta.suite_file.sha256 if meta.suite_file else None,
             "host": meta.host.to_dict() if meta.host else None}
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()[:8]
    stamp = re.sub(r"[^0-9T]", "", meta.started_at.split("+")[0])
    return f"{slug(meta.suite_name or 'run')}-{stamp}-{digest}"


def part_path(out: Path, table: str, part: dict[str, object], run: str) -> Path:
    """The file of one run's rows of ``table`` for one (gpu, target, split, drafter, k, start): the one
    naming rule of every table, so files of different runs never collide and a re-export overwrites."""
    folder = out / table / slug(str(part["gpu"])) / slug(str(part["target"])) / slug(str(part["split"]))
    return folder / f"{part['drafter']}-k{part['k']}" / f"{run}-r{part['start']}.parquet"


def _failure(path: Path, err: OSError, what: str) -> OutputPathError:
    why = err.strerror or type(err).__name__
    cls = OutputWriteError if err.errno in DISK_FAULTS else OutputPathError
    return cls(f"{path}: cannot {what} ({why}): the earlier export of this run is kept as it was, and nothing of "
               "this one was written")


class Replacement:
    """One run's files under an export root, replaced all or nothing (see the module's docstring)."""

    def __init__(self, out: Path, run: str) -> None:
        self.out, self.run = Path(out), run
        self.new: dict[Path, Path] = {}  # place → the temporary file written for it

    def file(self, table: str, part: dict[str, Any]) -> tuple[Path, Path]:
        """The place of one part's file and the temporary name to write it under (its folder made)."""
        place = part_path(self.out, table, part, self.run)
        if place not in self.new:
            make_output_dir(place.parent)
            self.new[place] = temp_name(place)
        return place, self.new[place]

    def frame(self, table: str, frame: pd.DataFrame) -> None:
        """``frame`` (with the ``PART_KEYS`` columns) as one file per ``part_path``."""
        for key, part in frame.groupby(list(PART_KEYS), sort=False):
            place, tmp = self.file(table, dict(zip(PART_KEYS, key, strict=True)))
            with output_errors(place):
                part.to_parquet(tmp, index=False)

    def earlier(self) -> list[Path]:
        """The run's files under the root from an earlier export (its name, any table), never another run's."""
        name = re.compile(rf"{re.escape(self.run)}-r\d+\.parquet")
        return sorted(p for table in TABLES if (self.out / table).is_dir()
                      for p in (self.out / table).rglob(f"{self.run}-r*.parquet") if name.fullmatch(p.name))

    def discard(self) -> None:
        for tmp in self.new.values():
            tmp.unlink(missing_ok=True)

    def commit(self) -> list[Path]:
        """Set the earlier files aside, move the new ones in, remove the earlier ones; the files written."""
        aside: list[tuple[Path, Path]] = []
        moved: list[Path] = []
        try:
            for path in self.earlier():
                backup = temp_name(path)
                try:
                    os.replace(path, backup)
                except OSError as err:
                    raise _failure(path, err, "set aside the earlier export's file") from None
                aside.append((path, backup))
            for place, tmp in self.new.items():
                try:
                    os.replace(tmp, place)
                except OSError as err:
                    raise _failure(place, err, "move the new file in") from None
                moved.append(place)
        except BaseException:
            for place in moved:
                place.unlink(missing_ok=True)
            for path, backup in reversed(aside):
                os.replace(backup, path)
            self.discard()
            raise
        left = []
        for _, backup in aside:
            try:
                backup.unlink()
            except FileNotFoundError:
                pass
            except OSError as err:
                left.append(f"{backup} ({err.strerror})")
        if left:
            print(f"specbench: note: the new export is in place; the earlier one's file(s) set aside could not be "
                  f"removed: {', '.join(left)}", file=sys.stderr)
        return list(self.new)


@contextmanager
def replacing(out: Path, run: str) -> Iterator[Replacement]:
    """A ``Replacement`` of ``run``'s files under ``out``: committed when the block ends, discarded when it fails."""
    rep = Replacement(out, run)
    try:
        yield rep
    except BaseException:
        rep.discard()
        raise
    rep.commit()


class TableWriter:
    """One table's part files written batch by batch with pyarrow's ParquetWriter (one writer per part, opened
    on its first rows), each batch given the ``run`` column, so a long step log is never held whole."""

    def __init__(self, rep: Replacement, table: str, schema: pa.Schema) -> None:
        self.rep, self.table = rep, table
        self.schema = schema.append(pa.field("run", pa.string()))
        self.writers: dict[Path, pq.ParquetWriter] = {}

    def write(self, part: dict[str, Any], batch: pa.Table) -> None:
        if not batch.num_rows:
            return
        place, tmp = self.rep.file(self.table, part)
        with arrow_errors(place):
            if place not in self.writers:
                self.writers[place] = pq.ParquetWriter(tmp, self.schema)
            self.writers[place].write_table(batch.append_column("run", pa.array([self.rep.run] * batch.num_rows, pa.string())))

    def close(self, quietly: bool = False) -> None:
        """Finish every part's file (``quietly``: after a failure, which is the one said)."""
        for place, writer in self.writers.items():
            try:
                with arrow_errors(place):
                    writer.close()
            except OutputPathError:
                if not quietly:
                    raise
        self.writers.clear()


@contextmanager
def arrow_errors(place: Path) -> Iterator[None]:
    """``output_errors`` for pyarrow, whose I/O errors carry their reason in the text, not in ``errno``."""
    try:
        yield
    except OSError as err:
        if err.errno is None:  # pyarrow's: the reason is in the text
            raise OutputWriteError(f"{place}: cannot write: {str(err)[:200]}; nothing was left under that name") from None
        raise output_failure(place, err) from None


@contextmanager
def table_writer(rep: Replacement, table: str, schema: pa.Schema) -> Iterator[TableWriter]:
    writer = TableWriter(rep, table, schema)
    try:
        yield writer
    except BaseException:
        writer.close(quietly=True)
        raise
    writer.close()
