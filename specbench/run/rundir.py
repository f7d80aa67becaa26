"""The run directory: append-only raw data, and derived files rewritten atomically after each cell.

- ``requests.jsonl``  every request record (warm-up included, marked), appended per phase
- ``phases.jsonl``    one line per measured phase: wall time, acceptance window, server
- ``results.json``    derived rows (reference keys first); ``results.md`` the table
- ``meta.json``       suite, comparability fingerprint, prompt hashes, servers (engine, version, argv), timings
- ``launched.json``   servers started and not yet stopped (pid + start time): what a killed run left
- ``*.quarantine.jsonl``  lines of the raw files that could not be read, set aside by ``--resume``
- ``slo_probes.jsonl``  the capacity search's probe requests; ``schedule.json`` a tune run's choice
- ``.specbench.lock``  held by the run using the directory (``lock.py``), gone when it ends

The names are spelled in ``schemas/run_files.py`` only (``RUN_FILES``: what ``--overwrite`` removes).

Every write goes through ``specbench.util.diskio``: a failed write (disk full) is one line naming the
file and leaves what was there before whole.

Raw files are the source of truth: results can be rebuilt from them, and ``--resume`` reads them.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from ..errors import RunDirError
from ..schemas.cell import Cell
from ..schemas.launched import ProcessIdentity
from ..schemas.meta import RunMeta
from ..schemas.notes import Note, NoteCode
from ..schemas.phase import PhaseInfo, SupersededPhase
from ..schemas.quarantine import QuarantinedLine
from ..schemas.request import ProbeRequest, RequestRecord
from ..schemas.row import ResultRow
from ..schemas.run_files import LAUNCHED, LOGS, META, PHASES, QUARANTINE, REQUESTS, RESULTS, RESULTS_MD, RUN_FILES, SLO_PROBES
from ..util.diskio import append_text, write_atomic, writing
from ..util.jsonio import write_json
from .files_read import R, file_lines, read_meta, scan_lines
from .recorded import lines_once, passes_once, run_span
from .say import say_once

#: the record each raw file's lines are: its declaration is the line's only reader
LINE_RECORDS: dict[str, type[RequestRecord] | type[PhaseInfo]] = {REQUESTS: RequestRecord, PHASES: PhaseInfo}


def scan_numbered(path: Path, name: str) -> tuple[list[tuple[int, bytes, RequestRecord | PhaseInfo]], list[QuarantinedLine]]:
    """Every intact line of a raw file (line number, raw, record) and every bad one (``files_read.scan_lines``)."""
    good, bad = [], []
    for line in scan_lines(file_lines(path)[0], LINE_RECORDS[name]):
        if line.record is None:
            bad.append(QuarantinedLine(line=line.number, reason=line.why or "unreadable",
                                       text=line.raw.decode(errors="replace")))
        else:
            good.append((line.number, line.raw, line.record))
    return good, bad


def read_lines(lines: list[str], record: type[R]) -> list[R]:
    """Lines just written, read as their file's reader reads them (one that would not read is left out there too)."""
    return [line.record for line in scan_lines((t.encode() for t in lines), record) if line.record is not None]


def _said(line: str | None, notes: list[Note] | None) -> None:
    if line is not None:
        if notes is None:
            say_once(line)
        else:
            notes.append(Note.of(NoteCode.READ_REPAIRED, said=line))


def read_phases(run: Path, notes: list[Note] | None = None) -> list[PhaseInfo]:
    """The intact lines of a run directory's phases.jsonl, a pass recorded complete twice counted once
    (``recorded.passes_once``: which line, said once on stderr, or into ``notes``)."""
    found = [(n, raw, p) for n, raw, p in scan_numbered(Path(run) / PHASES, PHASES)[0] if isinstance(p, PhaseInfo)]
    phases, line = passes_once(found, Path(run) / PHASES, lambda: run_span(Path(run)))
    _said(line, notes)
    return phases


def read_records(run: Path, notes: list[Note] | None = None) -> list[RequestRecord]:
    """The intact lines of a run directory's requests.jsonl, a record recorded twice (the same line again)
    counted once (said once on stderr, or into ``notes``)."""
    found = scan_numbered(Path(run) / REQUESTS, REQUESTS)[0]
    again, line = lines_once(found, Path(run) / REQUESTS)
    _said(line, notes)
    skip = set(again)
    return [r for n, _, r in found if isinstance(r, RequestRecord) and n not in skip]


