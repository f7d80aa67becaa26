"""`specbench compare OLD NEW`: every cell of two runs, metric by metric, with the gate's verdicts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

TOLERANCE_HELP = ("changes smaller than PCT%% are never better/worse (the gate's allowed drop; default 0%%: only the "
                  "95%% CIs, or point values where there is none, decide)")


def compare_cli(args: argparse.Namespace) -> int:
    from ..report.history import emit, status_line
    from ..report.history_compare import comparison_csv, comparison_json, comparison_markdown, parse_tolerance, read_named_run
    from ..util.diskio import check_output_file

    if args.output:
        check_output_file(Path(args.output))
    tolerance = parse_tolerance(args.tolerance)
    old, new = read_named_run(Path(args.old)), read_named_run(Path(args.new))
    if args.format == "json":
        text = json.dumps(comparison_json(old, new, tolerance), indent=2)
    elif args.format == "csv":
        text = comparison_csv([(new.suite or old.suite or "", old, new)], tolerance)
    else:
        notes = [status_line(r) for r in (old, new) if not r.complete]
        text = comparison_markdown(old, new, f"## {old.path} → {new.path}", tolerance)
        if notes:
            text += "\n\n⚠ not complete (its numbers may be partial):\n" + "\n".join(notes)
    emit(text, args.output)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("compare", help="compare two runs of a suite cell by cell (better / worse / within noise)")
    p.add_argument("old", help="the earlier run: run directory or results.json")
    p.add_argument("new", help="the later run: run directory or results.json")
    p.add_argument("--format", "-f", choices=("markdown", "json", "csv"), default="markdown")
    p.add_argument("--output", "-o", help="write to this file")
    p.add_argument("--tolerance", metavar="PCT%", help=TOLERANCE_HELP)
    p.set_defaults(func=compare_cli)
