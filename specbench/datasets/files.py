"""Read prompt files (JSONL, JSON array, parquet) into rows tagged with where they came from.

Every row carries a location string ("prompts.jsonl:7", "x.parquet: row 3") so that a bad row
can be reported as one line naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import DatasetError

SUFFIXES = (".jsonl", ".json", ".parquet")

Row = tuple[str, dict[str, Any]]


def read_rows(path: Path) -> list[Row]:
    """All rows of ``path`` in file order; blank JSONL lines are skipped; a file without rows is an error."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DatasetError(f"{path}: unsupported file type '{suffix}' (use .jsonl, .json or .parquet)")
    try:
        if suffix == ".parquet":
            rows = _parquet_rows(path)
        else:
            text = path.read_text(encoding="utf-8")
            rows = _json_rows(path, text) if suffix == ".json" else _jsonl_rows(path, text)
    except DatasetError:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"{path}: cannot read file ({one_line(exc)})") from exc
    if not rows:
        raise DatasetError(f"{path}: the file holds no rows")
    return rows


def _jsonl_rows(path: Path, text: str) -> list[Row]:
    """JSON Lines: a line ends at ``\n`` only (``str.splitlines`` would also cut at U+2028, U+2029,
    U+0085 and others, which a JSON string may hold as they are); blank means JSON whitespace only."""
    rows: list[Row] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip(" \t\r"):
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from exc
        rows.append((where, _as_object(row, where)))
    return rows


def _json_rows(path: Path, text: str) -> list[Row]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json prompt file must hold one array of objects")
    return [(f"{path}: row {i}", _as_object(row, f"{path}: row {i}")) for i, row in enumerate(data)]


def _parquet_rows(path: Path) -> list[Row]:
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DatasetError(f"{path}: not a readable parquet file ({one_line(exc)})") from exc
    return [(f"{path}: row {i}", row) for i, row in enumerate(records)]


def _as_object(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def one_line(exc: object) -> str:
    """An exception (or reason) as a single short line, for embedding in a one-line error."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
