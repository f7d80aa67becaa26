"""The values a record's fields hold: one reader per type hint (built once: a run reads 10⁵ lines
and more), the ranges a field may declare through ``key(...)``, and the errors a wrong value makes.
``record.py`` puts them together into ``Record``."""

from __future__ import annotations

import json
import math
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from ..errors import ResultsError
from ..util.numbers import finite, is_number

_NONE = type(None)


class RowError(ValueError):
    """Why one JSON line cannot be read as its record: one short reason naming the key."""


class WrongValue(Exception):
    """A value that is not of its key's type; ``expected`` says what it should have been."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def show(value: Any) -> str:
    """A value as an error line quotes it: JSON, cut at 40 characters."""
    text = json.dumps(value, allow_nan=True, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Reader:
    """Where a record is read from, and what a wrong value does: strict (``problems`` None) raises
    ``error`` (a ``ResultsError`` naming ``where``, or a ``RowError`` for a line), lenient drops the
    key and says so in ``problems``. A record a newer specbench wrote (its ``schema_version`` above the
    one this version reads) is refused, unless ``newer`` collects it: then it is read with what this
    version knows, and said there (the history's reader: a CI's pinned version reads newer runs)."""

    where: str
    problems: list[str] | None = None
    line: bool = False
    newer: list[str] | None = None

    @property
    def nonfinite_null(self) -> bool:
        """A file's NaN/±Infinity reads as null where no range is declared (JSON has neither: a value that
        is not finite was not measured); a JSON line holds none, so there it is a wrong value."""
        return not self.line

    def wrong(self, path: str, value: Any, expected: str) -> None:
        if self.line:
            raise RowError(f"{path}: expected {expected}, got {show(value)}")
        line = f"{self.where}: {path}: expected {expected}, got {show(value)}"
        if self.problems is None:
            raise ResultsError(line)
        self.problems.append(line + "; ignored")

    def missing(self, path: str) -> None:
        if self.line:
            raise RowError(f"no {path!r}")
        raise ResultsError(f"{self.where}: {path}: missing")


def key(doc: str = "", *, default: Any = None, factory: Callable[[], Any] | None = None, required: bool = False,
        low: float | None = None, high: float | None = None, max_len: int | None = None, length: int | None = None,
        omit_none: bool = False, unit: str = "") -> Any:
    """A record field with its meaning (``doc``, for docs/records.md), its ``unit`` (ms, tokens/s, share: a
    fraction of 1, …) and its range: numbers (and a list's numbers) within [``low``, ``high``], text and lists
    at most ``max_len`` long, a list of exactly ``length``. ``required``: no default."""
    meta = {"doc": doc, "low": low, "high": high, "max_len": max_len, "length": length, "omit_none": omit_none,
            "unit": unit}
    if required:
        return field(metadata=meta)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def type_name(hint: Any) -> str:
    """What a type hint holds, as an error line says it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not _NONE)
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        inner = type_name(args[0])
        if typing.get_origin(args[0]) in (Union, types.UnionType):  # a list of texts or objects
            return "a list of " + " or ".join(f"{type_name(a).removeprefix('an ').removeprefix('a ')}s"
                                              for a in typing.get_args(args[0]) if a is not _NONE)
        if inner.startswith("a list of "):
            return "a list of lists of " + inner.removeprefix("a list of ")
        return f"a list of {inner.removeprefix('an ').removeprefix('a ')}s"
    if origin is tuple:
        return f"[{', '.join(type_name(a) for a in args)}]"
    if origin is dict or (isinstance(hint, type) and hasattr(hint, "from_dict")):
        return "an object"
    return {str: "text", int: "an integer", float: "a number", bool: "true/false"}.get(hint, "a value")


_SCALAR: dict[Any, Callable[[Any], bool]] = {
    bool: lambda v: isinstance(v, bool), int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: is_number, str: lambda v: isinstance(v, str)}
ValueReader = Callable[[Any, str, Reader], Any]
_COMPILED: dict[Any, ValueReader] = {}


def value_reader(hint: Any) -> ValueReader:
    """The function that reads a value as ``hint`` holds it (a nested record read, a JSON pair as a
    tuple) or raises ``WrongValue``: built once per hint, since a run reads 10⁵ lines and more."""
    if hint not in _COMPILED:
        _COMPILED[hint] = _compile(hint)
    return _COMPILED[hint]


