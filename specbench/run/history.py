"""A directory of runs as a history: find the runs under it, read and classify each, group them by suite, pick
what to show (the report formats it: ``report/history_report.py``, ``history_compare``, ``history_html``).

``specbench run`` writes each run to ``results/<suite>-<timestamp>/``; ``specbench report results/``
then means "the latest complete run of each suite", ``--all`` every complete run, and ``--compare``
the latest against the one before it. A run is *complete* when its meta.json says it finished,
no config or cell failed or was cut, and every cell of the suite (config × data set × load point,
every repeat) is there. Interrupted, failed, unfinished and unreadable runs are listed one line
each with the reason, and never shown as if they were results. A run a newer specbench wrote is read
with what this version knows and shown like any other, said once on stderr and beside its table
(``run.readback.Newer``); only what cannot be read at all (a cut file, a loop) is unreadable.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ResultsError, SpecbenchError
from ..schemas.cell import Cell, LoadPoint, load_of
from ..schemas.meta import Comparability, GitState, RunMeta, SuiteFile
from ..schemas.row import ResultRow
from ..schemas.run_files import META, RESULTS
from .readback import Newer, read_meta_only, read_run, refusal, warn

COMPLETE = "complete"


@dataclass(frozen=True)
class RunProvenance:
    """Which run this is: suite, times, engine versions, suite-file hash and git state; ``asdict`` of it is
    the run's object in ``report DIR --format json`` and in a comparison's JSON."""

    path: str
    suite: str | None
    status: str
    reason: str | None
    started_at: str | None
    finished_at: str | None
    engine: tuple[str, ...]
    specbench_version: str | None
    suite_sha256: str | None
    git_commit: str | None
    git_dirty: bool | None
    newer: Newer | None  # written by a newer specbench: what says so, the keys ignored (None: not)


@dataclass(eq=False)
class RunEntry:
    """One run directory found under a root, read and classified."""

    path: Path
    meta: RunMeta | None  # None: no meta.json
    rows: list[ResultRow] | None
    status: str  # complete | interrupted | failed | unfinished | unreadable
    reason: str = ""
    started: dt.datetime | None = None
    newer: Newer | None = None

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE

    @property
    def suite(self) -> str | None:
        return self.meta.suite_name if self.meta else None

    @property
    def group(self) -> str:
        """Runs are grouped by suite name; a run without one (no meta.json) is a group of its own."""
        return self.suite if self.suite is not None else f"(no suite recorded) {self.path}"

    def provenance(self) -> RunProvenance:
        meta = self.meta or RunMeta()
        source = meta.suite_file or SuiteFile()
        git = source.git or GitState()
        return RunProvenance(str(self.path), self.suite, self.status, self.reason or None, meta.started_at,
                          meta.finished_at, tuple(engines(self.rows or [], meta)), meta.specbench_version,
                          source.sha256, git.commit, git.dirty, self.newer)


def engines(rows: Sequence[ResultRow], meta: RunMeta) -> list[str]:
    """``engine version`` of every server of the run, from its rows, else from meta.json's servers."""
    found = [f"{r.engine} {r.server_version or ''}".strip() for r in rows
             if isinstance(r.engine, str)]
    if not found:
        found = [f"{s.engine} {s.version or ''}".strip() for s in (meta.servers or {}).values() if s.engine]
    return list(dict.fromkeys(found))


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO time as written by the runner; a time without a zone is taken as UTC."""
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def show_time(t: dt.datetime | None) -> str:
    return "start time not recorded" if t is None else t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def is_run_dir(path: Path) -> bool:
    return (path / RESULTS).is_file() or (path / META).is_file()


def find_run_dirs(root: Path) -> list[Path]:
    """Run directories at or under ``root`` (a run's own subfolders, and hidden folders, are not searched)."""
    if is_run_dir(root):
        return [root]
    found = []
    for here, dirs, files in os.walk(root):
        if RESULTS in files or META in files:
            found.append(Path(here))
            dirs[:] = []
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return found


def read_entry(path: Path) -> RunEntry:
    """Read one run directory; damage makes it an ``unreadable`` entry, not an error for the others (a
    newer specbench's run is not damage: its keys this version cannot read are ignored and said)."""
    try:
        rows: list[ResultRow] | None = None
        if (path / RESULTS).is_file():
            run = read_run(path, quiet=True)
            if run.problems:  # a repaired value would make a damaged run look complete
                raise ResultsError(refusal(run.problems))
            meta, rows, newer = run.meta, run.rows, run.newer
            for i, r in enumerate(rows):
                if not (isinstance(r.run, str) and isinstance(r.dataset, str)):
                    raise ResultsError(f"{path / RESULTS}: record {i} has no string 'run' and 'dataset'")
        else:
            meta, problems, newer = read_meta_only(path / META)
            if problems:
                raise ResultsError(refusal(problems))
        status, reason = classify(meta, rows)
    except SpecbenchError as err:
        return RunEntry(path, None, None, "unreadable", str(err))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        return RunEntry(path, None, None, "unreadable", f"{path}: {type(err).__name__}: {err}".splitlines()[0])
    return RunEntry(path, meta, rows, status, reason, parse_time(meta.started_at if meta else None), newer)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def expected_cells(meta: RunMeta) -> set[Cell] | None:
    """Every cell the suite asked for (uncapped), from the suite copy in meta.json; None when it cannot be told."""
    comp = meta.comparability or Comparability()
    configs, datasets = comp.configs, comp.datasets
    load = meta.raw.load or {}
    if not configs or not datasets:
        return None
    arrival = load.get("arrival")
    ramp = arrival if isinstance(arrival, dict) else {"kind": arrival}
    try:
        if ramp.get("kind") == "trace":  # its cell's rate is the trace file's mean rate: not in the suite copy
            return None
        if ramp.get("kind") == "ramp":  # its cell's rate is the ramp's end rate (suite/arrival.py)
            end = ramp.get("end")
            if not isinstance(end, (int, float)):
                return None
            points = [LoadPoint(0, float(end))]
        elif load.get("request_rate") is not None:  # one cap for every rate of a run: not part of the comparison
            points = [LoadPoint(0, float(v)) for v in _as_list(load["request_rate"])]
        else:
            points = [LoadPoint(_count(v)) for v in _as_list(load.get("concurrency", 1))]
    except (TypeError, ValueError):
        return None
    return {Cell.at(c, d, p) for c in configs for d in datasets for p in points}


def _count(value: Any) -> int:
    number = float(value)
    if not number.is_integer():
        raise ValueError(f"{value!r} is not a count")
    return int(number)


def classify(meta: RunMeta | None, rows: list[ResultRow] | None) -> tuple[str, str]:
    """(status, one-line reason) of a run; the reason is empty for a complete run (None: no meta.json)."""
    if rows is None:
        if not (meta and meta.finished_at):
            return "unfinished", "no cell measured and no finished_at in meta.json: still running, or killed"
        return "failed", "no cell measured (no results.json)"
    if meta and not meta.finished_at:
        return "unfinished", f"{len(rows)} cell(s) written but no finished_at in meta.json: still running, or killed"
    meta = meta or RunMeta()
    failed_configs = meta.failed_configs or {}
    failed = [str(Cell.of_row(r)) for r in rows if r.status == "failed"]
    if failed_configs or failed:
        parts = [f"config {name} failed: {str(err).splitlines()[0] if str(err) else '?'}"
                 for name, err in failed_configs.items()]
        parts += [f"cell {c} failed" for c in failed[:3]] + ([f"+{len(failed) - 3} more"] if len(failed) > 3 else [])
        return "failed", "; ".join(parts)
    cut = [str(Cell.of_row(r)) for r in rows if r.status not in (None, "ok")]
    expected = expected_cells(meta)
    present = {Cell.at(r.run, r.dataset, load_of(r).uncapped) for r in rows}
    missing = len(expected - present) if expected is not None else 0
    repeats = (meta.raw.load or {}).get("repeats", 1)
    short = [str(Cell.of_row(r)) for r in rows if isinstance(repeats, int) and isinstance(r.repeats, int)
             and r.repeats < repeats]
    if cut or missing or short:
        total = len(expected) if expected is not None else len(rows)
        parts = [f"{len(present & expected) if expected is not None else len(rows)} of {total} cells measured"]
        parts += [f"cell {c} {next(r.status for r in rows if str(Cell.of_row(r)) == c)}" for c in cut[:3]]
        parts += [f"cell {c} has fewer than {repeats} repeats" for c in short[:3]]
        return "interrupted", "; ".join(parts)
    return COMPLETE, ""


@dataclass
class SuiteHistory:
    """The runs of one suite under the roots, oldest first."""

    name: str
    runs: list[RunEntry]
    shown: list[RunEntry] = field(default_factory=list)

    @property
    def complete(self) -> list[RunEntry]:
        return [r for r in self.runs if r.complete]

    @property
    def latest_pair(self) -> tuple[RunEntry, RunEntry] | None:
        """(previous, latest) complete runs, for ``--compare``."""
        done = self.complete
        return (done[-2], done[-1]) if len(done) >= 2 else None


def start_order(run: RunEntry) -> tuple:
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    return (run.started or epoch, str(run.path))


def parse_since(text: str) -> dt.datetime:
    """``--since``: an ISO date or date-time; without a zone it is local time."""
    try:
        t = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ResultsError(f"--since {text!r}: expected a date like 2026-12-01 or 2026-12-01T14:00") from None
    return t if t.tzinfo else t.astimezone()


def discover(roots: Iterable[Path]) -> list[RunEntry]:
    roots = [Path(r) for r in roots]
    for root in roots:
        if not root.exists():
            raise ResultsError(f"{root}: not found")
    found: dict[Path, Path] = {}
    for root in roots:
        for d in find_run_dirs(root):
            found.setdefault(d.resolve(), d)
    return [read_entry(d) for d in found.values()]


def history(roots: Sequence[Path], *, suite: str | None = None, since: dt.datetime | None = None,
            show_all: bool = False) -> list[SuiteHistory]:
    """Runs under ``roots`` grouped by suite (by name), filtered, with the ones to show picked."""
    runs = discover(roots)
    where = ", ".join(str(r) for r in roots)
    if not runs:
        raise ResultsError(f"{where}: no run directories under it (none holds a results.json or meta.json)")
    if suite is not None:
        known = sorted({r.suite for r in runs if r.suite})
        runs = [r for r in runs if r.suite == suite]
        if not runs:
            raise ResultsError(f"{where}: no run of suite {suite!r} (suites found: {', '.join(known) or 'none'})")
    if since is not None:
        runs = [r for r in runs if r.started is not None and r.started >= since]
        if not runs:
            raise ResultsError(f"{where}: no run started since {show_time(since)}")
    groups: dict[str, list[RunEntry]] = {}
    for r in sorted(runs, key=start_order):
        groups.setdefault(r.group, []).append(r)
        if r.newer is not None:  # said once per run, whatever the format
            warn([r.newer.line(r.path)])
    out = []
    for name in sorted(groups):
        h = SuiteHistory(name, groups[name])
        done = h.complete
        h.shown = done if show_all else done[-1:]
        out.append(h)
    return out


def read_named_run(path: Path) -> RunEntry:
    """A run named on the command line (``specbench compare``): read as the report reads it, classified."""
    run = read_run(path)
    status, reason = classify(run.meta, run.rows)
    return RunEntry(run.path.parent if run.path else path, run.meta, run.rows, status, reason,
                    parse_time(run.meta.started_at if run.meta else None), run.newer)
