"""Reading the step log a launched server wrote (docs/steplog.md): a launch folder's header, sched and
gpu files into one ``StepLog``, and each cell's timed passes cut from it by their /metrics scrapes.

Every value came from the engine's processes, a killed one included: each line goes through the
strict typed reader (``schemas.steplog``); a bad line is skipped and counted with its reason, never
an error of the run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..measure.stalls import StallStats, SteadyWarmup, pass_stalls, stall_stats, steady_warmup
from ..measure.steplog import PassSteps, PassTokens, Step, StepLog, StepStats, TokenLogStats, cell_stats, cut, join, pass_tokens, token_stats
from ..schemas.cell import Cell
from ..schemas.phase import PhaseInfo
from ..schemas.row import ResultRow
from ..schemas.steplog import EventRow, GpuRow, RowError, SchedRow, StepHeader, TokenRow

T = TypeVar("T")
MAX_LINE = 1 << 16  # a step row is ~400 bytes; a longer line is not one
WINDOW = "/metrics scrapes"  # a pass is cut by the wall times of its two scrapes (phases.jsonl scraped_*)


def _lines(path: Path, kind: str, skipped: Counter[str]) -> list[Any]:
    out = []
    try:
        with path.open("rb") as f:
            for raw in f:
                if not raw.endswith(b"\n") or len(raw) > MAX_LINE:
                    skipped[f"{kind}: torn or overlong line"] += 1
                    continue
                try:
                    out.append(json.loads(raw))
                except (ValueError, RecursionError):
                    skipped[f"{kind}: not JSON"] += 1
    except OSError as err:
        skipped[f"{kind}: unreadable file ({err.strerror or type(err).__name__})"] += 1
    return out


def _reason(err: RowError) -> str:
    return str(err).split(":")[0] if ":" in str(err) else str(err)[:60]


#: launch folder → (its files' names, sizes and mtimes, what they read as): results are rebuilt after every
#: cell, and a finished server's log does not change, so it is parsed once
_READ: dict[Path, tuple[tuple[tuple[str, int, int], ...], StepLog]] = {}


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in sorted(folder.glob("*-*.json*")):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((path.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def read_launch(folder: Path) -> StepLog:
    """One launch's files (``header-*.json``, ``sched-*.jsonl``, ``gpu-*.jsonl``), rows joined on ``step``
    (read again only when a file changed)."""
    key, sig = folder.resolve(), _signature(folder)
    cached = _READ.get(key)
    if cached is not None and cached[0] == sig:
        return cached[1]
    log = _read_launch(folder)
    _READ[key] = (sig, log)
    return log


def _read_launch(folder: Path) -> StepLog:
    skipped: Counter[str] = Counter()
    headers: list[StepHeader] = []
    for path in sorted(folder.glob("header-*.json")):
        try:
            headers.append(StepHeader.of_file(json.loads(path.read_bytes()[:MAX_LINE])))
        except (OSError, ValueError, RecursionError) as err:
            skipped[f"header: {_reason(err) if isinstance(err, RowError) else 'unreadable'}"] += 1
    steps = join(_rows(folder, "sched", SchedRow.from_line, skipped), _rows(folder, "gpu", GpuRow.from_line, skipped), skipped)
    return StepLog(steps=steps, headers=tuple(headers), skipped=dict(skipped))


def _rows(folder: Path, kind: str, reader: Callable[[Any], T], skipped: Counter[str]) -> list[T]:
    rows = []
    for path in sorted(folder.glob(f"{kind}-*.jsonl")):
        for obj in _lines(path, kind, skipped):
            try:
                rows.append(reader(obj))
            except RowError as err:
                skipped[f"{kind}: {_reason(err)}"] += 1
    return rows


def read_events(folder: Path) -> tuple[list[EventRow], dict[str, int]]:
    """A launch's events (``events-*.jsonl`` of every process: collections, compiles, captures, autotunes,
    allocator growth, preemptions, the recorder's flushes), in wall-time order, and the lines skipped by reason."""
    skipped: Counter[str] = Counter()
    rows = _rows(folder, "events", EventRow.from_line, skipped)
    return sorted(rows, key=lambda e: e.wall), dict(skipped)


