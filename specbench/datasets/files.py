"""Read prompt files (JSONL, JSON array, parquet) into rows tagged with where they came from.

Every row carries a location string ("prompts.jsonl:7", "x.parquet: row 3") so that a bad row
can be reported as one line naming the file and line. Rows are read as they are asked for: a JSONL
file a line at a time, a parquet file a batch of rows at a time, so a loader that needs the first
three rows of a 100 MB file reads (and checks) only those. A JSON array is parsed whole: it has no
row boundaries short of parsing it (a streaming JSON parser is not a dependency).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import DatasetError

SUFFIXES = (".jsonl", ".json", ".parquet")

Row = tuple[str, dict[str, Any]]


def read_rows(path: Path) -> Iterator[Row]:
    """The rows of ``path`` in file order, each read when asked for (stop early and the rest is never
    read); blank JSONL lines are skipped; a file without rows is an error once it is read to its end."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DatasetError(f"{path}: unsupported file type '{suffix}' (use .jsonl, .json or .parquet)")
    reader = {".parquet": _parquet_rows, ".json": _json_rows, ".jsonl": _jsonl_rows}[suffix]
    count = 0
    try:
        for row in reader(path):
            count += 1
            yield row
    except DatasetError:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"{path}: cannot read file ({one_line(exc)})") from exc
    if not count:
        raise DatasetError(f"{path}: the file holds no rows")


def _jsonl_rows(path: Path) -> Iterator[Row]:
    """JSON Lines, a line at a time: a line ends at ``\n`` only (``str.splitlines`` would also cut at
    U+2028, U+2029, U+0085 and others, which a JSON string may hold as they are); blank means JSON
    whitespace only."""
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{where}: not valid UTF-8 ({exc.reason})") from exc
            if not line.strip(" \t\r\n"):
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from exc
            yield where, _as_object(row, where)


def _json_rows(path: Path) -> Iterator[Row]:
    """One JSON array, parsed whole (see the module's docstring)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json prompt file must hold one array of objects")
    for i, row in enumerate(data):
        yield f"{path}: row {i}", _as_object(row, f"{path}: row {i}")


def _parquet_rows(path: Path, batch: int = 1024) -> Iterator[Row]:
    """A parquet file ``batch`` rows at a time."""
    import pyarrow.parquet as pq

    index = 0
    try:
        for records in pq.ParquetFile(path).iter_batches(batch_size=batch):
            for row in records.to_pylist():
                yield f"{path}: row {index}", row
                index += 1
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DatasetError(f"{path}: not a readable parquet file ({one_line(exc)})") from exc


def _as_object(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def one_line(exc: object) -> str:
    """An exception (or reason) as a single short line, for embedding in a one-line error."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
