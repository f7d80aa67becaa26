"""`specbench report PATH...`: the tables of result dirs or results.json files in any format, or
the history of the runs under a directory (latest per suite, --all, --compare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .compare import TOLERANCE_HELP


def report_cli(args: argparse.Namespace) -> int:
    from ..report.formats import FORMATS, render, write
    from ..run.readback import read_results
    from ..util.diskio import write_output

    check_output(args)
    if wants_history(args):
        return history_cli(args)
    if args.gpu is not None and args.format != "parquet":
        from ..errors import ResultsError

        raise ResultsError("--gpu labels the parquet tables: it applies to --format parquet only")
    if FORMATS[args.format].kind == "files":
        print(write(args.format, args.paths, args.output, **({"gpu": args.gpu} if args.gpu is not None else {})))
        return 0
    results = read_results(args.paths)
    text = render(results.rows, args.format, results.meta, results.explained) + "\n"
    if args.output:
        write_output(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


def check_output(args: argparse.Namespace) -> None:
    """Refuse an ``-o`` that cannot be written before any run is read: parquet writes a directory, html
    a file (``report.html`` inside a directory given), the text formats a file."""
    from ..util.diskio import check_output_dir, check_output_file

    if args.format == "parquet" and args.output:
        check_output_dir(Path(args.output))
    elif args.format == "html":
        out = Path(args.output or "report.html")
        check_output_file(out / "report.html" if out.is_dir() else out)
    elif args.output:
        check_output_file(Path(args.output))


def wants_history(args: argparse.Namespace) -> bool:
    """A directory that is not itself a run, or a history flag, makes ``report`` a history report."""
    from ..run.history import is_run_dir

    flags = args.all or args.suite or args.since or args.compare or args.tolerance
    return bool(flags) or any(Path(p).is_dir() and not is_run_dir(Path(p)) for p in args.paths)


def history_cli(args: argparse.Namespace) -> int:
    from ..errors import ResultsError
    from ..report.history_compare import compare_report, parse_tolerance
    from ..report.history_html import write_history_html
    from ..report.history_report import SHOWN_FORMATS, as_csv, as_json, emit, markdown
    from ..run.history import history, parse_since

    roots = [Path(p) for p in args.paths]
    since = parse_since(args.since) if args.since else None
    tolerance = parse_tolerance(args.tolerance)
    if args.tolerance and not args.compare:
        raise ResultsError("--tolerance applies to --compare only")
    if args.format not in SHOWN_FORMATS:
        raise ResultsError(f"--format {args.format}: one run only, not the runs under a directory (formats here: {', '.join(SHOWN_FORMATS)})")
    histories = history(roots, suite=args.suite, since=since, show_all=args.all)
    if args.format == "html":
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


def register(sub: Any) -> None:
    from ..report.formats import FORMATS  # the one list --format offers (the registry imports no format)

    report = sub.add_parser("report", help="print the comparison table of result dirs or results.json files, or of the runs under a directory")
    report.add_argument("paths", nargs="+")
    report.add_argument("--format", "-f", choices=tuple(FORMATS), default="markdown")
    report.add_argument("--output", "-o", help="write to this file (html: default report.html; parquet: a directory)")
    report.add_argument("--all", action="store_true", help="a directory of runs: every complete run, not just the latest of each suite")
    report.add_argument("--suite", metavar="NAME", help="a directory of runs: only runs of this suite")
    report.add_argument("--since", metavar="DATE", help="a directory of runs: only runs started at or after DATE (ISO, local time)")
    report.add_argument("--compare", action="store_true", help="a directory of runs: the latest complete run of each suite vs the one before")
    report.add_argument("--tolerance", metavar="PCT%", help="with --compare: " + TOLERANCE_HELP)
    report.add_argument("--gpu", help="parquet: GPU label for the path and the gpu column (default: each config's "
                                      "recorded accelerator, as `specbench export`)")
    report.set_defaults(func=report_cli)