def backfill_rates(records: list[RequestRecord], phases: list[PhaseInfo]) -> None:
    """Records written before they carried ``request_rate`` take it from their phase, where only
    one phase of that config, data set, concurrency and repeat exists."""
    rates: dict[tuple, set] = {}
    for p in phases:
        rates.setdefault((p.config, p.dataset, p.concurrency, p.repeat), set()).add(p.request_rate)
    if not any(rate is not None for found in rates.values() for rate in found):
        return
    for r in records:
        if r.request_rate is None and r.phase != "warmup":
            found = rates.get((r.config, r.dataset, r.concurrency or 0, r.repeat), set())
            if len(found) == 1:
                r.request_rate = next(iter(found))


def split_incomplete(phases: list[PhaseInfo], records: list[RequestRecord]) -> tuple[
        list[PhaseInfo], list[SupersededPhase], list[Note]]:
    """The complete phases, the phases to measure again (as written, with why where it is not plain)
    and the notes; measured requests without a complete phase are marked ``superseded`` in place."""
    measured = Counter((Cell.of_record(r), r.repeat) for r in records if r.phase == "measure")
    cut, complete, notes = [], [], []
    for p in phases:
        have = measured[(p.cell, p.repeat)]
        if p.complete and p.requests is not None and have != p.requests:
            because = f"{p.requests - have} of its {p.requests} measured request records are unreadable"
            notes.append(Note.of(NoteCode.PHASE_REMEASURED, cell=str(p.cell), repeat=p.repeat, unreadable=p.requests - have,
                                 requests=p.requests))
            cut.append(SupersededPhase.of(p, because))
        elif p.complete:
            complete.append(p)
        else:
            cut.append(SupersededPhase.of(p))
    done = {(p.cell, p.repeat) for p in complete}
    for r in records:
        if r.phase == "measure" and (Cell.of_record(r), r.repeat) not in done:
            r.phase = "superseded"
    return complete, cut, notes


def meta_to_resume(path: Path) -> RunMeta | None:
    """meta.json as a resumed run needs it (``files_read.read_meta`` in ``resume`` mode: strictly; None when there
    is none), its per-config maps there to be filled."""
    meta = read_meta(path, "resume").meta
    if meta is not None:
        meta.grown("servers", {})
        meta.grown("failed_configs", {})
    return meta


def quarantine(run: Path) -> list[Note]:
    """Move every unreadable line of a run directory's raw files to ``<name>.quarantine.jsonl`` (line number,
    reason, text), keeping every intact line; one note per file that had any."""
    notes = []
    for name, target in QUARANTINE.items():
        good, bad = scan_numbered(run / name, name)
        if not bad:
            continue
        _append_lines(run / target, [entry.to_line() for entry in bad])
        write_atomic(run / name, "".join(raw.decode() + "\n" for _, raw, _ in good))
        notes.append(Note.of(NoteCode.LINES_QUARANTINED, file=name, lines=len(bad), target=target,
                             line_numbers=[b.line for b in bad[:5]], reasons=[b.reason for b in bad[:5]]))
    return notes


def _append_lines(path: Path, lines: list[str]) -> None:
    append_text(path, "".join(lines))


class LaunchedServers:
    """``launched.json``: servers started and not yet stopped (pid + start time), so a later run can
    stop what a killed one left running. ``logs`` is where their logs go."""

    def __init__(self, path: Path) -> None:
        self.file = Path(path) / LAUNCHED
        self.logs = Path(path) / LOGS

    def launched(self) -> dict[str, ProcessIdentity]:
        """The servers recorded, read leniently: an unreadable file or entry is none, a wrong value is dropped."""
        try:
            data = json.loads(self.file.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: ProcessIdentity.from_dict(v, self.file, problems=[]) for k, v in data.items() if isinstance(v, dict)}

    def record_server(self, name: str, identity: ProcessIdentity) -> None:
        write_json(self.file, {k: v.to_dict() for k, v in {**self.launched(), name: identity}.items()})

    def next_start(self, name: str) -> int:
        """Without a session (``specbench trace``) each config's server starts once: start 0."""
        return 0

    def forget_server(self, name: str) -> None:
        left = self.launched()
        left.pop(name, None)
        if left:
            write_json(self.file, {k: v.to_dict() for k, v in left.items()})
        else:
            self.forget_all_servers()

    def forget_all_servers(self) -> None:
        with writing(self.file):
            self.file.unlink(missing_ok=True)


