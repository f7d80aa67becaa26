"""``load.arrival``: when an open-loop pass's requests are due — Poisson (the default), gamma with a
burstiness, a linear or exponential ramp, or a timestamped trace (its own JSONL, Mooncake's JSONL or
Azure's CSV) — checked where the suite is read, the trace file included, each problem one line naming
the file and key (a trace's bad line by its number). ``load/schedule.py`` turns it into due times.

Formats read (docs/suites.md cites each): Mooncake's FAST'25 trace, one JSON object a line with
``timestamp`` (ms after the first request), ``input_length``, ``output_length`` and ``hash_ids`` (not
used); specbench's own is that line plus an optional ``text`` (sent as is) and ``session_id``; Azure's
LLM inference traces (2023, 2024) are CSV with ``TIMESTAMP`` (a date and time), ``ContextTokens`` and
``GeneratedTokens``."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..schemas.notes import Note, NoteCode
from ..schemas.request import TraceLine
from ..util.numbers import is_number
from .checks import MAX_REQUEST_RATE, MAX_TIMEOUT_S, MAX_TOKENS, MIN_REQUEST_RATE, check_keys, shown

ARRIVALS = ("poisson", "gamma", "ramp", "trace")
RAMP_SHAPES = ("linear", "exponential")
TRACE_FORMATS = ("mooncake", "azure")
MAX_BURSTINESS = 1_000.0  # gamma shape: 1000 is already all but evenly spaced
MAX_TIME_SCALE = 1_000.0
MAX_TRACE_LINES = 1_000_000
MAX_TRACE_BYTES = 1 << 30
ARRIVAL_KEYS: dict[str, type | tuple[type, ...]] = {
    "kind": str, "burstiness": (int, float), "shape": str, "start": (int, float), "end": (int, float),
    "duration_s": (int, float), "path": str, "format": str, "time_scale": (int, float),
}
#: the keys each kind takes besides ``kind``
KIND_KEYS = {"poisson": (), "gamma": ("burstiness",), "ramp": ("shape", "start", "end", "duration_s", "burstiness"),
             "trace": ("path", "format", "time_scale")}


@dataclass(frozen=True)
class Arrival:
    """The checked ``load.arrival``. ``burstiness`` is the gamma shape of the gaps (1: Poisson, below 1
    burstier, above 1 more even); a ramp goes from ``start`` to ``end`` req/s over each pass's requests, or
    over ``duration_s`` seconds (then stays at ``end``); a trace's requests are ``trace``, their times
    already multiplied by ``time_scale``."""

    kind: str = "poisson"
    burstiness: float = 1.0
    shape: str = "linear"
    start: float | None = None
    end: float | None = None
    duration_s: float | None = None
    path: str | None = None
    format: str | None = None
    time_scale: float = 1.0
    trace: tuple[TraceLine, ...] = ()
    trace_sha256: str | None = None

    @property
    def own_rate(self) -> float | None:
        """The rate a ramp or trace gives its cell (its load point, ``load.request_rate`` then not allowed):
        the ramp's end rate; the trace's mean rate, (requests − 1) ÷ its time span, to 4 significant digits."""
        if self.kind == "ramp":
            return self.end
        if self.kind == "trace" and len(self.trace) > 1:
            span = self.trace[-1].at_s - self.trace[0].at_s
            return float(f"{(len(self.trace) - 1) / span:.4g}") if span > 0 else None
        return None

    def note(self) -> Note | None:
        """The note under the tables saying how requests arrived (None for Poisson, the default)."""
        if self.kind == "gamma":
            return Note.of(NoteCode.ARRIVALS_GAMMA, burstiness=self.burstiness)
        if self.kind == "ramp":
            return Note.of(NoteCode.ARRIVALS_RAMP, shape=self.shape, start=self.start, end=self.end,
                           duration_s=self.duration_s or None, burstiness=self.burstiness)
        if self.kind == "trace":
            span = self.trace[-1].at_s - self.trace[0].at_s if self.trace else 0.0
            return Note.of(NoteCode.ARRIVALS_TRACE, file=Path(self.path or "").name, format=self.format,
                           requests=len(self.trace), span_s=span, time_scale=self.time_scale)
        return None

    def fingerprint(self) -> dict[str, Any]:
        """What must match between two runs (``Suite.comparability``): the settings, and the trace's bytes."""
        keys = ("kind",) + KIND_KEYS[self.kind]
        out = {k: getattr(self, k) for k in keys if k != "path"}
        return {**out, "trace_sha256": self.trace_sha256} if self.kind == "trace" else out


