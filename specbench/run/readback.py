"""The run directory read back by the stages after the run (report, gate, history, export): its
results.json + meta.json, or a bare results.json, and its requests.jsonl. The run stage owns the
directory: ``rundir.py`` writes it and reads it to resume, this module reads it for everyone after.

Results files are input like any other: edited by hand, cut by a full disk, written by another
tool. What cannot be a table at all (not JSON, not a list of objects, a record without its
``run``/``dataset``, a meta.json that is not an object) is a one-line ``ResultsError`` naming the
file (and record and key). A value of the wrong type where a number, text or flag belongs, and
NaN/±Infinity anywhere, become ``None``, so the cell renders ``—``; each such repair is said on
stderr, one line naming the file, record and key. The renderers only ever see clean records.
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..measure.explained import Explained, explain
from ..schemas.meta import RunMeta
from ..schemas.record import RowError
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..schemas.row_read import read_row, refusal
from ..schemas.run_files import META, REQUESTS, REQUESTS_GZ, RESULTS
from ..util.jsonio import read_json
from ..util.numbers import is_number

__all__ = ["RunResults", "is_number", "load_results", "load_run", "read_meta", "read_requests", "refusal", "warn"]


@dataclass
class RunResults:
    """A run as read back: its rows, its meta (None: no meta.json beside the results), where, the repairs
    made, and its analyses (sweep, what-if, replay, tune), made once when first asked for."""

    rows: list[ResultRow]
    meta: RunMeta | None = None
    path: Path | None = None
    problems: list[str] = field(default_factory=list)

    @cached_property
    def explained(self) -> Explained:
        return explain(self.rows, self.meta)


#: shown per file before the rest are only counted
MAX_SHOWN = 8


def clean_records(data: Any, where: Path | str) -> tuple[list[ResultRow], list[str]]:
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


def read_meta(path: Path) -> tuple[RunMeta, list[str]]:
    """A meta.json as the report reads it, and the repairs made: not an object is a ResultsError; a
    known key of the wrong type is dropped (the report shows what it shows without it) and said."""
    problems: list[str] = []
    return RunMeta.load(path, problems), problems


def load_run(path: str | Path, *, quiet: bool = False, strict: bool = False) -> RunResults:
    """One run's clean records and meta; repairs are printed to stderr unless ``quiet``.

    ``strict`` (the gate): a record value that needed a repair is a ``ResultsError`` instead, since
    a verdict on a value shown as — would be a guess; meta.json's repairs stay in ``problems``.
    """
    path = Path(path)
    if path.is_dir():
        results = path / RESULTS
        if not results.exists():
            raise ResultsError(f"{path}: no {RESULTS} in this directory")
    else:
        results = path
    rows, problems = clean_records(read_json(results), results)
    if strict and problems:
        raise ResultsError(refusal(problems))
    meta_path = results.parent / META
    meta = None
    if meta_path.exists():
        meta, meta_problems = read_meta(meta_path)
        problems += meta_problems
    if not quiet:
        warn(problems)
    return RunResults(rows=rows, meta=meta, path=results, problems=problems)


def load_results(paths: list[str | Path]) -> RunResults:
    """Concatenate the records of several runs (in the order given)."""
    runs = [load_run(p) for p in paths]
    if len(runs) == 1:
        return runs[0]
    merged = [r for run in runs for r in run.rows]
    return RunResults(rows=merged, meta=RunMeta(merged_from=[str(r.path) for r in runs]),
                      problems=[p for run in runs for p in run.problems])


# ----------------------------------------------------------------------------- requests.jsonl

def read_requests(run_dir: Path, *, quiet: bool = False) -> list[RequestRecord] | None:
    """``requests.jsonl`` of a run directory, or the ``requests.jsonl.gz`` of one archived compressed
    (None when there is neither). A line cut by a crash ends the file (as the run's own reader does);
    a line that is JSON but not a request is skipped and said. Lines end at ``\n`` only, as JSONL's do."""
    path = run_dir / REQUESTS
    if not path.exists() and (run_dir / REQUESTS_GZ).exists():
        path = run_dir / REQUESTS_GZ
    if not path.exists():
        return None
    out: list[RequestRecord] = []
    problems: list[str] = []
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as err:
        raise ResultsError(f"{path}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    lines = raw.decode("utf-8", errors="replace").split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            problems.append(f"{path}:{n}: not valid JSON; this line and the {len([x for x in lines[n:] if x.strip()])} after it are not read")
            break
        try:
            out.append(RequestRecord.from_line(data))
        except RowError as err:
            problems.append(f"{path}:{n}: {err}; request skipped")
    if not quiet:
        warn(problems)
    return out
