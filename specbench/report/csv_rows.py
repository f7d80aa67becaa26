"""The ``csv`` report format: one row per cell, every key a column (as read, in order)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from ..measure.explained import Explained
from ..schemas.meta import RunMeta
from ..schemas.row import ResultRow
from ..util.jsonio import dumps
from ..util.numbers import is_number


def to_csv(records: Sequence[Mapping[str, Any]]) -> str:
    """One line per record, every key as a column; nested values as JSON, missing (and NaN) as empty."""
    keys: list[str] = []
    for r in records:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow({k: dumps(v) if isinstance(v, (dict, list)) else ("" if v is None or (isinstance(v, float) and not is_number(v)) else v)
                         for k, v in r.items()})
    return buf.getvalue().rstrip("\n")


def render(rows: Sequence[ResultRow], meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    return to_csv([r.to_dict(reference_first=False) for r in rows])
