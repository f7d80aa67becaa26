"""The one typed-record machinery: every JSON file and JSON line specbench writes or reads is a
``Record`` subclass, and from that one declaration come its strict reader, its writer, its schema
version and its row of ``docs/records.md`` (``schemas/docs.py``).

A ``Record`` is a dataclass whose fields are the keys this version knows, each annotated with the
JSON type it holds and, through ``key(...)``, its meaning and its range; every other key (a newer
version's) is kept in ``unknown`` and written back as it was. ``to_dict`` gives the keys in the
order the object had them when read, then the keys set since, in the order they were first set —
as a ``dict`` would. So a file read and written back is the same bytes.

A field that is None is absent (setting it to None removes its key), except a key read as null,
which stays null; a record with ``KEEP_NONE`` writes every field, null or not (a field declared
``key(omit_none=True)`` is still left out while None).

Reading is strict or lenient: a value of the wrong type or outside its range is a one-line error
naming where and the key's path, or — with a ``problems`` list — dropped (or, ``Reader.repair`` =
"null", kept as null) and said there.

Versions: ``VERSION`` 1 is every file written so far and is implied by the absence of
``schema_version`` (so files stay the bytes they were); a later version writes the key first, and a
reader refuses a file whose ``schema_version`` is newer than the one it knows.
"""

from __future__ import annotations

import copy
import json
import math
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

from ..errors import ResultsError
from ..util.numbers import finite, is_number

R = TypeVar("R", bound="Record")
_NONE = type(None)
VERSION_KEY = "schema_version"


class RowError(ValueError):
    """Why one JSON line cannot be read as its record: one short reason naming the key."""


