"""The markdown report: the comparison table teams paste into PRs (``../shared/reference/results_example.md``)
and the small tables below it (``tables.py``), the sweep, what-if and tune tables, and the notes and
warnings that must travel with them (worded in ``notes.py``).

Missing values print as ``—`` (or ``-`` inside the per-position cell), never as 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..measure.explained import Explained, Sweep
from ..schemas.cell import load_label
from ..schemas.meta import RunMeta
from ..schemas.row import ResultRow
from .colspec import DASH, DECOMPOSITION_NOTE
from .columns import COLUMNS, has_decomposition, num
from .explain_tables import explain_markdown
from .notes import lines
from .tables import md_row, tables_markdown

__all__ = ["COLUMNS", "DASH", "DECOMPOSITION_NOTE", "has_decomposition", "markdown", "render"]


def markdown(rows: Sequence[ResultRow], meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    """The comparison table and the small tables (``tables.py``), the sweep table, the what-if and
    tune tables, and last the notes and warnings. The sweep, what-if and tune tables format the run's
    analyses, made once by the run stage (``explained``: ``RunResults.explained``, or what the run
    made when it wrote results.md); without them those tables are left out."""
    parts = tables_markdown(rows)
    explained = explained or Explained()
    sweep = sweep_table(explained.sweep)
    if sweep:
        parts.append(sweep)
    parts += explain_markdown(explained)
    notes = lines(rows, meta)
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes))
    return "\n\n".join(parts)


def sweep_table(sweep: Sweep | None) -> str | None:
    """Speedup vs concurrency per data set and config, with the crossover where it drops below 1."""
    if sweep is None:
        return None
    header = ["Dataset", "Run", *[load_label("concurrency", c) for c in sweep.loads], "Crossover"]
    lines = [md_row(header), md_row(["---"] * len(header))]
    for line in sweep.lines:
        cross = line.crossover
        lines.append(md_row([line.dataset, line.run, *[num(line.speedups.get(c), 3, "x") for c in sweep.loads],
                              load_label("concurrency", cross) if cross is not None else "none (pays off at every load)"]))
    return "Speedup vs concurrency\n\n" + "\n".join(lines)


def render(rows: Sequence[ResultRow], meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    """The ``markdown`` report format."""
    return markdown(rows, meta, explained)
