"""Reading a results row from a file: what each key must hold, and the one-line repairs.

``read_row`` is the only caller of ``Checker``; the field annotations of the row's metric groups say
what each known key holds, and a key this version does not know is checked by its name. A field's
range (``key(low=, high=)``) says which numbers cannot be outside it by what they are (a negative
latency or speedup, a rate above 1): such a value is repaired like a wrong type (shown as —, said), so
the gate, which refuses any repair, never judges it.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, cast

from ..errors import ResultsError
from ..util.numbers import finite, is_number
from .notes import Note, Notes
from .record import show
from .row import FIELD_NAMES, ResultRow


def _numeric(hint: Any) -> bool:
    """``int``, ``float``, or a union of them with None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return all(a in (int, float, type(None)) for a in typing.get_args(hint))
    return hint in (int, float)


def _kind_of(annotation: Any) -> str | None:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if len(args) == 1 else annotation
    if base == Notes:
        return "notes"
    if base is str:
        return "text"
    if base is bool:
        return "flag"
    if base in (int, float):
        return "number"
    origin = typing.get_origin(base)
    if origin is dict:
        return "mapping"
    if origin is list and _numeric(typing.get_args(base)[0]):  # a list of objects or lists is kept as is
        return "numbers"
    return None


_HINTS = typing.get_type_hints(ResultRow)
#: what each field holds, from its annotation: text, flag, number, numbers, mapping, notes; None = anything
FIELD_KINDS: dict[str, str | None] = {name: _kind_of(_HINTS[name]) for name in FIELD_NAMES}

#: a key this version has no field for is checked by its name, as results from older versions were
_NUMBER = re.compile(
    r"(_ms|_tps|_rps|_s|_share|_tokens|_rate|_length|_diff|_chunks|_steps|_drafts|requests|concurrency|repeats"
    r"|_prompts|_compared|_identical|_median|_high|_low|_speedup|_vs_baseline)$|^acceptance_pos_\d+$")


#: the range of a known key's number is its field's (``key(low=, high=)``): only what a definition bounds — a
#: time, count, throughput, speedup or ratio of two of them is ≥ 0, a probability or a share of requests in
#: [0, 1], a mean acceptance length ≥ 1 (the bonus token); differences, interval ends and keys whose estimator
#: can pass its ideal range (a stream's acceptance rate, a step share) are not bounded
_SPECS = ResultRow.specs()
_POSITION = re.compile(r"^acceptance_pos_\d+$")


def bounds(key: str) -> tuple[float | None, float | None] | None:
    """The range a results key's number lies in by definition (its field's; ``acceptance_pos_i`` beyond the
    declared three too), else None."""
    spec = _SPECS.get(key)
    if spec is not None:
        low, high = spec.meta.get("low"), spec.meta.get("high")
        return None if low is None and high is None else (low, high)
    return (0, 1) if _POSITION.match(key) else None


def in_bounds(key: str, value: float) -> str | None:
    """What ``value`` should have been when it is outside ``key``'s range, else None."""
    found = bounds(key)
    if found is None:
        return None
    low, high = found
    if (low is None or value >= low) and (high is None or value <= high):
        return None
    if high is None:
        return f"a number ≥ {low:g}"
    return f"a number in [{'' if low is None else f'{low:g}'}, {high:g}]"


def expected_kind(key: str) -> str | None:
    """What a results key holds: text, flag, numbers, mapping, number; None = unknown (kept as is)."""
    if key in FIELD_KINDS:
        return FIELD_KINDS[key]
    return "number" if _NUMBER.search(key) else None


