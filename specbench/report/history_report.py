"""``specbench report DIR``: the history of the runs under a directory as markdown, JSON or CSV (the HTML
page is ``history_html``), and the command's flags.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from .history import (
    SHOWN_FORMATS,
    SuiteHistory,
    emit,
    heading,
    history,
    is_run_dir,
    other_runs,
    parse_since,
    run_line,
)
from .history_compare import TOLERANCE_HELP, compare_report, parse_tolerance


def markdown(histories: Sequence[SuiteHistory], roots: Sequence[Path], show_all: bool) -> str:
    from .markdown import markdown as table

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
            entry = {**run.provenance(), "shown": run in h.shown}
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
    from .csv_rows import to_csv

    rows: list[dict[str, Any]] = []
    for h in histories:
        for run in h.shown:
            head = {"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.get("started_at"),
                    "run_status": run.status, "run_note": None}
            rows += [{**head, **r.to_dict(reference_first=False)} for r in run.records or []]
    for h in histories:
        for run in h.runs:
            if not run.complete:
                rows.append({"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.get("started_at"),
                             "run_status": run.status, "run_note": run.reason})
    return to_csv(rows)


def wants_history(args: argparse.Namespace) -> bool:
    """A directory that is not itself a run, or a history flag, makes ``report`` a history report."""
    flags = args.all or args.suite or args.since or args.compare or args.tolerance
    return bool(flags) or any(Path(p).is_dir() and not is_run_dir(Path(p)) for p in args.paths)


def report_cli(args: argparse.Namespace) -> int:
    roots = [Path(p) for p in args.paths]
    since = parse_since(args.since) if args.since else None
    tolerance = parse_tolerance(args.tolerance)
    if args.tolerance and not args.compare:
        raise ResultsError("--tolerance applies to --compare only")
    if args.format not in SHOWN_FORMATS:
        raise ResultsError(f"--format {args.format}: one run only, not the runs under a directory (formats here: {', '.join(SHOWN_FORMATS)})")
    histories = history(roots, suite=args.suite, since=since, show_all=args.all)
    if args.format == "html":
        from .history_html import write_history_html

        out = write_history_html(histories, roots, Path(args.output or "report.html"), args.all, args.compare, tolerance)
        print(f"wrote {out}")
        return 0
    if args.compare:
        text = compare_report(histories, args.format, tolerance)
    elif args.format == "json":
        text = as_json(histories, roots, args.all)
    elif args.format == "csv":
        text = as_csv(histories)
    else:
        text = markdown(histories, roots, args.all)
    emit(text, args.output)
    return 0


def add_report_flags(report: argparse.ArgumentParser) -> None:
    """``report``'s flags for directories of runs."""
    report.add_argument("--all", action="store_true", help="a directory of runs: every complete run, not just the latest of each suite")
    report.add_argument("--suite", metavar="NAME", help="a directory of runs: only runs of this suite")
    report.add_argument("--since", metavar="DATE", help="a directory of runs: only runs started at or after DATE (ISO, local time)")
    report.add_argument("--compare", action="store_true", help="a directory of runs: the latest complete run of each suite vs the one before")
    report.add_argument("--tolerance", metavar="PCT%", help="with --compare: " + TOLERANCE_HELP)