def _compile(hint: Any) -> ValueReader:
    expected = type_name(hint)
    scalar = _SCALAR.get(hint)
    if hint is Any:
        return lambda v, path, reader: finite(v) if reader.nonfinite_null else v
    if scalar is not None:
        def read_scalar(v: Any, path: str, reader: Reader) -> Any:
            if not scalar(v):
                raise WrongValue(expected)
            return v
        return read_scalar
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        options = [value_reader(a) for a in args if a is not _NONE]

        def read_union(v: Any, path: str, reader: Reader) -> Any:
            if _NONE in args and (v is None or (reader.nonfinite_null and not_finite(v))):
                return None
            for option in options:
                try:
                    return option(v, path, reader)
                except WrongValue:
                    pass
            raise WrongValue(expected)
        return read_union
    if isinstance(hint, type) and (hasattr(hint, "specs") or hasattr(hint, "from_dict")):
        record: Any = hint
        nested = hasattr(hint, "specs")  # a Record: read with the same reader, its path continued

        def read_object(v: Any, path: str, reader: Reader) -> Any:
            if not isinstance(v, dict):
                raise WrongValue("an object")
            if nested:
                return record.read(v, reader, path + ".")
            return record.from_dict(finite(v) if reader.nonfinite_null else v)
        return read_object
    if origin in (list, tuple):
        return _compile_list(hint, origin, args, expected)
    if origin is dict:
        item_reader = value_reader(args[1])

        def read_dict(v: Any, path: str, reader: Reader) -> Any:
            if not isinstance(v, dict):
                raise WrongValue("an object")
            try:
                return {k: item_reader(x, f"{path}.{k}", reader) for k, x in v.items()}
            except WrongValue as err:
                raise WrongValue(f"an object of {err.expected.removeprefix('an ').removeprefix('a ')} values") from None
        return read_dict
    return lambda v, path, reader: _raise(expected)


def _raise(expected: str) -> Any:
    raise WrongValue(expected)


def _compile_list(hint: Any, origin: Any, args: tuple[Any, ...], expected: str) -> ValueReader:
    variadic = origin is list or (len(args) == 2 and args[1] is Ellipsis)
    make = list if origin is list else tuple
    item = _SCALAR.get(args[0]) if variadic else None
    if item is not None:  # a list of numbers: one pass, no call per item (requests carry thousands)
        def read_numbers(v: Any, path: str, reader: Reader) -> Any:
            if not isinstance(v, list) or not all(item(x) for x in v):
                raise WrongValue(expected)
            return make(v)
        return read_numbers
    readers = [value_reader(a) for a in (args[:1] if variadic else args)]

    def read_items(v: Any, path: str, reader: Reader) -> Any:
        if not isinstance(v, list) or (not variadic and len(v) != len(args)):
            raise WrongValue(expected)
        try:
            return make(readers[0 if variadic else i](x, f"{path}[{i}]", reader) for i, x in enumerate(v))
        except WrongValue:
            raise WrongValue(expected) from None
    return read_items


def not_finite(value: Any) -> bool:
    """NaN or ±Infinity (what ``json`` reads from ``NaN``, ``Infinity``, ``1e999``)."""
    return isinstance(value, float) and not math.isfinite(value)


def read_value(value: Any, hint: Any, path: str, reader: Reader) -> Any:
    """``value`` as ``hint`` holds it; else ``WrongValue``."""
    return value_reader(hint)(value, path, reader)


def _range(low: float | None, high: float | None) -> str:
    if high is None:
        return f"≥ {low:g}"
    return f"in [{'' if low is None else f'{low:g}'}, {high:g}]"


def _in_range(value: Any, meta: typing.Mapping[str, Any]) -> str | None:
    """What ``value`` should have been when outside its field's range, else None."""
    low, high, max_len, length = meta.get("low"), meta.get("high"), meta.get("max_len"), meta.get("length")
    if isinstance(value, (list, tuple)):
        if length is not None and len(value) != length:
            return f"a list of {length} items"
        if max_len is not None and len(value) > max_len:
            return f"a list of at most {max_len} items"
        if (low is not None or high is not None) and any(
                is_number(v) and ((low is not None and v < low) or (high is not None and v > high)) for v in value):
            return f"a list of numbers {_range(low, high)}"
    elif isinstance(value, str):
        if max_len is not None and len(value) > max_len:
            return f"at most {max_len} characters"
    elif is_number(value) and not isinstance(value, bool):
        if (low is not None and value < low) or (high is not None and value > high):
            return f"a number {_range(low, high)}"
    return None


def field_reader(hint: Any, meta: typing.Mapping[str, Any]) -> ValueReader:
    """``value_reader(hint)`` and the field's range in one function; a number in range takes one test.
    Where a range is declared, NaN/±Infinity (alone or in a list) is a wrong value, never null: a
    bound that is not a number cannot be checked."""
    base = value_reader(hint)
    if all(meta.get(k) is None for k in ("low", "high", "max_len", "length")):
        return base
    low, high = meta.get("low"), meta.get("high")
    ranged = low is not None or high is not None
    # the largest finite floats, not ±inf: Infinity must fail the one-test path too
    lo, hi = -sys.float_info.max if low is None else low, sys.float_info.max if high is None else high
    fast = next((t for t in (int, float) if hint in (t, t | None)), None)
    ints = typing.get_origin(hint) if hint in (tuple[int, ...], list[int]) else None
    length, most = meta.get("length"), meta.get("max_len") or math.inf

    def read_in_range(v: Any, path: str, reader: Reader) -> Any:
        if type(v) is fast and lo <= v <= hi:
            return v
        if ints is not None and type(v) is list and (length is None or len(v) == length) and len(v) <= most \
                and all(type(x) is int and lo <= x <= hi for x in v):
            return ints(v)
        if ranged and (not_finite(v) or (isinstance(v, list) and any(not_finite(x) for x in v))):
            raise WrongValue(f"{'a list of numbers' if isinstance(v, list) else 'a number'} {_range(low, high)}")
        v = base(v, path, reader)
        expected = None if v is None else _in_range(v, meta)
        if expected:
            raise WrongValue(expected)
        return v
    return read_in_range
