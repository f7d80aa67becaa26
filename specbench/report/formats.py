"""Report formats by name: ``specbench report --format NAME`` offers exactly what ``FORMATS`` lists.

A text format's module has ``render(rows, meta, explained) -> str`` (``explained``: the run's analyses,
made by the run stage, ``RunResults.explained``), which the CLI prints or writes to
``--output``. A file format's module has ``write(paths, output) -> str``: it reads the runs itself
(the HTML page draws requests.jsonl, parquet writes a directory tree) and returns what it wrote.
Modules are imported only when their format is used, and the types below only for the type checker, so listing
the formats (``specbench report --help``) imports nothing else.
Adding a format: one module with ``render`` or ``write``, and one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..measure.explained import Explained
    from ..schemas.meta import RunMeta
    from ..schemas.row import ResultRow


@dataclass(frozen=True)
class Format:
    name: str
    module: str  # under specbench.report
    kind: Literal["text", "files"]
    help: str

    def imported(self) -> ModuleType:
        """The format's module, imported when first used."""
        return importlib.import_module(f"specbench.report.{self.module}")


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("markdown", "markdown", "text", "the comparison table, sweep table and notes (the default)"),
    Format("json", "json_rows", "text", "the rows as read"),
    Format("csv", "csv_rows", "text", "one line per cell, every key a column"),
    Format("html", "html", "files", "one self-contained page with plots (--output: default report.html)"),
    Format("parquet", "export", "files", "one run as profiling tables under --output (as `specbench export`)"),
)}

TEXT_FORMATS = tuple(name for name, f in FORMATS.items() if f.kind == "text")


def render(rows: Sequence[ResultRow], fmt: str, meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    """The rows in a text format."""
    found = FORMATS.get(fmt)
    if found is None or found.kind != "text":
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(TEXT_FORMATS)})")
    text: str = found.imported().render(rows, meta, explained)
    return text


def write(fmt: str, paths: Sequence[str | Path], output: str | Path | None, **options: str) -> str:
    """Run a file format over run directories / results.json files (``options``: the format's own, e.g.
    parquet's ``gpu``); returns the line to print."""
    message: str = FORMATS[fmt].imported().write([Path(p) for p in paths], None if output is None else Path(output), **options)
    return message
