"""`specbench gate`: read the runs and the suite, judge, print and append the step summary.

Reading runs and suites and writing the step summary happen only here; the rest of the package is pure.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ResultsError, SpecbenchError
from ..gate.judge import Run, Verdict, comparability_problems, evaluate, index_cells, suite_gate, suite_name
from ..gate.render import failure_line, render_markdown
from ..report.load import load_run as read_run
from ..schemas.run_files import META, RESULTS
from ..suite import load_suite
from ..suite.gate import GateError, GateSpec, cli_spec


def results_path(path: Path) -> Path:
    """A run directory or a results.json path -> the results.json path."""
    return path / RESULTS if path.is_dir() else path


def load_run(path: Path) -> Run:
    """A run through the report's loader, strictly: a damaged value refuses the run, never becomes —."""
    results = results_path(Path(path))
    if not results.is_file():
        raise ResultsError(f"{results}: results file not found")
    run = read_run(results, quiet=True, strict=True)
    for problem in run.problems:
        warn(problem)
    return Run(results, index_cells(run.rows, str(results)), run.meta)


def load_suite_gate(path: Path) -> tuple[GateSpec, str]:
    """The ``gate:`` section and ``name`` of a suite file, read by the suite loader (which checked the section)."""
    suite = load_suite(path)
    return GateSpec.from_mapping(suite.gate, f"{path}: gate"), suite.name


def summary_targets(explicit: Path | None) -> list[Path]:
    targets = [Path(p) for p in [os.environ.get("GITHUB_STEP_SUMMARY"), explicit] if p]
    unique: list[Path] = []
    for target in targets:
        if all(target.resolve() != u.resolve() for u in unique):
            unique.append(target)
    return unique


def append_summary(targets: Sequence[Path], text: str) -> None:
    for target in targets:
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError as err:
            raise GateError(f"{target}: cannot append the summary ({err.strerror})") from None


def warn(message: str) -> None:
    print(f"specbench gate: warning: {message}", file=sys.stderr)


def gather_checks(args: argparse.Namespace, cand: Run) -> GateSpec:
    """Suite thresholds (``--suite``, else the candidate's meta.json) overridden by CLI flags."""
    if getattr(args, "suite", None):
        base, name = load_suite_gate(args.suite)
        cand_name = suite_name(cand.meta)
        if name is not None and cand_name is not None and name != cand_name:
            raise GateError(
                f"--suite {args.suite} is suite {name!r} but the candidate ran suite {cand_name!r}"
            )
    else:
        where = f"{cand.path.parent / META}: suite.raw.gate"
        base = GateSpec.from_mapping(suite_gate(cand.meta), where)
    flags = cli_spec(
        getattr(args, "min", None) or [],
        getattr(args, "max", None) or [],
        getattr(args, "max_drop", None) or [],
    )
    spec = base.merged(flags)
    if not spec.checks:
        raise GateError("no thresholds: give --min/--max/--max-drop or a suite with a gate: section")
    return spec


def judge_runs(args: argparse.Namespace) -> tuple[list[Verdict], Run, Run | None]:
    cand = load_run(args.candidate)
    reference = getattr(args, "reference", None)
    if reference is not None:
        from ..report.history import reference_for  # a directory of runs: its latest earlier run

        reference = reference_for(reference, cand.path.parent, cand.meta)
    ref = load_run(reference) if reference is not None else None
    spec = gather_checks(args, cand)
    if ref is not None:
        if cand.meta is None or ref.meta is None:
            missing = cand.path if cand.meta is None else ref.path
            warn(f"no meta.json beside {missing}; cannot verify the runs are comparable")
        else:
            for path, meta in ((cand.path, cand.meta), (ref.path, ref.meta)):
                if meta.comparability is None:
                    warn(f"{path.parent / META} has no readable comparability; "
                         "cannot verify the runs are comparable")
            problems = comparability_problems(cand.meta, ref.meta)
            if problems:
                raise GateError("candidate and reference are not comparable: " + "; ".join(problems))
    ref_cells = ref.cells if ref is not None else None
    verdicts = [v for check in spec.checks for v in evaluate(check, cand.cells, ref_cells)]
    return verdicts, cand, ref


def run_cli(args: argparse.Namespace) -> int:
    """Entry point of ``specbench gate``: returns 0 pass, 1 regression, 2 unusable input."""
    targets = summary_targets(getattr(args, "summary", None))
    try:
        verdicts, cand, ref = judge_runs(args)
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
    """Add ``gate`` to the ``specbench`` sub-commands; cli.py dispatches to ``args.func``."""
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
