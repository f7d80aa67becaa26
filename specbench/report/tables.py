"""The markdown tables of the report: the comparison table people paste (the reference table's
columns, the speedup with its CI in its cell, and the swept load: at most 14), then one small table per question (*Why*,
*Per request*, *Quality & cost*, *Checks*), each repeating only the identity columns it needs so it
reads on its own, and each left out when it has nothing measured. Columns: ``columns.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..schemas.row import ResultRow
from .colspec import MAIN, Column, Group, is_missing
from .columns import grouped
from .workload_columns import headline_note


def md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown_table(rows: Sequence[ResultRow], columns: Sequence[Column]) -> str:
    lines = [md_row([c.header for c in columns]), md_row(["---"] * len(columns))]
    lines += [md_row([c.cell(r) for c in columns]) for r in rows]
    return "\n".join(lines)


def _measured(rows: Sequence[ResultRow], column: Column) -> bool:
    return any(not is_missing(column.cell(r)) for r in rows)


def small_tables(rows: Sequence[ResultRow]) -> list[tuple[Group, list[Column]]]:
    """Each table after the comparison table with the columns it prints: the identity columns, then
    its own columns that measured something for some record; a table left with none is left out."""
    groups = grouped(rows)
    identity = [c for g, cols in groups if g is MAIN for c in cols if c.identity]
    out = []
    for g, cols in groups:
        own = [c for c in cols if _measured(rows, c)]
        if g is not MAIN and own:
            out.append((g, identity + own))
    return out


def tables_markdown(rows: Sequence[ResultRow]) -> list[str]:
    """The comparison table, then each small table under its title, with its note below it."""
    groups = grouped(rows)
    main = next((cols for g, cols in groups if g is MAIN), [])
    note = headline_note(rows)
    parts = [markdown_table(rows, main) + (f"\n\n- {note}" if note else "")]
    for g, cols in small_tables(rows):
        parts.append(f"{g.title}\n\n{markdown_table(rows, cols)}" + (f"\n\n- {g.note}" if g.note else ""))
    return parts