def parse_arrival(raw: Any, base: Path, where: str, problems: list[str]) -> Arrival:
    """``load.arrival`` (a kind's name, or a mapping with ``kind`` and its keys) as an ``Arrival``; a trace's
    path is relative to the suite's folder ``base``. Problems go to ``problems``, one line each."""
    awhere = f"{where}: load.arrival"
    named = isinstance(raw, str)
    block = check_keys({"kind": raw} if named else raw, ARRIVAL_KEYS, awhere, problems)
    kind = block.get("kind")
    if kind not in ARRIVALS:
        if kind is None and isinstance(raw, dict) and "kind" in raw:
            return Arrival()  # check_keys said what its type should be
        got = "nothing" if kind is None else repr(kind)
        problems.append(f"{awhere}{'' if named else '.kind'}: expected one of {', '.join(ARRIVALS)}, got {got}")
        return Arrival()
    for key in block:
        if key != "kind" and key not in KIND_KEYS[kind]:
            allowed = ", ".join(KIND_KEYS[kind]) or "none"
            problems.append(f"{awhere}.{key}: not a key of {kind} arrivals (its keys: {allowed})")
    bursty = _bounded(block, "burstiness", awhere, problems, 0.0, MAX_BURSTINESS, open_low=True)
    if kind == "gamma":
        if "burstiness" not in block:
            problems.append(f"{awhere}.burstiness: required for gamma arrivals (1 is Poisson; below 1 burstier)")
        return Arrival(kind, burstiness=bursty or 1.0)
    if kind == "ramp":
        return _ramp(block, awhere, problems, bursty or 1.0)
    if kind == "trace":
        return _trace(block, base, awhere, problems)
    return Arrival()


def _bounded(block: dict[str, Any], key: str, awhere: str, problems: list[str], low: float, high: float,
             open_low: bool = False) -> float | None:
    """``block[key]`` when it is in its range (above ``low`` when ``open_low``), else a problem and None."""
    value = block.get(key)
    if value is None:
        return None
    if (value <= low if open_low else value < low) or value > high:
        above = f"above {shown(low)}" if open_low else f"from {shown(low)}"
        problems.append(f"{awhere}.{key}: expected a number {above} {'and at most' if open_low else 'to'} {shown(high)}, "
                        f"got {value!r}")
        return None
    return float(value)


def _ramp(block: dict[str, Any], awhere: str, problems: list[str], burstiness: float) -> Arrival:
    shape = block.get("shape", "linear")
    if shape not in RAMP_SHAPES:
        problems.append(f"{awhere}.shape: expected one of {', '.join(RAMP_SHAPES)}, got {shape!r}")
    rates = []
    for key in ("start", "end"):
        if key not in block:
            problems.append(f"{awhere}.{key}: required for a ramp (req/s)")
        rates.append(_bounded(block, key, awhere, problems, MIN_REQUEST_RATE, MAX_REQUEST_RATE))
    duration = _bounded(block, "duration_s", awhere, problems, 0.0, MAX_TIMEOUT_S, open_low=True)
    return Arrival("ramp", burstiness=burstiness, shape=shape, start=rates[0], end=rates[1], duration_s=duration)