def refusal(problems: list[str]) -> str:
    """The first repair, and how many more, as an error line (a verdict never rests on a repaired value)."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0].replace("; shown as —", "").replace("; ignored", "") + more


_EXPECTED = {"number": "a finite number", "text": "text", "flag": "true/false"}
_TYPES: dict[str, Any] = {"number": is_number, "text": lambda v: isinstance(v, str), "flag": lambda v: isinstance(v, bool)}


class Checker:
    """Checks one file's records, remembering each repair as a line naming the file, record and key."""

    def __init__(self, where: Any) -> None:
        self.where = where
        self.problems: list[str] = []

    def note(self, at: str, key: str, value: Any, expected: str) -> None:
        self.problems.append(f"{self.where}: {at}: {key}: expected {expected}, got {show(value)}; shown as —")

    def value(self, at: str, key: str, value: Any, label: str | None = None) -> Any:
        """``value`` if it has the type ``key`` holds, else None (noted under ``label``, default the key)."""
        if value is None:
            return None
        kind = expected_kind(key)
        name = label or key
        if kind in _TYPES:
            if not _TYPES[kind](value):
                self.note(at, name, value, _EXPECTED[kind])
                return None
            outside = in_bounds(key, value) if kind == "number" else None
            if outside:
                self.note(at, name, value, outside)
                return None
            return value
        if kind == "numbers":
            if not isinstance(value, list):
                self.note(at, name, value, "a list of numbers")
                return None
            if any(v is not None and not is_number(v) for v in value):
                self.note(at, name, value, "a list of finite numbers")
            return [v if is_number(v) else None for v in value]
        if kind == "notes":
            return self.notes(at, name, value)
        if kind == "mapping":
            if not isinstance(value, dict):
                self.note(at, name, value, "an object")
                return None
            return self.mapping(at, key, value) if label is None else finite(value)
        if isinstance(value, float) and not is_number(value):
            self.note(at, name, value, "a finite number")
            return None
        return finite(value)

    def notes(self, at: str, key: str, value: Any) -> Notes | None:
        """A row's ``notes``: each a note (its wrong keys ignored, said) or a sentence an earlier specbench stored."""
        if not isinstance(value, list):
            self.note(at, key, value, "a list of texts or objects")
            return None
        out: Notes = []
        for j, item in enumerate(value):
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict):
                out.append(Note.from_dict(item, f"{self.where}: {at}: {key}[{j}]", problems=self.problems))
            else:
                self.note(at, f"{key}[{j}]", item, "text or an object")
        return out

    def mapping(self, at: str, key: str, value: dict[str, Any]) -> dict[str, Any] | None:
        if key == "ci95":
            out = {}
            for metric, bounds in value.items():
                ok = (bounds is None or (isinstance(bounds, list) and len(bounds) == 2
                                         and all(b is None or is_number(b) for b in bounds)))
                if not ok:
                    self.note(at, f"ci95.{metric}", bounds, "[low, high]")
                out[metric] = bounds if ok else None
            return out
        if key in ("std", "errors", "stream_tokens_per_step_histogram"):
            out = {}
            for k, v in value.items():
                if v is not None and not is_number(v):
                    self.note(at, f"{key}.{k}", v, "a finite number")
                    v = None
                out[k] = v
            return out
        if key == "categories":
            out = {}
            for cat, stats in value.items():
                if not isinstance(stats, dict):
                    self.note(at, f"categories.{cat}", stats, "an object")
                    continue
                out[cat] = {k: self.value(at, k, v, f"categories.{cat}.{k}") for k, v in stats.items()}
            return out
        return cast(dict[str, Any], finite(value))  # finite() of a dict is a dict of the same keys

    def row(self, i: int, record: Any) -> ResultRow:
        if not isinstance(record, dict):
            raise ResultsError(f"{self.where}: record {i}: expected an object, got {type(record).__name__}")
        for key in ("run", "dataset"):
            if key not in record:
                raise ResultsError(f"{self.where}: record {i}: key {key!r} missing")
            if not isinstance(record[key], str) or not record[key]:
                raise ResultsError(f"{self.where}: record {i}: {key}: expected text, got {show(record[key])}")
        at = f"record {i} ({record['run']} / {record['dataset']})"
        row = ResultRow.empty()
        for k, v in record.items():
            row.set(k, v if k in ("run", "dataset") else self.value(at, k, v))
        return row


def read_row(data: Any, where: str | Any = "results", index: int = 0, problems: list[str] | None = None) -> ResultRow:
    """A row from a results file's ``data[index]``. Repairs (a value that cannot be what its key
    holds, shown as —) are appended to ``problems``; without that list the first is a ResultsError."""
    checker = Checker(where)
    row = checker.row(index, data)
    if problems is None and checker.problems:
        raise ResultsError(refusal(checker.problems))
    if problems is not None:
        problems += checker.problems
    return row


def rows_from(records: Any, where: str = "rows") -> list[ResultRow]:
    """``read_row`` over a list of row objects, strictly (the first repair is an error)."""
    return [read_row(r, where, i) for i, r in enumerate(records)]
