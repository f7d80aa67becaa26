"""`specbench gate`: the flags into ``gate.workflow.gate_runs`` (read, judge), then print and append
the step summary (written only here)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import SpecbenchError


def summary_targets(explicit: Path | None) -> list[Path]:
    targets = [Path(p) for p in [os.environ.get("GITHUB_STEP_SUMMARY"), explicit] if p]
    unique: list[Path] = []
    for target in targets:
        if all(target.resolve() != u.resolve() for u in unique):
            unique.append(target)
    return unique


def append_summary(targets: Sequence[Path], text: str) -> None:
    from ..suite.gate import GateError

    for target in targets:
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError as err:
            raise GateError(f"{target}: cannot append the summary ({err.strerror})") from None


def warn(message: str) -> None:
    print(f"specbench gate: warning: {message}", file=sys.stderr)


def run_cli(args: argparse.Namespace) -> int:
    """Entry point of ``specbench gate``: returns 0 pass, 1 regression, 2 unusable input."""
    from ..gate.render import failure_line, render_markdown
    from ..gate.workflow import GateInputs, gate_runs
    from ..suite.gate import GateError

    targets = summary_targets(getattr(args, "summary", None))
    try:
        outcome = gate_runs(GateInputs(args.candidate, args.reference, args.suite, args.min, args.max, args.max_drop), warn)
        verdicts, cand, ref = outcome.verdicts, outcome.candidate, outcome.reference
        markdown = render_markdown(verdicts, str(cand.path), str(ref.path) if ref else None)
        print(markdown, end="")
        append_summary(targets, markdown)
    except SpecbenchError as err:
        print(f"specbench gate: {err}", file=sys.stderr)
        try:
            append_summary(targets, f"### specbench gate: unusable input\n\n{err}\n")
        except GateError:
            pass
        return err.exit_code
    if any(v.outcome == "fail" for v in verdicts):
        print(f"specbench gate: {failure_line(verdicts)}", file=sys.stderr)
        return 1
    return 0


EPILOG = """\
thresholds (repeatable; SELECTOR is METRIC[:CONFIG][@DATASET], no CONFIG = every config):
  --min speedup_vs_baseline:dspark_k3=1.2          floor, every data set of dspark_k3
  --max latency_p95_ms:dspark_k3@math500=2000      ceiling on one cell
  --max-drop speedup_vs_baseline=5%                allowed worsening vs --reference
  for *_ms metrics and failed_requests a "drop" is an increase.

noise: with ci95 in the results, a crossed threshold fails only if the whole CI crosses it
("within noise" otherwise). exit codes: 0 pass, 1 regression, 2 unusable input. See docs/gate.md.
"""


def register(subparsers: Any) -> None:
    """Add ``gate`` to the ``specbench`` sub-commands; ``specbench.cli.main`` dispatches to ``args.func``."""
    parser = subparsers.add_parser(
        "gate",
        help="fail CI when speculative decoding gets slower or accepts less",
        description="Check a results run against floors, ceilings and allowed drops vs a reference.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("candidate", type=Path, metavar="CANDIDATE", help="run directory or results.json")
    add("--reference", "-r", type=Path, metavar="REF",
        help="run directory or results.json; or a directory of runs: its latest complete run of the candidate's suite started before it")
    add("--min", action="append", default=[], metavar="SELECTOR=VALUE", help="floor: fail below VALUE")
    add("--max", action="append", default=[], metavar="SELECTOR=VALUE", help="ceiling: fail above VALUE")
    add("--max-drop", dest="max_drop", action="append", default=[], metavar="SELECTOR=PCT%",
        help="allowed relative worsening vs --reference, e.g. 5%%")
    add("--suite", type=Path, metavar="SUITE.yaml", help="thresholds from this suite's gate: section")
    add("--summary", type=Path, metavar="PATH", help="also append the markdown table to PATH")
    parser.set_defaults(func=run_cli)
