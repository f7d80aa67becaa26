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
        low: float | None = None, high: float | None = None, max_len: int | None = None,
        omit_none: bool = False) -> Any:
    """A record field with its meaning (``doc``, for docs/records.md) and its range: numbers within
    [``low``, ``high``], text and lists at most ``max_len`` long. ``required``: no default."""
    meta = {"doc": doc, "low": low, "high": high, "max_len": max_len, "omit_none": omit_none}
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


def read_value(value: Any, hint: Any, path: str, reader: Reader) -> Any:
    """``value`` as ``hint`` holds it (a nested record read, a JSON pair as a tuple); else ``_Wrong``."""
    if hint is Any:
        return value
    scalar = _SCALAR.get(hint)
    if scalar is not None:
        if not scalar(value):
            raise _Wrong(type_name(hint))
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and _NONE in args:
            return None
        for arg in args:
            if arg is not _NONE:
                try:
                    return read_value(value, arg, path, reader)
                except _Wrong:
                    pass
        raise _Wrong(type_name(hint))
    if isinstance(hint, type) and issubclass(hint, Record):
        if not isinstance(value, dict):
            raise _Wrong("an object")
        return hint.read(value, reader, path + ".")
    if isinstance(hint, type) and hasattr(hint, "from_dict"):
        if not isinstance(value, dict):
            raise _Wrong("an object")
        return hint.from_dict(value)
    if origin in (list, tuple):
        variadic = origin is list or (len(args) == 2 and args[1] is Ellipsis)
        if not isinstance(value, list) or (not variadic and len(value) != len(args)):
            raise _Wrong(type_name(hint))
        item = _SCALAR.get(args[0]) if variadic else None
        if item is not None:  # a list of numbers: one pass, no recursion (requests carry thousands)
            if not all(item(v) for v in value):
                raise _Wrong(type_name(hint))
            return list(value) if origin is list else tuple(value)
        try:
            items = [read_value(v, args[0] if variadic else args[i], f"{path}[{i}]", reader) for i, v in enumerate(value)]
        except _Wrong:
            raise _Wrong(type_name(hint)) from None
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise _Wrong("an object")
        try:
            return {k: read_value(v, args[1], f"{path}.{k}", reader) for k, v in value.items()}
        except _Wrong as err:
            raise _Wrong(f"an object of {err.expected.removeprefix('an ').removeprefix('a ')} values") from None
    raise _Wrong(type_name(hint))


def _in_range(value: Any, meta: typing.Mapping[str, Any]) -> str | None:
    """What ``value`` should have been when outside its field's range, else None."""
    low, high, max_len = meta.get("low"), meta.get("high"), meta.get("max_len")
    if is_number(value) and not isinstance(value, bool):
        if (low is not None and value < low) or (high is not None and value > high):
            return f"a number in [{'' if low is None else f'{low:g}'}, {'' if high is None else f'{high:g}'}]"
    elif max_len is not None and isinstance(value, (str, list, tuple)) and len(value) > max_len:
        return f"at most {max_len} {'characters' if isinstance(value, str) else 'items'}"
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

    @property
    def doc(self) -> str:
        return str(self.meta.get("doc") or "")


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
            _SPECS[cls] = {f.name: FieldSpec(f.name, resolved[f.name], f.default is MISSING and f.default_factory is MISSING,
                                             f.metadata) for f in fields(cls) if f.name != "unknown"}
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
            elif value is not None:
                try:
                    value = read_value(value, spec.hint, f"{prefix}{name}", reader)
                    expected = _in_range(value, spec.meta) if spec.meta else None
                    if expected:
                        raise _Wrong(expected)
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
        obj = cls(**known, unknown=unknown)
        obj.__dict__["_keys"] = keys
        return obj

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
