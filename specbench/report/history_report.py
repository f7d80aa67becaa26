"""``specbench report DIR``: the history of the runs under a directory as markdown, JSON or CSV (the HTML
page is ``history_html``), and the command's flags.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .csv_rows import to_csv
from .history import (
    SuiteHistory,
    heading,
    newer_note,
    other_runs,
    run_line,
)
from .markdown import markdown as table


def markdown(histories: Sequence[SuiteHistory], roots: Sequence[Path], show_all: bool) -> str:
    n_runs = sum(len(h.runs) for h in histories)
    what = "every complete run of each suite" if show_all else "the latest complete run of each suite (`--all`: every one)"
    out = [f"# specbench results under {', '.join(f'`{r}`' for r in roots)}", "",
           f"{n_runs} run(s) of {len(histories)} suite(s); showing {what}."]
    for h in histories:
        out += ["", heading(h)]
        if not h.shown:
            out += ["", "No complete run of this suite."]
        for run in h.shown:
            out += ["", ("Run " if show_all else "Latest complete run: ") + run_line(run), "",
                    table(run.records or [], run.meta)]
        others = other_runs(h)
        if others:
            out += ["", "Other runs of this suite:", *others]
    return "\n".join(out)


def as_json(histories: Sequence[SuiteHistory], roots: Sequence[Path], show_all: bool) -> str:
    suites = []
    for h in histories:
        runs = []
        for run in h.runs:
            entry = {**asdict(run.provenance()), "shown": run in h.shown}
            if run in h.shown:
                entry["records"] = [r.to_dict(reference_first=False) for r in run.records or []]
            runs.append(entry)
        suites.append({"suite": h.name, "runs": runs})
    return json.dumps({"roots": [str(r) for r in roots], "selection": "all" if show_all else "latest",
                       "suites": suites}, indent=2)


RUN_COLUMNS = ("suite", "run_dir", "run_started_at", "run_status", "run_note")


def as_csv(histories: Sequence[SuiteHistory]) -> str:
    """One row per cell of each shown run, then one row per run that is not complete (its status and
    why, no numbers); the run_* columns say which run every row comes from."""
    rows: list[dict[str, Any]] = []
    for h in histories:
        for run in h.shown:
            head = {"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.started_at if run.meta else None,
                    "run_status": run.status, "run_note": newer_note(run.newer) if run.newer else None}
            rows += [{**head, **r.to_dict(reference_first=False)} for r in run.records or []]
    for h in histories:
        for run in h.runs:
            if not run.complete:
                rows.append({"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.started_at if run.meta else None,
                             "run_status": run.status, "run_note": run.reason})
    return to_csv(rows)


