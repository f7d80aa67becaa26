"""A launch folder's step-log files read and checked (docs/steplog.md): what provably belongs to the launch is
kept, the rest is left out and counted by reason, never a silently different number.

A folder is a file like any other: copied, cut by a full disk, mixed with another launch's files. Per process
(the ``<pid>`` of its files' names), a header of another ``schema`` disowns the process's rows, and a process
without a header is read but said.
Rows whose wall time lies outside the run's time span (meta.json) are not the run's. The steps are one engine
core's: of several ``sched`` sequences (two files, or one file whose step counter goes back) the one the launch's
timed passes ran on is kept. A ``gpu`` or ``tokens`` row is joined to a step by its number, so its wall time must be
that step's: a file whose rows mostly are not is another launch's. A file cut in the middle of a line is said
with the wall time of its last whole row, so a pass that ended after it is not counted as if whole.

Every line goes through its record's strict reader, and only its values are kept, in columns
(``measure.step_columns``: a few hundred bytes a step, where records cost ~2.5 KB); the checks and the join work on
those columns. The run's results (``run.steplog``) and the export (``report.export_steps``) both read a launch here."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..measure.stalls import PassStalls
from ..measure.step_columns import Array, RowBuilder, RowColumns, first_of_each, join
from ..measure.steplog import StepColumns, StepLog
from ..schemas.phase import PhaseInfo
from ..schemas.record import Record
from ..schemas.run_files import LOGS
from ..schemas.steplog import SCHEMA, EventRow, GpuRow, RowError, SchedRow, StepHeader, TokenRow
from .recorded import run_span
from .rundir import read_phases
from .servers import STEPLOG_DIR

R = TypeVar("R", bound=Record)
MAX_LINE = 1 << 16  # a step row is ~400 bytes; a longer line is not one
STEP_WALL_S = 10.0  # a gpu row starts ~0.1 ms after its step's scheduler row, a token row a few ms: never this far
#: rows another rank of the same launch also wrote: left out of the join, not damage
SAME_LAUNCH = ("gpu: duplicate step", "tokens: duplicate guess")


@dataclass(frozen=True)
class LaunchScope:
    """What tells a launch's own rows from others': the run's time span as meta.json records it (None: open),
    and the wall-time windows of the launch's complete timed passes (phases.jsonl)."""

    low: float | None = None
    high: float | None = None
    windows: tuple[tuple[float, float], ...] = ()

    def in_span(self, walls: Array) -> Array:
        """Which of these wall times lie inside the run's time span."""
        return (walls >= (-np.inf if self.low is None else self.low)) & (walls <= (np.inf if self.high is None else self.high))

    def in_windows(self, walls: Array) -> Array:
        """Which of these wall times lie inside a timed pass of the launch."""
        inside = np.zeros(len(walls), dtype=bool)
        for a, b in self.windows:
            inside |= (walls >= a) & (walls <= b)
        return inside

    @classmethod
    def of_run(cls, run_dir: Path, phases: Sequence[PhaseInfo], folder: Path) -> LaunchScope:
        """The scope of ``folder`` in ``run_dir`` with these phases."""
        low, high = run_span(run_dir)
        here = folder.resolve()
        windows = tuple((p.scraped_before, p.scraped_after) for p in phases
                        if p.complete and p.steplog and p.scraped_before is not None and p.scraped_after is not None
                        and (run_dir / p.steplog).resolve() == here)
        return cls(low, high, windows)

    @classmethod
    def of_folder(cls, folder: Path, *, passes: bool = True) -> LaunchScope:
        """A folder's scope from the run directory it lies in (``<run>/logs/steplog/<launch>``; without its
        passes' windows unless ``passes``); none elsewhere."""
        if folder.parent.name != STEPLOG_DIR or folder.parent.parent.name != LOGS:
            return cls()
        run_dir = folder.parent.parent.parent
        # a pass recorded twice is said by whoever reads phases.jsonl for itself, not for each launch folder
        return cls.of_run(run_dir, read_phases(run_dir, []), folder) if passes else cls(*run_span(run_dir))


@dataclass
class KindFile:
    """One ``<kind>-<pid>.jsonl``: its process, its rows (their indices in the kind's columns, in file order),
    and, when it ends in a torn line (cut), the wall time of its last whole row (0.0: none was whole)."""

    name: str
    pid: str
    rows: Array
    cut_at: float | None = None
    dropped: bool = False  # left out whole: not the launch's


def clock(wall: float) -> str:
    """A row's wall time as a reader finds it in a log (0.0: before any row)."""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%H:%M:%S UTC") if wall else "its start"