def _trace(block: dict[str, Any], base: Path, awhere: str, problems: list[str]) -> Arrival:
    scale = _bounded(block, "time_scale", awhere, problems, 0.0, MAX_TIME_SCALE, open_low=True)
    if "path" not in block:
        problems.append(f"{awhere}.path: required for a trace (its JSONL or CSV file)")
        return Arrival("trace")
    path = (base / os.path.expanduser(block["path"])).resolve()
    fmt = block.get("format", "azure" if path.suffix.lower() == ".csv" else "mooncake")
    if fmt not in TRACE_FORMATS:
        problems.append(f"{awhere}.format: expected one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
        return Arrival("trace", path=str(path))
    try:
        data = _read_bytes(path)
        lines = (_azure if fmt == "azure" else _mooncake)(data.decode("utf-8"), scale or 1.0)
    except TraceError as err:
        problems.append(f"{awhere}.path: {path}: {err}")
        return Arrival("trace", path=str(path), format=fmt)
    except UnicodeDecodeError:
        problems.append(f"{awhere}.path: {path}: not UTF-8 text")
        return Arrival("trace", path=str(path), format=fmt)
    arrival = Arrival("trace", path=str(path), format=fmt, time_scale=scale or 1.0, trace=tuple(lines),
                      trace_sha256=hashlib.sha256(data).hexdigest())
    if arrival.own_rate is None:
        problems.append(f"{awhere}.path: {path}: every request at the same time: a trace needs two distinct timestamps "
                        "(its mean rate is the cell's load point)")
    return arrival


IN_ORDER = "a trace's lines are in time order"


class TraceError(ValueError):
    """One line saying what is wrong with a trace file (and on which line)."""


def _read_bytes(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise TraceError(f"larger than {MAX_TRACE_BYTES} bytes: cut the trace")
        return path.read_bytes()
    except FileNotFoundError:
        raise TraceError("file not found") from None
    except IsADirectoryError:
        raise TraceError("is a directory, not a trace file") from None
    except OSError as err:
        raise TraceError(f"cannot be read: {err.strerror or err}") from None


def _mooncake(text: str, scale: float) -> list[TraceLine]:
    """Mooncake's JSONL (and specbench's: plus ``text`` and ``session_id``); ``timestamp`` in ms."""
    out: list[TraceLine] = []
    first: float | None = None
    previous: tuple[int, float] | None = None
    for n, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise TraceError(f"line {n}: not JSON ({err.msg})") from None
        if not isinstance(obj, dict):
            raise TraceError(f"line {n}: expected a JSON object, got {type(obj).__name__}")
        stamp = _time(obj.get("timestamp"), n, "timestamp", previous)
        previous = (n, stamp)
        first = stamp if first is None else first
        text_value = obj.get("text")
        if text_value is not None and not isinstance(text_value, str):
            raise TraceError(f"line {n}: text: expected a string, got {text_value!r}")
        session = obj.get("session_id")
        if session is not None and (isinstance(session, bool) or not isinstance(session, (str, int))):
            raise TraceError(f"line {n}: session_id: expected a string or an integer, got {session!r}")
        length = _length(obj.get("input_length"), n, "input_length", required=text_value is None)
        out.append(TraceLine(at_s=(stamp - first) / 1000 * scale, output_length=_length(obj.get("output_length"), n,
                             "output_length", required=True) or 0, input_length=length, text=text_value,
                             session_id=None if session is None else str(session), line=n))
        _cap(out, n)
    if not out:
        raise TraceError("no requests in it")
    return out


def _azure(text: str, scale: float) -> list[TraceLine]:
    """Azure's LLM inference trace: CSV with TIMESTAMP, ContextTokens, GeneratedTokens (line 1 the header)."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("TIMESTAMP", "ContextTokens", "GeneratedTokens") if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"line 1: an Azure trace's header has TIMESTAMP, ContextTokens, GeneratedTokens; "
                         f"missing {', '.join(missing)}")
    out: list[TraceLine] = []
    first: datetime | None = None
    previous: tuple[int, datetime] | None = None
    for row in reader:
        n, raw = reader.line_num, str(row["TIMESTAMP"]).strip()
        try:
            when = datetime.fromisoformat(raw)
        except ValueError:
            raise TraceError(f"line {n}: TIMESTAMP: expected a date and time, got {raw!r}") from None
        try:
            earlier = previous is not None and when < previous[1]
        except TypeError:  # one with a time zone, one without
            raise TraceError(f"line {n}: TIMESTAMP {raw}: a time zone on some lines only") from None
        if previous is not None and earlier:
            raise TraceError(f"line {n}: TIMESTAMP {raw} is before line {previous[0]}'s ({previous[1]}): {IN_ORDER}")
        first = when if first is None else first
        previous = (n, when)
        out.append(TraceLine(at_s=(when - first).total_seconds() * scale, input_length=_length(_int(row["ContextTokens"]), n, "ContextTokens", True),
                             output_length=_length(_int(row["GeneratedTokens"]), n, "GeneratedTokens", True) or 0, line=n))
        _cap(out, n)
    if not out:
        raise TraceError("no requests in it")
    return out


def _int(text: str | None) -> Any:
    try:
        return int(str(text).strip())
    except ValueError:
        return text


def _time(value: Any, n: int, key: str, previous: tuple[int, float] | None) -> float:
    """A line's time: a number, not negative, and not before the line before it."""
    if not is_number(value):
        raise TraceError(f"line {n}: {key}: expected a number, got {value!r}")
    if value < 0:
        raise TraceError(f"line {n}: {key} {value!r} is negative")
    if previous is not None and value < previous[1]:
        raise TraceError(f"line {n}: {key} {value!r} is before line {previous[0]}'s ({previous[1]:g}): {IN_ORDER}")
    return float(value)


def _length(value: Any, n: int, key: str, required: bool) -> int | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise TraceError(f"line {n}: {key}: expected an integer from 0 to {MAX_TOKENS}, got {value!r}")
    return value


def _cap(lines: list[TraceLine], n: int) -> None:
    if len(lines) > MAX_TRACE_LINES:
        raise TraceError(f"line {n}: more than {MAX_TRACE_LINES} requests: cut the trace")

