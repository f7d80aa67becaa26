"""The ``json`` report format: the rows as read, standard JSON (a NaN or ±Infinity, never a measured
value, is written as ``null``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..measure.explained import Explained
from ..schemas.meta import RunMeta
from ..schemas.row import ResultRow
from ..util.jsonio import dumps


def render(rows: Sequence[ResultRow], meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    return dumps([r.to_dict(reference_first=False) for r in rows], indent=2)