def reason(err: RowError) -> str:
    return str(err).split(":")[0] if ":" in str(err) else str(err)[:60]


def read_rows(path: Path, kind: str, rows: RowBuilder[R], skipped: Counter[str]) -> bool:
    """Each line of one file that its record's strict reader takes, added to ``rows``; whether the file ends in a
    torn line. A bad line is counted (the lines' faults, then the rows' reasons), never raised."""
    torn, lines, refused = False, Counter[str](), Counter[str]()
    try:
        with path.open("rb") as f:
            for raw in f:
                torn = not raw.endswith(b"\n")
                if torn or len(raw) > MAX_LINE:
                    lines[f"{kind}: torn or overlong line"] += 1
                    continue
                try:
                    obj = json.loads(raw)
                except (ValueError, RecursionError):
                    lines[f"{kind}: not JSON"] += 1
                    continue
                try:
                    too_big = rows.add(rows.cls.from_line(obj))
                except RowError as err:
                    refused[f"{kind}: {reason(err)}"] += 1
                    continue
                if too_big is not None:
                    refused[f"{kind}: {too_big}"] += 1
    except OSError as err:
        lines[f"{kind}: unreadable file ({err.strerror or type(err).__name__})"] += 1
    skipped.update(lines)
    skipped.update(refused)
    return torn


def kind_files(folder: Path, kind: str, cls: type[R], skipped: Counter[str]) -> tuple[RowColumns[R], list[KindFile]]:
    """Every ``<kind>-<pid>.jsonl`` of the folder read into one set of columns, and each file's rows in it."""
    rows, files = RowBuilder(cls), []
    for path in sorted(folder.glob(f"{kind}-*.jsonl")):
        start = rows.n
        torn = read_rows(path, kind, rows, skipped)
        files.append(KindFile(path.name, path.stem.split("-", 1)[1], np.arange(start, rows.n), 0.0 if torn else None))
    columns = rows.done()
    for f in files:
        if f.cut_at is not None and len(f.rows):
            f.cut_at = float(columns["wall"][f.rows].max())
    return columns, files


def read_headers(folder: Path, skipped: Counter[str]) -> tuple[dict[str, StepHeader], dict[str, str]]:
    """Each process's header (by the pid its file is named with), and the processes a header disowns (why)."""
    ours, disowned = {}, {}
    for path in sorted(folder.glob("header-*.json")):
        pid = path.stem.split("-", 1)[1]
        try:
            obj = json.loads(path.read_bytes()[:MAX_LINE])
        except (OSError, ValueError, RecursionError):
            skipped["header: unreadable"] += 1
            continue
        if isinstance(obj, dict) and "schema" in obj and obj["schema"] != SCHEMA:
            disowned[pid] = f"its process's header is not {SCHEMA} ({str(obj['schema'])[:40]!r})"
        try:
            header = StepHeader.of_file(obj)
        except RowError as err:
            skipped[f"header: {reason(err)}"] += 1
            continue
        if str(header.pid) != pid:
            skipped["header: pid is not its file name's"] += 1
            continue
        ours[pid] = header
    return ours, disowned


@dataclass
class LaunchRead:
    """What a launch folder holds that is the launch's: its steps (one engine core's, joined with the runner's
    rows), token rows and events; every line left out by reason; what is said though nothing was left out; and
    the files cut in the middle of a line (kind → (file, wall time of its last whole row))."""

    log: StepLog
    tokens: RowColumns[TokenRow]
    events: list[EventRow]
    has_tokens: bool
    skipped: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    cut: dict[str, tuple[str, float]] = field(default_factory=dict)
    #: each timed pass's stalls once made (``run.steplog``), by the pass's window and numbers
    pass_stalls: dict[tuple[Any, ...], PassStalls] = field(default_factory=dict, repr=False, compare=False)

    @property
    def steps(self) -> StepColumns:
        return self.log.steps

    def damage(self) -> dict[str, int]:
        """The lines left out as damaged or not this launch's (another rank's copy of a row is neither)."""
        return {k: v for k, v in self.skipped.items() if k not in SAME_LAUNCH}

    def line(self, folder: Path | str) -> str | None:
        """One line saying what was left out of the launch's log and what else is wrong; None when nothing is."""
        damage = self.damage()
        if not damage and not self.notes:
            return None
        shown = ", ".join(f"{k} {v}" for k, v in list(damage.items())[:4]) + (" …" if len(damage) > 4 else "")
        left = f"{sum(damage.values())} line(s) left out ({shown})" if damage else ""
        cut = [f"{name} is cut in the middle of a line (its rows after {clock(wall)} are gone)"
               for name, wall in self.cut.values()]
        return f"{folder}: step log: " + "; ".join(x for x in (left, *cut, *self.notes) if x)


