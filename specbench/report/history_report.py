"""``specbench report DIR``: the history of the runs under a directory (found, read and classified by
``run/history.py``) as markdown, JSON or CSV (the HTML page is ``history_html``), and the lines that say which
run a table comes from and why another is not shown.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..run.history import RunEntry, SuiteHistory, show_time
from ..run.readback import Newer
from ..schemas.run_files import META
from ..util.diskio import write_output
from .csv_rows import to_csv
from .markdown import markdown as table

#: the formats a history is shown in (the others are one run's)
SHOWN_FORMATS = ("markdown", "json", "csv", "html")


def run_line(run: RunEntry) -> str:
    """Which run a table comes from, in one markdown line."""
    p = run.provenance()
    parts = [f"`{run.path}`", f"started {show_time(run.started)}"]
    if p.engine:
        parts.append("engine " + ", ".join(p.engine))
    if p.suite_sha256:
        parts.append(f"suite file sha256 `{p.suite_sha256[:12]}`")
    if p.git_commit:
        parts.append(f"git `{p.git_commit[:10]}`" + (" (suite file differs from that commit)" if p.git_dirty else ""))
    if not p.suite_sha256 and not p.git_commit and run.meta:
        parts.append("suite file hash and git commit not recorded (run made before they were)")
    if not run.meta:
        parts.append(f"no {META}")
    if run.newer:
        parts.append(newer_note(run.newer))
    return " · ".join(parts)


def newer_note(newer: Newer) -> str:
    """A newer specbench's run beside its table or status line: what this version did with it."""
    ignored = len(newer.ignored_meta_keys) + len(newer.ignored_results_keys)
    who = f"specbench {newer.specbench_version}" if newer.specbench_version else "a newer specbench"
    return f"written by {who}: shown with what this version reads" + (f" ({ignored} key(s) ignored)" if ignored else "")


def status_line(run: RunEntry) -> str:
    note = f" ({newer_note(run.newer)})" if run.newer else ""
    return f"- `{run.path}` (started {show_time(run.started)}): **{run.status}** — {run.reason}{note}"


def other_runs(h: SuiteHistory) -> list[str]:
    """One line per run of the suite that is not shown: not complete (and why), or older."""
    lines = []
    for run in h.runs:
        if run in h.shown:
            continue
        if run.complete:
            lines.append(f"- `{run.path}` (started {show_time(run.started)}): complete, older — shown with `--all`")
        else:
            lines.append(status_line(run) + f"; not shown (its own table: `specbench report {run.path}`)")
    return lines


def heading(h: SuiteHistory) -> str:
    return f"## Suite `{h.name}`" if not h.name.startswith("(") else f"## {h.name}"


def emit(text: str, output: str | None) -> None:
    if output:
        write_output(Path(output), text + "\n")
    else:
        sys.stdout.write(text + "\n")




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
                    table(run.rows or [], run.meta)]
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
                entry["records"] = [r.to_dict(reference_first=False) for r in run.rows or []]
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
            rows += [{**head, **r.to_dict(reference_first=False)} for r in run.rows or []]
    for h in histories:
        for run in h.runs:
            if not run.complete:
                rows.append({"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.started_at if run.meta else None,
                             "run_status": run.status, "run_note": run.reason})
    return to_csv(rows)


