"""What a run directory recorded, checked against itself when it is read back: a pass or a request recorded twice
is counted once (and which line counted, said), and the time span the run covers (meta.json), outside which no
row of it can lie. A run never records either twice (``--resume`` sets a pass it measures again aside first,
meta.json ``superseded_phases``), so a second copy is damage: a file appended to itself, or lines copied in."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import SpecbenchError
from ..schemas.cell import Cell
from ..schemas.phase import PhaseInfo
from ..schemas.run_files import META
from .files_read import read_meta

SPAN_MARGIN_S = 60.0  # meta.json's times are to the second, and a Ray node's clock may be off by a few
SHOWN = 3  # passes recorded twice named in the one line, before the rest are counted


def _time(text: str | None) -> float | None:
    try:
        t = dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
    return None if t is None else (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).timestamp()


def run_span(run_dir: Path) -> tuple[float | None, float | None]:
    """The wall times the run covers: from its first start to its finish (meta.json, a minute either side); no
    end while a later ``--resume`` has not finished, none at all without a readable meta.json."""
    try:
        meta = read_meta(run_dir / META, "report").meta
    except (OSError, SpecbenchError):
        return None, None
    if meta is None:
        return None, None
    starts = [t for t in [_time(meta.started_at), *(_time(r.started_at) for r in meta.runs or [])] if t is not None]
    end = _time(meta.finished_at)
    if end is not None and starts and end < max(starts):
        end = None  # a --resume is under way (or was killed): it may measure after the earlier finish
    return (min(starts) - SPAN_MARGIN_S if starts else None), (end + SPAN_MARGIN_S if end is not None else None)


def _inside(p: PhaseInfo, span: tuple[float | None, float | None]) -> bool:
    low, high = span
    t = p.scraped_before
    return t is None or ((low is None or t >= low) and (high is None or t <= high))


def passes_once(found: Sequence[tuple[int, bytes, PhaseInfo]], where: Path,
                span: Callable[[], tuple[float | None, float | None]]) -> tuple[list[PhaseInfo], str | None]:
    """phases.jsonl's lines (number, text, phase) with each complete pass (cell and repeat) once, and one line
    saying which passes were recorded twice and which line counted (None: none was). Counted: the only line whose
    scrape times lie inside the run's span (meta.json) where the others' do not, else the first written."""
    groups: dict[tuple[Cell, int], list[tuple[int, bytes, PhaseInfo]]] = {}
    for entry in found:
        if entry[2].complete:
            groups.setdefault((entry[2].cell, entry[2].repeat), []).append(entry)
    twice = {k: g for k, g in groups.items() if len(g) > 1}
    if not twice:
        return [p for _, _, p in found], None
    bounds = span()
    left_out: set[int] = set()
    said = []
    for (cell, repeat), group in twice.items():
        inside = [e for e in group if _inside(e[2], bounds)]
        keep = (inside or group)[0]
        if all(e[1].strip() == group[0][1].strip() for e in group):
            why = "the same line again"
        elif inside and len(inside) < len(group):
            why = "the others' /metrics scrape times lie outside the run's time span in meta.json"
        else:
            why = ("the first written; a pass measured again is set aside before it is, so a second complete line "
                   "is not the run's own")
        left_out |= {e[0] for e in group if e is not keep}
        lines = ", ".join(str(e[0]) for e in group)
        said.append(f"{cell} repeat {repeat} on lines {lines}: line {keep[0]} counted ({why})")
    more = f"; and {len(said) - SHOWN} more" if len(said) > SHOWN else ""
    line = (f"{where}: {len(twice)} pass(es) recorded complete more than once, each counted once: "
            + "; ".join(said[:SHOWN]) + more)
    return [p for n, _, p in found if n not in left_out], line


def lines_once(found: Sequence[tuple[int, bytes, object]], where: Path) -> tuple[list[int], str | None]:
    """The numbers of lines that repeat an earlier line exactly (a request record recorded twice), and one line
    saying so (None: none does)."""
    seen: set[bytes] = set()
    again = []
    for n, raw, _ in found:
        key = raw.strip()
        if key in seen:
            again.append(n)
        seen.add(key)
    if not again:
        return [], None
    shown = ", ".join(map(str, again[:SHOWN])) + (" …" if len(again) > SHOWN else "")
    return again, f"{where}: {len(again)} line(s) repeat an earlier line exactly (line {shown}): each record counted once"
