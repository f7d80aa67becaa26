"""The gate's workflow as one library call, its one door: read the candidate (and the reference, which a
directory of runs names by search: ``reference_for``) strictly, take the thresholds (the suite's ``gate:``
section, else the candidate's meta.json, overridden by the flags), refuse runs that are not comparable, and
judge (``judge``, pure). ``specbench gate`` passes plain values in and renders what comes back."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ResultsError
from ..run.history import discover, is_run_dir, parse_time, show_time, start_order
from ..run.readback import read_run
from ..schemas.meta import RunMeta
from ..schemas.run_files import META, RESULTS
from ..suite import read_suite
from ..suite.gate import GateError, GateSpec, cli_spec
from .judge import Run, Verdict, comparability_problems, evaluate, index_cells, suite_gate, suite_name

Warn = Callable[[str], None]


@dataclass(frozen=True)
class GateInputs:
    """What ``specbench gate`` was given: the runs, a suite with a ``gate:`` section, the threshold flags."""

    candidate: Path
    reference: Path | None = None
    suite: Path | None = None
    floors: Sequence[str] = ()
    ceilings: Sequence[str] = ()
    max_drops: Sequence[str] = ()


@dataclass
class GateOutcome:
    verdicts: list[Verdict]
    candidate: Run
    reference: Run | None


def results_path(path: Path) -> Path:
    """A run directory or a results.json path -> the results.json path."""
    return path / RESULTS if path.is_dir() else path


def read_gate_run(path: Path, warn: Warn) -> Run:
    """A run read in the gate's mode (``readback.read_run``): a damaged value refuses the run, never becomes —."""
    results = results_path(Path(path))
    if not results.is_file():
        raise ResultsError(f"{results}: results file not found")
    run = read_run(results, quiet=True, mode="gate")
    for problem in [*run.problems, *run.notes]:
        warn(problem)
    return Run(results, index_cells(run.rows, str(results)), run.meta)


def reference_for(reference: Path, candidate_dir: Path, candidate_meta: RunMeta | None) -> Path:
    """``gate --reference DIR``: a run directory or results.json is itself; a directory of runs means
    the latest complete run of the candidate's suite started before the candidate."""
    reference = Path(reference)
    if not reference.is_dir() or is_run_dir(reference):
        return reference
    name = candidate_meta.suite_name if candidate_meta else None
    started = parse_time(candidate_meta.started_at if candidate_meta else None)
    if not isinstance(name, str) or started is None:
        raise GateError(f"--reference {reference}: the candidate's meta.json records no suite name and start time, "
                        "so no run of the same suite can be picked; give a run directory")
    own = candidate_dir.resolve()
    earlier = [r for r in discover([reference]) if r.complete and r.suite == name
               and r.path.resolve() != own and r.started is not None and r.started < started]
    if not earlier:
        raise GateError(f"--reference {reference}: no complete run of suite {name!r} started before the candidate "
                        f"({show_time(started)})")
    ref = max(earlier, key=start_order)
    print(f"specbench gate: reference {ref.path}: the latest complete run of suite {name!r} before the candidate "
          f"(started {show_time(ref.started)})", file=sys.stderr)
    return ref.path


def gather_checks(inputs: GateInputs, cand: Run) -> GateSpec:
    """Suite thresholds (``--suite``, else the candidate's meta.json) overridden by the flags."""
    if inputs.suite is not None:
        suite = read_suite(inputs.suite)
        base, name = GateSpec.from_mapping(suite.gate, f"{inputs.suite}: gate"), suite.name
        cand_name = suite_name(cand.meta)
        if name is not None and cand_name is not None and name != cand_name:
            raise GateError(f"--suite {inputs.suite} is suite {name!r} but the candidate ran suite {cand_name!r}")
    else:
        base = GateSpec.from_mapping(suite_gate(cand.meta), f"{cand.path.parent / META}: suite.raw.gate")
    spec = base.merged(cli_spec(list(inputs.floors), list(inputs.ceilings), list(inputs.max_drops)))
    if not spec.checks:
        raise GateError("no thresholds: give --min/--max/--max-drop or a suite with a gate: section")
    return spec


def check_comparable(cand: Run, ref: Run, warn: Warn) -> None:
    if cand.meta is None or ref.meta is None:
        missing = cand.path if cand.meta is None else ref.path
        warn(f"no {META} beside {missing}; cannot verify the runs are comparable")
        return
    for path, meta in ((cand.path, cand.meta), (ref.path, ref.meta)):
        if meta.comparability is None:
            warn(f"{path.parent / META} has no readable comparability; cannot verify the runs are comparable")
    problems = comparability_problems(cand.meta, ref.meta)
    if problems:
        raise GateError("candidate and reference are not comparable: " + "; ".join(problems))


def gate_runs(inputs: GateInputs, warn: Warn) -> GateOutcome:
    """Judge the candidate against every check; ``warn`` gets each repair and doubt as it is found.
    A ``SpecbenchError`` (exit 2) when the input is unusable."""
    cand = read_gate_run(inputs.candidate, warn)
    reference = inputs.reference
    if reference is not None:
        reference = reference_for(reference, cand.path.parent, cand.meta)  # a directory of runs: its latest earlier run
    ref = read_gate_run(reference, warn) if reference is not None else None
    spec = gather_checks(inputs, cand)
    if ref is not None:
        check_comparable(cand, ref, warn)
    ref_cells = ref.cells if ref is not None else None
    return GateOutcome([v for check in spec.checks for v in evaluate(check, cand.cells, ref_cells)], cand, ref)
