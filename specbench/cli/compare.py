"""`specbench compare OLD NEW`: every cell of two runs, metric by metric, with the gate's verdicts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

TOLERANCE_HELP = ("changes smaller than PCT%% are never better/worse (the gate's allowed drop; default 0%%: only the "
                  "95%% CIs, or point values where there is none, decide)")


def compare_cli(args: argparse.Namespace) -> int:
    from ..report.history_compare import comparison_text, parse_tolerance
    from ..report.history_report import emit
    from ..run.history import read_named_run
    from ..util.diskio import check_output_file

    if args.output:
        check_output_file(Path(args.output))
    tolerance = parse_tolerance(args.tolerance)
    old, new = read_named_run(Path(args.old)), read_named_run(Path(args.new))
    emit(comparison_text(old, new, args.format, tolerance), args.output)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("compare", help="compare two runs of a suite cell by cell (better / worse / within noise)")
    p.add_argument("old", help="the earlier run: run directory or results.json")
    p.add_argument("new", help="the later run: run directory or results.json")
    p.add_argument("--format", "-f", choices=("markdown", "json", "csv"), default="markdown")
    p.add_argument("--output", "-o", help="write to this file")
    p.add_argument("--tolerance", metavar="PCT%", help=TOLERANCE_HELP)
    p.set_defaults(func=compare_cli)
