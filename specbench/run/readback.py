"""The run directory read back by the stages after the run (report, gate, history, export): its
results.json + meta.json, or a bare results.json, and its requests.jsonl. The run stage owns the
directory: ``rundir.py`` writes it and reads it to resume, this module reads it for everyone after.

Results files are input like any other: edited by hand, cut by a full disk, written by another
tool. What cannot be a table at all (not JSON, not a list of objects, a record without its
``run``/``dataset``, a meta.json that is not an object) is a one-line ``ResultsError`` naming the
file (and record and key). A value of the wrong type where a number, text or flag belongs, and
NaN/±Infinity anywhere, become ``None``, so the cell renders ``—``; each such repair is said on
stderr, one line naming the file, record and key. The renderers only ever see clean records.

A run written by a newer specbench (a record's ``schema_version`` or meta.json's ``specbench_version``
above this one's) is read with what this version knows, since a history is read by whichever version
a CI pins: ``RunResults.newer`` says so and lists the keys ignored, said once on stderr. Only the gate
(``mode="gate"``) refuses a newer meta.json: it would judge with keys whose meaning may have changed.
meta.json and the lines of requests.jsonl are read as every reader reads them (``files_read``).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from .. import __version__
from ..errors import ResultsError
from ..measure.explained import Explained, explain
from ..schemas.meta import RunMeta
from ..schemas.record import VERSION_KEY, unknown_paths
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..schemas.row_read import read_row, refusal
from ..schemas.run_files import META, REQUESTS, REQUESTS_GZ, RESULTS
from ..util.jsonio import read_json
from ..util.numbers import is_number
from .files_read import file_lines, read_meta, scan_lines
from .steplog_read import SAME_LAUNCH

__all__ = ["Newer", "RunResults", "is_number", "read_requests", "read_results", "read_run", "refusal", "warn"]


@dataclass(frozen=True)
class Newer:
    """A run a newer specbench wrote, read with what this version knows: what says it is newer, and the keys
    this version ignored (meta.json's dotted, at any depth: unknown to it or of a type it does not read;
    results.json's by name: kept in the JSON and CSV outputs, not in the tables)."""

    specbench_version: str | None  # the specbench that wrote it, as meta.json says
    schema_versions: tuple[str, ...]  # each record above the version this one reads, with both
    ignored_meta_keys: tuple[str, ...]
    ignored_results_keys: tuple[str, ...]

    def line(self, path: Path | str) -> str:
        """The one line said about the run: which it is, and what was ignored (the first few keys)."""
        why = [f"specbench {self.specbench_version}" if self.specbench_version else "", *self.schema_versions]
        keys = [*(f"{META} {k}" for k in self.ignored_meta_keys), *(f"{RESULTS} {k}" for k in self.ignored_results_keys)]
        shown = ", ".join(keys[:MAX_SHOWN]) + (f" and {len(keys) - MAX_SHOWN} more" if len(keys) > MAX_SHOWN else "")
        return (f"{path}: written by a newer specbench ({'; '.join(w for w in why if w)}; this is {__version__}): "
                f"shown with what this version reads" + (f"; keys it ignored: {shown}" if keys else ""))


def version_tuple(text: str) -> tuple[int, ...]:
    """The release numbers a version starts with (``0.2.0rc1`` → (0, 2, 0)); () when it starts with none."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(x) for x in match.group(1).split(".")[:4]) if match else ()


def is_newer(written: object) -> bool:
    """Whether ``written`` (meta.json's ``specbench_version``) is a later release than this specbench."""
    return isinstance(written, str) and version_tuple(written) > version_tuple(__version__)


def newer_run(meta: RunMeta | None, meta_where: Path, schema_notes: list[str], meta_problems: list[str],
              rows: list[ResultRow]) -> Newer | None:
    """What makes the run newer than this specbench and what it ignored; None for a run this version wrote
    (or an older one)."""
    notes = list(schema_notes)
    row_version = max((r.unknown[VERSION_KEY] for r in rows if type(r.unknown.get(VERSION_KEY)) is int), default=None)
    if row_version is not None and row_version > ResultRow.VERSION:
        notes.append(f"{VERSION_KEY} {row_version} (this version reads {ResultRow.FILE} up to {ResultRow.VERSION})")
    written = meta.specbench_version if meta else None
    if not notes and not is_newer(written):
        return None
    prefix = f"{meta_where}: "
    dropped = [p.removeprefix(prefix).split(": ", 1)[0] for p in meta_problems]
    meta_keys = [*unknown_paths(meta), *dropped] if meta else []
    row_keys = [k for r in rows for k in r.unknown if k != VERSION_KEY and not POSITION_KEY.match(k)]
    return Newer(written if isinstance(written, str) else None, tuple(notes), tuple(dict.fromkeys(meta_keys)),
                 tuple(dict.fromkeys(row_keys)))


#: a results key this version reads without a field for it (``schemas.acceptance``: acceptance_pos_4..)
POSITION_KEY = re.compile(r"^acceptance_pos_\d+$")


@dataclass
class RunResults:
    """A run as read back: its rows, its meta (None: no meta.json beside the results), where, the repairs
    made, whether a newer specbench wrote it, and its analyses (sweep, what-if, replay, tune), made once when
    first asked for."""

    rows: list[ResultRow]
    meta: RunMeta | None = None
    path: Path | None = None
    problems: list[str] = field(default_factory=list)
    newer: Newer | None = None
    notes: list[str] = field(default_factory=list)  # what the run's numbers left out, said (``steplog_note``)

    @cached_property
    def explained(self) -> Explained:
        return explain(self.rows, self.meta)


#: shown per file before the rest are only counted
MAX_SHOWN = 8


def steplog_note(rows: list[ResultRow], where: Path) -> str | None:
    """One line for the rows of the step log the run's numbers left out as damaged or not the launch's, and
    why a pass had none (results.json ``steplog_skipped_rows``, ``steplog_error``); None when there are none."""
    left: Counter[str] = Counter()
    errors, cells = [], 0
    for r in rows:
        skipped = r.steplog_skipped_rows if isinstance(r.steplog_skipped_rows, dict) else {}
        damage = {k: v for k, v in skipped.items() if k not in SAME_LAUNCH and type(v) is int and v > 0}
        left.update(damage)
        if isinstance(r.steplog_error, str):
            errors.append(f"{r.run}: {r.steplog_error}")
        cells += bool(damage or isinstance(r.steplog_error, str))
    if not cells:
        return None
    shown = ", ".join(f"{k} {v}" for k, v in left.most_common(3)) + (" …" if len(left) > 3 else "")
    parts = [f"{sum(left.values())} line(s) left out ({shown})" if left else "", errors[0][:300] if errors else "",
             f"and {len(errors) - 1} more" if len(errors) > 1 else ""]
    return (f"{where}: step log of {cells} cell(s): " + "; ".join(p for p in parts if p)
            + f" ({RESULTS} steplog_skipped_rows, steplog_error)")


def clean_rows(data: Any, where: Path | str) -> tuple[list[ResultRow], list[str]]:
    """The rows of a results file, and the repairs made (one line each)."""
    if not isinstance(data, list):
        raise ResultsError(f"{where}: expected a JSON list of result records, got {type(data).__name__}")
    problems: list[str] = []
    return [read_row(r, where, i, problems) for i, r in enumerate(data)], problems


def warn(problems: list[str], prefix: str = "specbench report") -> None:
    """The repairs of one file on stderr: the first few in full, then how many more."""
    for line in problems[:MAX_SHOWN]:
        print(f"{prefix}: warning: {line}", file=sys.stderr)
    if len(problems) > MAX_SHOWN:
        print(f"{prefix}: warning: ... and {len(problems) - MAX_SHOWN} more values shown as — "
              f"({problems[0].split(':')[0]})", file=sys.stderr)


def read_meta_only(path: Path) -> tuple[RunMeta | None, list[str], Newer | None]:
    """meta.json of a run without results: the meta, its repairs (none when a newer specbench wrote it:
    then they are keys it ignored) and whether one did."""
    read = read_meta(path, "report")
    newer = newer_run(read.meta, path, read.newer, read.problems, [])
    return read.meta, [] if newer else read.problems, newer


def read_run(path: str | Path, *, quiet: bool = False, mode: Literal["report", "gate"] = "report") -> RunResults:
    """One run's clean rows and meta; repairs, and a newer specbench's run (once), are printed to
    stderr unless ``quiet``.

    ``gate``: a row value that needed a repair is a ``ResultsError`` instead, since a verdict on a value
    shown as — would be a guess, and so is a meta.json a newer specbench wrote; meta.json's repairs stay in
    ``problems`` (``files_read.read_meta``). Otherwise a newer run's meta.json repairs are keys it ignored
    (``RunResults.newer``), not damage.
    """
    path = Path(path)
    if path.is_dir():
        results = path / RESULTS
        if not results.exists():
            raise ResultsError(f"{path}: no {RESULTS} in this directory")
    else:
        results = path
    rows, problems = clean_rows(read_json(results), results)
    if mode == "gate" and problems:
        raise ResultsError(refusal(problems))
    meta_path = results.parent / META
    read = read_meta(meta_path, mode)
    meta, meta_problems = read.meta, read.problems
    newer = newer_run(meta, meta_path, read.newer, meta_problems, rows) if mode == "report" else None
    if newer is None:
        problems += meta_problems
    notes = [n for n in (steplog_note(rows, results.parent),) if n is not None]
    if not quiet:
        warn(problems)
        if newer is not None:
            warn([newer.line(results.parent)])
        warn(notes)
    return RunResults(rows=rows, meta=meta, path=results, problems=problems, newer=newer, notes=notes)


def read_results(paths: list[str | Path]) -> RunResults:
    """Concatenate the rows of several runs (in the order given)."""
    runs = [read_run(p) for p in paths]
    if len(runs) == 1:
        return runs[0]
    merged = [r for run in runs for r in run.rows]
    return RunResults(rows=merged, meta=RunMeta(merged_from=[str(r.path) for r in runs]),
                      problems=[p for run in runs for p in run.problems], notes=[n for run in runs for n in run.notes])


# ----------------------------------------------------------------------------- requests.jsonl

def read_requests(run_dir: Path, *, quiet: bool = False) -> list[RequestRecord] | None:
    """``requests.jsonl`` of a run directory, or the ``requests.jsonl.gz`` of one archived compressed
    (None when there is neither); both there are read as one, a record in both counted once. A line cut by a
    crash ends the file (as the run's own reader does); a line that is JSON but not a request is skipped and
    said; a damaged ``.gz`` keeps the records before the damage, said with how many; a record recorded twice
    (the same line again) counts once, said. Lines end at ``\n`` only, as JSONL's do."""
    paths = [p for p in (run_dir / REQUESTS, run_dir / REQUESTS_GZ) if p.exists()]
    if not paths:
        return None
    out: list[RequestRecord] = []
    problems: list[str] = []
    seen: set[bytes] = set()
    twice, per_file = 0, []
    for path in paths:
        try:
            lines, damage = file_lines(path)
        except OSError as err:
            raise ResultsError(f"{path}: cannot read: {err.strerror or err}") from None
        before, mine = len(out), set()
        for line in scan_lines(lines, RequestRecord, replace=True):
            if line.raw in seen:
                twice += line.raw in mine
                continue
            if line.torn:
                after = sum(1 for x in lines[line.number:] if x.strip())
                problems.append(f"{path}:{line.number}: not valid JSON; this line and the {after} after it are not read")
                break
            seen.add(line.raw)
            mine.add(line.raw)
            if line.record is None:
                problems.append(f"{path}:{line.number}: {line.why}; request skipped")
            else:
                out.append(line.record)
        per_file.append((path, len(out) - before, len(mine)))
        if damage is not None and damage.endswith(("data check", "length check")):  # the gzip trailer's CRC or size
            problems.append(f"{path}: damaged ({damage}: its check sum does not match what it holds): "
                            f"{len(out) - before} request records read, any of which may hold a damaged value")
        elif damage is not None:
            problems.append(f"{path}: damaged ({damage}): {len(out) - before} request records read before the damage, "
                            "the rest not read")
    if twice:
        problems.append(f"{paths[0].parent}: {twice} request record(s) recorded twice (the same line again): each counted once")
    if len(per_file) == 2:
        (a, n_a, _), (b, n_b, _) = per_file
        problems.append(f"{run_dir}: both {a.name} ({n_a} records) and {b.name} ({n_b} more) are here: read as one, "
                        "a record in both counted once")
    if not quiet:
        warn(problems)
    return out