def read_tokens(folder: Path) -> tuple[list[TokenRow], dict[str, int]]:
    """A launch's token log (``tokens-*.jsonl``, the ``tokens`` level), one row per verified guess (a second row
    of the same guess — another rank's — skipped), and the lines skipped by reason."""
    skipped: Counter[str] = Counter()
    rows, seen = [], set()
    for r in _rows(folder, "tokens", TokenRow.from_line, skipped):
        guess = (r.step, r.req_id, r.draft_pos)
        if guess in seen:
            skipped["tokens: duplicate guess"] += 1
            continue
        seen.add(guess)
        rows.append(r)
    return rows, dict(skipped)


def pass_steps(log: StepLog, phase: PhaseInfo) -> tuple[Step, ...] | None:
    """The steps of one timed pass, or None where the pass has no recorded window."""
    if phase.scraped_before is None or phase.scraped_after is None:
        return None
    return cut(log, phase.scraped_before, phase.scraped_after)


@dataclass(frozen=True)
class StepLogSource:
    """Where a cell's step-log numbers came from, named as the result row names it."""

    steplog_window: str | None
    steplog_skipped_rows: dict[str, int] | None
    steplog_error: str | None


@dataclass(frozen=True)
class CellStepLog:
    """One cell's step-log keys: its numbers (None: no timed pass could be cut), then where they came from."""

    stats: StepStats | None
    source: StepLogSource
    tokens: TokenLogStats | None = None
    stalls: StallStats | None = None
    warmup: SteadyWarmup | None = None

    def add_to(self, row: ResultRow) -> None:
        if self.stats is not None:
            row.add(self.stats)
        row.add(self.source)
        if self.tokens is not None:
            row.add(self.tokens)
        if self.stalls is not None:
            row.add(self.stalls)
        if self.warmup is not None:
            row.add(self.warmup)


def steplog_results(run_dir: Path, phases: Sequence[PhaseInfo]) -> dict[Cell, CellStepLog]:
    """The ``steplog_*`` results keys of every cell whose timed passes ran with the step log on (and, where the
    launch kept a token log, the ``steplog_token_*`` keys: its rows cut by the same step numbers)."""
    logs: dict[str, StepLog] = {}
    token_logs: dict[str, tuple[list[TokenRow], dict[str, int]]] = {}
    events: dict[str, list[EventRow]] = {}
    cells: dict[Cell, list[PhaseInfo]] = {}
    for p in phases:
        if p.steplog and p.complete:
            cells.setdefault(p.cell, []).append(p)
    out = {}
    for cell, ps in cells.items():
        passes, token_passes, skipped, errors, orphans = [], [], Counter[str](), [], 0
        stalls, walls = [], []
        for p in ps:
            assert p.steplog is not None
            folder = (run_dir / p.steplog).resolve()
            if not folder.is_relative_to(run_dir.resolve()) or not folder.is_dir():
                errors.append(f"{p.steplog}: no such folder in the run directory")
                continue
            if p.steplog not in logs:
                logs[p.steplog] = read_launch(folder)
                skipped.update(logs[p.steplog].skipped)
                if any(folder.glob("tokens-*.jsonl")):
                    token_logs[p.steplog] = read_tokens(folder)
                    skipped.update(token_logs[p.steplog][1])
                    logged = {s.sched.step for s in logs[p.steplog].steps}
                    orphans += sum(1 for t in token_logs[p.steplog][0] if t.step not in logged)
                events[p.steplog], event_skips = read_events(folder)
                skipped.update(event_skips)
            steps = pass_steps(logs[p.steplog], p)
            if steps is None:
                errors.append(f"repeat {p.repeat}: no /metrics scrape times in phases.jsonl")
                continue
            counter = p.acceptance.spec_accepted_tokens
            passes.append(PassSteps(steps, counter if isinstance(counter, int) and not isinstance(counter, bool) else None))
            if p.steplog in token_logs:
                token_passes.append(PassTokens(steps, tuple(pass_tokens(token_logs[p.steplog][0], steps))))
            assert p.scraped_before is not None and p.scraped_after is not None  # pass_steps returned steps
            stalls.append(pass_stalls(steps, events[p.steplog], p.wall_s, p.repeat, p.server_start,
                                      (p.scraped_before, p.scraped_after)))
            walls.append(p.wall_s)
        out[cell] = CellStepLog(cell_stats(passes) if passes else None,
                                StepLogSource(WINDOW if passes else None, dict(skipped) or None, "; ".join(errors) or None),
                                token_stats(token_passes, orphans) if token_passes else None,
                                stall_stats(stalls, walls) if stalls else None,
                                steady_warmup([p.warmup_one_time for p in ps]))
    return out