class _Wrong(Exception):
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
    key or (``repair`` "null") keeps it as null, and says so in ``problems``."""

    where: str
    problems: list[str] | None = None
    repair: str = "drop"
    line: bool = False

    def wrong(self, path: str, value: Any, expected: str) -> None:
        if self.line:
            raise RowError(f"{path}: expected {expected}, got {show(value)}")
        line = f"{self.where}: {path}: expected {expected}, got {show(value)}"
        if self.problems is None:
            raise ResultsError(line)
        self.problems.append(line + ("; shown as —" if self.repair == "null" else "; ignored"))

    def missing(self, path: str) -> None:
        if self.line:
            raise RowError(f"no {path!r}")
        raise ResultsError(f"{self.where}: {path}: missing")


def key(doc: str = "", *, default: Any = None, factory: Callable[[], Any] | None = None, required: bool = False,
        low: float | None = None, high: float | None = None, max_len: int | None = None, length: int | None = None,
        omit_none: bool = False) -> Any:
    """A record field with its meaning (``doc``, for docs/records.md) and its range: numbers (and a
    list's numbers) within [``low``, ``high``], text and lists at most ``max_len`` long, a list of
    exactly ``length``. ``required``: no default."""
    meta = {"doc": doc, "low": low, "high": high, "max_len": max_len, "length": length, "omit_none": omit_none}
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
        return f"a list of {type_name(args[0])}s".replace("a list of an ", "a list of ").replace("a list of a ", "a list of ")
    if origin is tuple:
        return f"[{', '.join(type_name(a) for a in args)}]"
    if origin is dict or (isinstance(hint, type) and (issubclass(hint, Record) or hasattr(hint, "from_dict"))):
        return "an object"
    return {str: "text", int: "an integer", float: "a number", bool: "true/false"}.get(hint, "a value")


_SCALAR: dict[Any, Callable[[Any], bool]] = {
    bool: lambda v: isinstance(v, bool), int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: is_number, str: lambda v: isinstance(v, str)}
ValueReader = Callable[[Any, str, Reader], Any]
_COMPILED: dict[Any, ValueReader] = {}


def value_reader(hint: Any) -> ValueReader:
    """The function that reads a value as ``hint`` holds it (a nested record read, a JSON pair as a
    tuple) or raises ``_Wrong``: built once per hint, since a run reads 10⁵ lines and more."""
    if hint not in _COMPILED:
        _COMPILED[hint] = _compile(hint)
    return _COMPILED[hint]


def _compile(hint: Any) -> ValueReader:
    expected = type_name(hint)
    scalar = _SCALAR.get(hint)
    if hint is Any:
        return lambda v, path, reader: v
    if scalar is not None:
        def read_scalar(v: Any, path: str, reader: Reader) -> Any:
            if not scalar(v):
                raise _Wrong(expected)
            return v
        return read_scalar
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        options = [value_reader(a) for a in args if a is not _NONE]

        def read_union(v: Any, path: str, reader: Reader) -> Any:
            if v is None and _NONE in args:
                return None
            for option in options:
                try:
                    return option(v, path, reader)
                except _Wrong:
                    pass
            raise _Wrong(expected)
        return read_union
    if isinstance(hint, type) and (issubclass(hint, Record) or hasattr(hint, "from_dict")):
        record: Any = hint
        nested = issubclass(hint, Record)

        def read_object(v: Any, path: str, reader: Reader) -> Any:
            if not isinstance(v, dict):
                raise _Wrong("an object")
            return record.read(v, reader, path + ".") if nested else record.from_dict(v)
        return read_object
    if origin in (list, tuple):
        return _compile_list(hint, origin, args, expected)
    if origin is dict:
        item_reader = value_reader(args[1])

        def read_dict(v: Any, path: str, reader: Reader) -> Any:
            if not isinstance(v, dict):
                raise _Wrong("an object")
            try:
                return {k: item_reader(x, f"{path}.{k}", reader) for k, x in v.items()}
            except _Wrong as err:
                raise _Wrong(f"an object of {err.expected.removeprefix('an ').removeprefix('a ')} values") from None
        return read_dict
    return lambda v, path, reader: _raise(expected)


def _raise(expected: str) -> Any:
    raise _Wrong(expected)


def _compile_list(hint: Any, origin: Any, args: tuple[Any, ...], expected: str) -> ValueReader:
    variadic = origin is list or (len(args) == 2 and args[1] is Ellipsis)
    make = list if origin is list else tuple
    item = _SCALAR.get(args[0]) if variadic else None
    if item is not None:  # a list of numbers: one pass, no call per item (requests carry thousands)
        def read_numbers(v: Any, path: str, reader: Reader) -> Any:
            if not isinstance(v, list) or not all(item(x) for x in v):
                raise _Wrong(expected)
            return make(v)
        return read_numbers
    readers = [value_reader(a) for a in (args[:1] if variadic else args)]

    def read_items(v: Any, path: str, reader: Reader) -> Any:
        if not isinstance(v, list) or (not variadic and len(v) != len(args)):
            raise _Wrong(expected)
        try:
            return make(readers[0 if variadic else i](x, f"{path}[{i}]", reader) for i, x in enumerate(v))
        except _Wrong:
            raise _Wrong(expected) from None
    return read_items


def read_value(value: Any, hint: Any, path: str, reader: Reader) -> Any:
    """``value`` as ``hint`` holds it; else ``_Wrong``."""
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


def plain(value: Any) -> Any:
    """A record (at any depth) as JSON data; tuples as lists."""
    if isinstance(value, Record) or (hasattr(value, "to_dict") and not isinstance(value, type)):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class FieldSpec:
    """One key of a record as its reader, writer and docs see it."""

    name: str
    hint: Any
    required: bool
    meta: typing.Mapping[str, Any]
    read: ValueReader
    nullable: bool
    ranged: bool
    default: Any = None
    factory: Callable[[], Any] | None = None

    @property
    def doc(self) -> str:
        return str(self.meta.get("doc") or "")

    def empty(self) -> Any:
        return self.factory() if self.factory is not None else self.default


def _field_reader(hint: Any, meta: typing.Mapping[str, Any]) -> ValueReader:
    """``value_reader(hint)`` and the field's range in one function; a number in range takes one test."""
    base = value_reader(hint)
    if all(meta.get(k) is None for k in ("low", "high", "max_len", "length")):
        return base
    low, high = meta.get("low"), meta.get("high")
    lo, hi = -math.inf if low is None else low, math.inf if high is None else high
    fast = next((t for t in (int, float) if hint in (t, t | None)), None)
    ints = typing.get_origin(hint) if hint in (tuple[int, ...], list[int]) else None
    length, most = meta.get("length"), meta.get("max_len") or math.inf

    def read_in_range(v: Any, path: str, reader: Reader) -> Any:
        if type(v) is fast and lo <= v <= hi:
            return v
        if ints is not None and type(v) is list and (length is None or len(v) == length) and len(v) <= most \
                and all(type(x) is int and lo <= x <= hi for x in v):
            return ints(v)
        v = base(v, path, reader)
        expected = None if v is None else _in_range(v, meta)
        if expected:
            raise _Wrong(expected)
        return v
    return read_in_range


def _spec(f: Any, hint: Any) -> FieldSpec:
    ranged = any(f.metadata.get(k) is not None for k in ("low", "high", "max_len", "length"))
    return FieldSpec(f.name, hint, f.default is MISSING and f.default_factory is MISSING, f.metadata,
                     _field_reader(hint, f.metadata), hint is Any or _NONE in typing.get_args(hint), ranged,
                     None if f.default is MISSING else f.default,
                     None if f.default_factory is MISSING else f.default_factory)


_SPECS: dict[type, dict[str, FieldSpec]] = {}


@dataclass
class Record:
    """A JSON object as a typed dataclass; see the module's docstring."""

    KEEP_NONE: ClassVar[bool] = False
    VERSION: ClassVar[int] = 1
    #: what the record is, for docs/records.md: the file or line it is
    FILE: ClassVar[str] = ""
    unknown: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        keys = self.__dict__.setdefault("_keys", {})
        if self.VERSION > 1 and VERSION_KEY not in self.unknown:
            self.unknown[VERSION_KEY] = self.VERSION
            self.__dict__["_keys"] = keys = {VERSION_KEY: None, **keys}
        keys.update(dict.fromkeys(k for k in self.unknown if k not in keys))

    @classmethod
    def specs(cls) -> dict[str, FieldSpec]:
        """JSON key → its spec, one per field (``unknown`` is not a key), in declaration order."""
        if cls not in _SPECS:
            resolved = typing.get_type_hints(cls)
            _SPECS[cls] = {f.name: _spec(f, resolved[f.name]) for f in fields(cls) if f.name != "unknown"}
        return _SPECS[cls]

    @classmethod
    def hints(cls) -> dict[str, Any]:
        """JSON key → type hint, one per field."""
        return {name: spec.hint for name, spec in cls.specs().items()}

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        spec = self.specs().get(name)
        if spec is not None:
            keys = self.__dict__.setdefault("_keys", {})
            if value is None and (not self.KEEP_NONE or spec.meta.get("omit_none")):
                keys.pop(name, None)
            elif name not in keys:
                keys[name] = None

    @classmethod
    def read(cls: type[R], data: dict[str, Any], reader: Reader, prefix: str = "") -> R:
        """A record from a JSON object, its key order kept; a wrong value goes to ``reader``."""
        specs = cls.specs()
        known: dict[str, Any] = {}
        unknown: dict[str, Any] = {}
        keys: dict[str, None] = {}
        version = data.get(VERSION_KEY)
        if isinstance(version, int) and version > cls.VERSION:
            raise ResultsError(f"{reader.where}: {prefix}{VERSION_KEY} {version}: written by a newer specbench "
                               f"(this one reads {cls.FILE or cls.__name__} up to version {cls.VERSION}): upgrade specbench")
        for name, value in data.items():
            spec = specs.get(name)
            if spec is None:
                unknown[name] = value
            elif value is None and reader.line and not spec.nullable:
                if spec.required:
                    reader.wrong(f"{prefix}{name}", value, type_name(spec.hint))
                continue  # a line's null where no null belongs: the field's default
            elif value is not None:
                try:
                    value = spec.read(value, prefix + name if prefix else name, reader)
                except _Wrong as err:
                    reader.wrong(f"{prefix}{name}", value, err.expected)
                    if reader.repair != "null":
                        continue
                    value = None
                known[name] = value
            else:
                known[name] = value
            keys[name] = None
        for spec in specs.values():
            if spec.required and spec.name not in known:
                reader.missing(f"{prefix}{spec.name}")
        obj = cls.__new__(cls)  # the fields set directly: no __setattr__ key tracking, no __post_init__
        state = obj.__dict__
        for name, spec in specs.items():
            state[name] = known[name] if name in known else spec.empty()
        state["unknown"], state["_keys"] = unknown, keys
        if reader.line:
            why = obj.problem()
            if why:
                raise RowError(why)
        return obj

    def problem(self) -> str | None:
        """Why a record whose every key is of its type still cannot be (a rule across keys), else None."""
        return None

    @classmethod
    def from_dict(cls: type[R], data: Any, where: str | Path = "", problems: list[str] | None = None) -> R:
        """``read`` of JSON data (NaN/±Infinity read as null); not an object is a ``ResultsError``."""
        if not isinstance(data, dict):
            raise ResultsError(f"{where}: expected a JSON object, got {type(data).__name__}")
        return cls.read(finite(data), Reader(str(where), problems))

    @classmethod
    def from_line(cls: type[R], data: Any) -> R:
        """A record from one parsed JSON line, strictly: anything wrong is a ``RowError`` with the reason."""
        if not isinstance(data, dict):
            raise RowError(f"expected a JSON object, got {type(data).__name__}")
        return cls.read(data, Reader("", line=True))

    def keys(self) -> list[str]:
        """The keys ``to_dict`` writes, in its order."""
        specs = self.specs()
        return [k for k in self.__dict__.get("_keys", {}) if k in specs or k in self.unknown]

    def to_dict(self) -> dict[str, Any]:
        specs = self.specs()
        return {k: plain(getattr(self, k) if k in specs else self.unknown[k]) for k in self.keys()}

    def set(self, key: str, value: Any) -> None:
        """``key`` set by name: its field, or an unknown key (written after the others)."""
        if key in self.specs():
            setattr(self, key, value)
            return
        self.unknown[key] = value
        self.__dict__.setdefault("_keys", {}).setdefault(key, None)

    def update(self, values: typing.Mapping[str, Any]) -> None:
        for name, value in values.items():
            self.set(name, value)

    def grown(self, key: str, empty: Any) -> Any:
        """The field ``key``, set to ``empty`` first when absent (a dict's ``setdefault``)."""
        if getattr(self, key) is None:
            setattr(self, key, empty)
        return getattr(self, key)

    def copy(self: R) -> R:
        return copy.deepcopy(self)
