"""What the commands share: running a suite with its plan and printing the outcome, and number lists."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from ..errors import SuiteError
from ..load.generate import run_loop
from ..report.markdown import markdown
from ..report.notes import sentence
from ..run import RunDir, RunSession, SequentialRun
from ..run.progress import RunProgress
from ..run.sequential import RunOutcome
from ..schemas.meta import RunMeta
from ..schemas.plans import ScheduleCheck, TunePlan, WhatifPlan
from ..schemas.run_files import REQUESTS, RESULTS, RESULTS_MD
from ..suite import Suite

DerivedPlan = WhatifPlan | TunePlan | ScheduleCheck


#: the meta.json key each derived suite's plan is written under
PLAN_KEYS: dict[type[DerivedPlan], str] = {WhatifPlan: "whatif", TunePlan: "tune", ScheduleCheck: "schedule"}


def run_with_plan(suite: Suite, out: Path, plan: DerivedPlan, *, resume: bool, quiet: bool) -> tuple[RunOutcome, RunMeta]:
    """Run ``suite`` with the normal runner (live progress, Ctrl-C, resume), the plan in meta.json under its key.
    Returns the runner's outcome and the run's meta; prints results.md as ``specbench run`` does."""
    extra = RunMeta()
    extra.set(PLAN_KEYS[type(plan)], plan)
    with RunProgress(Console(stderr=True), quiet=quiet, word=sentence) as progress:
        session = RunSession(suite, out, render=markdown, resume=resume, progress=progress, extra_meta=extra)
        outcome = run_loop(SequentialRun(suite, session, progress=progress).execute())
    print_outcome(outcome, out)
    return outcome, session.meta


def print_outcome(outcome: RunOutcome, out: Path) -> None:
    """results.md on stdout, as written (one render: the tables and every note under them); failed
    configs, where the files are, and how to finish on stderr."""
    console = Console(stderr=True)
    sys.stdout.write(RunDir(out).results_markdown() or "")
    sys.stdout.flush()
    for name, err in outcome.failed_configs.items():
        console.print(f"[red]config {name} failed:[/] {err.splitlines()[0]}", highlight=False)
    console.print(f"results: {out}/{RESULTS}, {out}/{RESULTS_MD}, {out}/{REQUESTS}", highlight=False)
    if outcome.interrupted:
        console.print("[yellow]interrupted: what was measured is saved; finish with --resume[/]")


def parse_numbers(text: str, flag: str, kind: type) -> list:
    """``1.5,2,2.5`` → numbers, one-line error naming the flag otherwise."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = kind(part)
        except ValueError:
            raise SuiteError(f"{flag}: {part!r} is not {'an integer' if kind is int else 'a number'} (expected e.g. {flag} "
                             f"{'1,2,3,5,7' if kind is int else '1.5,2,2.5,3'})") from None
        out.append(value)
    if not out:
        raise SuiteError(f"{flag}: no values given")
    return sorted(set(out))
