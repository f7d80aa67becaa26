"""`specbench whatif SUITE`: the break-even acceptance map (run/whatif builds the suite,
measure/break_even reads the map, report/explain_tables renders it); with ``--profile FILE``, a replay
of an acceptance profile per data set and k (run/replay builds it, measure/replay reads it back)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import SuiteError


def whatif_cli(args: argparse.Namespace) -> int:
    from ..run import default_output
    from ..run.replay import expand_replay, read_profile_file
    from ..run.whatif import expand_whatif
    from ..suite import read_suite
    from .common import parse_numbers, run_with_plan

    if args.profile and args.lengths:
        raise SuiteError("--profile and --lengths exclude each other: a profile fixes the acceptance of each data set")
    suite = read_suite(args.suite)
    if args.profile:
        entries, profile = read_profile_file(args.profile)
        derived, plan = expand_replay(suite, entries, profile, args.config or None, include_real=not args.no_real)
    else:
        lengths = parse_numbers(args.lengths, "--lengths", float) if args.lengths else None
        derived, plan = expand_whatif(suite, lengths, args.config or None, include_real=not args.no_real)
    plan.suite = str(suite.path)
    out = Path(args.resume or args.output or default_output(derived))
    outcome, _ = run_with_plan(derived, out, plan, resume=bool(args.resume), quiet=args.quiet)
    return outcome.exit_code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "whatif", help="speedup vs acceptance length per load (synthetic acceptance): the break-even map, or a "
                       "profile's predicted speedup",
        description="Run each speculative config at a grid of synthetic acceptance lengths × the suite's load points "
                    "(baseline and the real config included, one run directory) and report the break-even acceptance "
                    "length per load. With --profile: run each config once per data set at the acceptance an "
                    "acceptance profile (specbench profile) gives for that data set and the config's k, and report "
                    "the predicted speedup per data set and load.")
    p.add_argument("suite", help="suite YAML file")
    p.add_argument("--lengths", help="acceptance lengths, e.g. 1.5,2,3 (default 1.5, 2, 2.5, … up to k+1)")
    p.add_argument("--profile", metavar="FILE", help="replay this acceptance profile (specbench profile -o FILE): vLLM "
                                                     "per position, SGLang its mean length")
    p.add_argument("--config", action="append", metavar="NAME", help="only this speculative config (repeatable)")
    p.add_argument("--no-real", action="store_true", help="do not also run the unmodified configs")
    p.add_argument("--output", "-o", help="run directory (default results/<suite>-whatif-<timestamp>/)")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted whatif run in DIR")
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress")
    p.set_defaults(func=whatif_cli)