class RunDir(LaunchedServers):
    """The one reader and writer of a run directory's files."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.path = Path(path)

    # ---- what the directory holds ----
    def holds_run(self) -> bool:
        return any((self.path / name).exists() for name in RUN_FILES)

    def check_fresh(self) -> None:
        """Refuse to mix a new run into an old one (its cells would be skipped, its requests counted twice)."""
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path} exists and is not a directory: give another -o")
        if self.holds_run():
            raise RunDirError(f"{self.path} holds a run: use --resume {self.path}, or another -o, or --overwrite")

    def check_resumable(self) -> None:
        if not self.path.is_dir():
            raise RunDirError(f"--resume {self.path}: no such directory, nothing to resume")
        if not (self.path / META).exists() and self.read_phases():
            raise RunDirError(f"--resume {self.path}: its {PHASES} has measured phases but there is no {META}, so "
                              "nothing shows they were measured with this suite: use --overwrite or another -o")
        if not any((self.path / name).exists() for name in (META, REQUESTS, PHASES)):
            raise RunDirError(f"--resume {self.path}: no {META}, {REQUESTS} or {PHASES} there, nothing to resume")

    def make(self) -> bool:
        """Create the directory (for the lock, before anything else is checked); whether it was new.
        One line, exit 2, when it cannot be: a file on the way, a read-only file system."""
        if self.path.is_dir():
            return False
        if self.path.exists():
            raise RunDirError(f"{self.path} exists and is not a directory: give another -o")
        try:
            self.path.mkdir(parents=True)
        except FileExistsError:  # made meanwhile by another run, which the lock then tells apart
            return False
        except OSError as err:
            raise RunDirError(f"{self.path}: cannot create the run directory: {err.strerror} "
                              f"({err.filename or self.path}): give another -o") from None
        return True

    def create(self) -> None:
        self.make()
        with writing(self.logs):
            self.logs.mkdir(exist_ok=True)

    def clear(self) -> None:
        """``--overwrite``: remove the previous run's files (and only those) before measuring afresh."""
        with writing(self.path):
            for name in RUN_FILES:
                (self.path / name).unlink(missing_ok=True)
            for tmp in self.path.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
        shutil.rmtree(self.logs, ignore_errors=True)

    # ---- raw data ----
    def append_phase(self, info: PhaseInfo, records: list[RequestRecord]) -> tuple[list[PhaseInfo], list[RequestRecord]]:
        """Requests first, then the phase line: a phase counts as done only once both are on disk. Returns the
        phase and its records as a reader of the files gets them: the lines written, read back (``read_lines``)."""
        info.requests = sum(1 for r in records if r.phase == "measure")
        lines, phase = [r.to_line() for r in records], info.to_line()
        _append_lines(self.path / REQUESTS, lines)
        _append_lines(self.path / PHASES, [phase])
        return read_lines([phase], PhaseInfo), read_lines(lines, RequestRecord)

    def append_probes(self, records: list[RequestRecord], rate: float) -> None:
        """One SLO search probe's requests, each with the rate it was sent at."""
        _append_lines(self.path / SLO_PROBES, [ProbeRequest.of(r, rate).to_line() for r in records])

    def read_phases(self) -> list[PhaseInfo]:
        return read_phases(self.path)

    def read_requests(self, notes: list[Note] | None = None) -> list[RequestRecord]:
        records = read_records(self.path, notes)
        if any(r.request_rate is None and r.phase != "warmup" for r in records):
            backfill_rates(records, self.read_phases())
        return records

    def quarantine(self) -> list[Note]:
        return quarantine(self.path)

    def supersede_incomplete(self) -> tuple[list[SupersededPhase], list[Note]]:
        """Before re-measuring: keep only complete phases in phases.jsonl and mark ``superseded`` every
        measured request without a complete phase (cut by a stop, a dead server, or a crash that tore
        the phase line): nothing is deleted, nothing counted twice. A phase that lost request records
        (quarantined lines) is measured again too. Unreadable lines are quarantined first.
        Returns the phases set aside and the notes to show."""
        notes = self.quarantine()
        records = self.read_requests(notes)
        complete, cut, more = split_incomplete(read_phases(self.path, notes), records)
        write_atomic(self.path / REQUESTS, "".join(r.to_line() for r in records))
        write_atomic(self.path / PHASES, "".join(p.to_line() for p in complete))
        return cut, notes + more

    # ---- derived files ----
    def read_meta(self) -> RunMeta | None:
        return meta_to_resume(self.path / META)

    def write_meta(self, meta: RunMeta) -> None:
        meta.save(self.path / META)

    def results_markdown(self) -> str | None:
        """results.md as written (None: none was), for the terminal to print the same text."""
        path = self.path / RESULTS_MD
        return path.read_text() if path.exists() else None

    def write_results(self, rows: list[ResultRow], markdown: str) -> None:
        write_json(self.path / RESULTS, [r.to_dict() for r in rows])
        write_atomic(self.path / RESULTS_MD, markdown + "\n")
