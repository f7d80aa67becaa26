"""The `specbench tune` command: expand (``run.tune``), run (the run chooses K per load as it writes,
``measure.best_k``), write schedule.json; ``--verify schedule.json`` re-measures a schedule against the baseline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import SuiteError


def tune_cli(args: argparse.Namespace) -> int:
    from ..run import default_output
    from ..run.tune import expand_tune, read_schedule, verify_suite, write_schedule
    from ..schemas.plans import ScheduleCheck
    from ..suite import read_suite
    from .common import parse_numbers, run_with_plan

    if args.verify:
        path = Path(args.verify)
        suite = verify_suite(read_schedule(path), str(path))
        out = Path(args.resume or args.output or default_output(suite))
        outcome, _ = run_with_plan(suite, out, ScheduleCheck(str(path)), resume=bool(args.resume), quiet=args.quiet)
        return outcome.exit_code
    if not args.suite or not args.k:
        raise SuiteError("tune: give SUITE and --k 1,2,3 (or --verify schedule.json)")
    suite = read_suite(args.suite)
    derived, plan = expand_tune(suite, parse_numbers(args.k, "--k", int), args.config or None)
    plan.suite = str(suite.path)
    out = Path(args.resume or args.output or default_output(derived))
    outcome, meta = run_with_plan(derived, out, plan, resume=bool(args.resume), quiet=args.quiet)
    schedule = write_schedule(out, suite, meta)  # K is chosen at the run's final write, which an interrupted run still makes
    if schedule is not None:
        print(f"schedule: {schedule} (re-measure it with: specbench tune --verify {schedule})")
    return outcome.exit_code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tune", help="best number of draft tokens K per load, and the schedule that serves it",
        description="Expand the suite's speculative configs over K values (one server per K, baseline included, paired "
                    "prompts), report the best K per load with the Ks not told apart from it, and write schedule.json "
                    "with the engine flag. --verify schedule.json re-measures that schedule.")
    p.add_argument("suite", nargs="?", help="suite YAML file")
    p.add_argument("--k", help="K values, e.g. 1,2,3,5,7")
    p.add_argument("--config", action="append", metavar="NAME", help="only the family of this config (repeatable)")
    p.add_argument("--verify", metavar="SCHEDULE", help="re-measure a schedule.json written by tune against the baseline")
    p.add_argument("--output", "-o", help="run directory (default results/<suite>-tune-<timestamp>/)")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR")
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress")
    p.set_defaults(func=tune_cli)