class FolderCheck:
    """The checks of one folder's files against its headers and scope (``check_folder``), on each kind's columns."""

    def __init__(self, folder: Path, scope: LaunchScope) -> None:
        self.folder, self.scope = folder, scope
        self.skipped: Counter[str] = Counter()
        self.notes: list[str] = []
        self.headers, self.disowned = read_headers(folder, self.skipped)
        self.elsewhere: set[str] = set()  # processes whose every step is another launch's

    def drop(self, kind: str, f: KindFile, why: str) -> None:
        self.skipped[f"{kind}: {why}"] += len(f.rows)
        f.rows, f.cut_at, f.dropped = f.rows[:0], None, True

    def own(self, kind: str, columns: RowColumns[Any], files: list[KindFile]) -> list[KindFile]:
        """The files of ``kind`` the process's header owns, their rows inside the run's span."""
        kept = []
        for f in files:
            if f.pid in self.disowned:
                self.drop(kind, f, self.disowned[f.pid])
            elif f.pid in self.elsewhere:
                self.drop(kind, f, f"its process's steps are another launch's ({f.name})")
            else:
                inside = f.rows[self.scope.in_span(columns["wall"][f.rows])]
                if len(inside) < len(f.rows):
                    self.skipped[f"{kind}: wall time outside the run's (meta.json)"] += len(f.rows) - len(inside)
                f.rows, f.dropped = inside, bool(len(f.rows)) and not len(inside)
                kept.append(f)
        return [f for f in kept if not f.dropped]

    def engine_core(self, sched: RowColumns[SchedRow], files: list[KindFile]) -> list[KindFile]:
        """One engine core's steps: of several sequences (files, or a file whose step counter goes back) the one
        with the most steps inside the launch's timed passes (then with a header, then the longest, then the first)."""
        seqs = []
        for f in files:
            steps = sched["step"][f.rows]
            bounds = [0, *(np.flatnonzero(steps[1:] <= steps[:-1]) + 1).tolist(), len(steps)]
            seqs += [replace(f, rows=f.rows[a:b], cut_at=f.cut_at if b == len(steps) else None)
                     for a, b in zip(bounds, bounds[1:])]
        seqs = [s for s in seqs if len(s.rows)]
        if len(seqs) <= 1:
            return seqs or files[:1]
        score = [(int(self.scope.in_windows(sched["wall"][s.rows]).sum()), s.pid in self.headers, len(s.rows), -i)
                 for i, s in enumerate(seqs)]
        best = max(range(len(seqs)), key=lambda i: score[i])
        kept_step, kept_wall = sched["step"][seqs[best].rows], sched["wall"][seqs[best].rows]  # rising steps
        for i, s in enumerate(seqs):
            if i == best:
                continue
            at = np.minimum(np.searchsorted(kept_step, sched["step"][s.rows]), len(kept_step) - 1)
            if ((kept_step[at] == sched["step"][s.rows]) & (kept_wall[at] == sched["wall"][s.rows])).all():
                why = f"the same steps again ({s.name})"
            elif not self.scope.windows:
                why = f"a second step sequence ({s.name}), not joined: the log follows {seqs[best].name}"
            elif score[i][0]:
                why = f"a second engine core's steps ({s.name}), not joined: the log follows {seqs[best].name}"
            else:
                why = f"another launch's steps ({s.name}: none in this launch's timed passes)"
                self.elsewhere.add(s.pid)
            self.drop("sched", s, why)
        self.elsewhere.discard(seqs[best].pid)
        return [seqs[best]]

    def at_their_steps(self, kind: str, columns: RowColumns[Any], files: list[KindFile], step: Array, wall: Array) -> Array:
        """Rows joined by step number (``step``: the kept steps' numbers, rising; ``wall``: their wall times) whose
        wall time is their step's; a file whose rows mostly are not is another launch's."""
        out = []
        for f in files:
            number = columns["step"][f.rows]
            at = np.minimum(np.searchsorted(step, number), max(len(step) - 1, 0))
            known = step[at] == number if len(step) else np.zeros(len(number), dtype=bool)
            off = known & (np.abs(columns["wall"][f.rows] - wall[at] if len(step) else 0.0) > STEP_WALL_S)
            n_off = int(off.sum())
            if n_off and n_off * 2 > int(known.sum()):
                self.drop(kind, f, f"another launch's rows ({f.name}: their times are not this launch's steps')")
                continue
            if n_off:
                self.skipped[f"{kind}: wall time is not its step's"] += n_off
                f.rows = f.rows[~off]
            out.append(f.rows)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def one_guess_each(self, tokens: RowColumns[TokenRow], rows: Array) -> Array:
        """Of the token rows of one guess (step, request, draft position) the first; the others are another rank's."""
        order, first = first_of_each([tokens["draft_pos"][rows], tokens["req_id"][rows], tokens["step"][rows]])
        if (dup := int((~first).sum())):
            self.skipped["tokens: duplicate guess"] += dup
        keep = np.ones(len(rows), dtype=bool)
        keep[order[~first]] = False
        return rows[keep]


def check_folder(folder: Path, scope: LaunchScope) -> LaunchRead:
    """A launch folder's files, checked (module docstring)."""
    c = FolderCheck(folder, scope)
    sched_cols, sched_files = kind_files(folder, "sched", SchedRow, c.skipped)
    sched = c.engine_core(sched_cols, c.own("sched", sched_cols, sched_files))
    gpu_cols, gpu_files = kind_files(folder, "gpu", GpuRow, c.skipped)
    gpu_files = c.own("gpu", gpu_cols, gpu_files)
    token_cols, all_tokens = kind_files(folder, "tokens", TokenRow, c.skipped)
    token_files = c.own("tokens", token_cols, all_tokens)
    event_cols, event_files = kind_files(folder, "events", EventRow, c.skipped)
    event_files = c.own("events", event_cols, event_files)
    core = np.concatenate([f.rows for f in sched]) if sched else np.zeros(0, dtype=np.int64)  # one sequence: rising steps
    step, wall = sched_cols["step"][core], sched_cols["wall"][core]
    gpu = c.at_their_steps("gpu", gpu_cols, gpu_files, step, wall)
    tokens = token_cols.take(c.one_guess_each(token_cols, c.at_their_steps("tokens", token_cols, token_files, step, wall)))
    cut = {}
    for kind, files in (("sched", sched), ("gpu", gpu_files), ("tokens", token_files), ("events", event_files)):
        torn = [(f.cut_at, f.name) for f in files if f.cut_at is not None]
        if torn:
            cut[kind] = min(torn)[::-1]
    steps = join(sched_cols, gpu_cols, c.skipped, core, gpu)
    headless: dict[str, list[str]] = {}
    for f in [*sched, *gpu_files, *token_files, *event_files]:
        if f.pid not in c.headers and len(f.rows):
            headless.setdefault(f.pid, []).append(f.name.split("-")[0])
    c.notes += [f"no header-{pid}.json: its {', '.join(dict.fromkeys(kinds))} rows read without it"
                for pid, kinds in headless.items()]
    return LaunchRead(StepLog(steps, tuple(c.headers.values()), dict(c.skipped)), tokens, events_of(event_cols, event_files),
                      any(not f.dropped for f in all_tokens), dict(c.skipped), tuple(c.notes), cut)


def events_of(columns: RowColumns[EventRow], files: list[KindFile]) -> list[EventRow]:
    """The files' event rows as records (a launch has few), in wall-time order."""
    rows = np.concatenate([f.rows for f in files]) if files else np.zeros(0, dtype=np.int64)
    return sorted(columns.take(rows).records(), key=lambda e: e.wall)


def read_events_only(folder: Path, scope: LaunchScope) -> tuple[list[EventRow], dict[str, int]]:
    """A launch's events alone (the warm-up reads them between passes, while the server writes): those its
    processes' headers own inside the run's span, in wall-time order, and the lines left out by reason."""
    c = FolderCheck(folder, scope)
    columns, files = kind_files(folder, "events", EventRow, c.skipped)
    return events_of(columns, c.own("events", columns, files)), dict(c.skipped)


#: launch folder → (its files' names, sizes and mtimes, the scope, what they read as, in columns): results are
#: rebuilt after every cell, and a finished server's log does not change, so it is parsed once
_READ: dict[Path, tuple[tuple[tuple[str, int, int], ...], LaunchScope, LaunchRead]] = {}


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in sorted(folder.glob("*-*.json*")):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((path.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def read_folder(folder: Path, scope: LaunchScope) -> LaunchRead:
    """``check_folder``, read again only when a file changed."""
    key, sig = folder.resolve(), _signature(folder)
    cached = _READ.get(key)
    if cached is not None and cached[:2] == (sig, scope):
        return cached[2]
    _READ.pop(key, None)  # never the old read and the new one at once
    read = check_folder(folder, scope)
    _READ[key] = (sig, scope, read)
    return read
