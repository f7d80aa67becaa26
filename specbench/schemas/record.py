"""Typed JSON records that write back the bytes they were read from: the machinery under ``RunMeta``
(meta.json) and the tune analysis stored in it.

A ``Record`` is a dataclass whose fields are the keys this version knows, each annotated with the
JSON type it holds; every other key (a newer version's) is kept in ``unknown`` and written back as
it was. ``to_dict`` gives the keys in the order the object had them when read, then the keys set
since, in the order they were first set — as a ``dict`` would. So a file read and written back is
the same bytes, and a run writes meta.json's keys in the order its events set them (a resumed or
a parallel run orders them differently from a fresh one, and each file keeps the order it has).

A field that is None is absent (setting it to None removes its key), except a key read as null,
which stays null; a record with ``KEEP_NONE`` always writes every field, null or not.

Reading is strict or lenient: a value of the wrong type is a one-line ``ResultsError`` naming the
file and the key's path, or — with a ``problems`` list — dropped and said there (the report shows
what it can without it).
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

from ..errors import ResultsError
from ..util.numbers import finite, is_number
from .row_read import show

R = TypeVar("R", bound="Record")
_NONE = type(None)
_HINTS: dict[type, dict[str, Any]] = {}


class _Wrong(Exception):
    """A value that is not of its key's type; ``expected`` says what it should have been."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


@dataclass
class Reader:
    """Where a record is read from, and what a wrong value does: strict (``problems`` None) raises."""

    where: str
    problems: list[str] | None = None

    def wrong(self, path: str, value: Any, expected: str) -> None:
        line = f"{self.where}: {path}: expected {expected}, got {show(value)}"
        if self.problems is None:
            raise ResultsError(line)
        self.problems.append(line + "; ignored")


def type_name(hint: Any) -> str:
    """What a type hint holds, as an error line says it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not _NONE)
    if origin is list:
        return f"a list of {type_name(args[0])}s".replace("a list of an ", "a list of ").replace("a list of a ", "a list of ")
    if origin is tuple:
        return f"[{', '.join(type_name(a) for a in args)}]"
    if origin is dict or (isinstance(hint, type) and issubclass(hint, Record)):
        return "an object"
    return {str: "text", int: "an integer", float: "a number", bool: "true/false"}.get(hint, "a value")


def read_value(value: Any, hint: Any, path: str, reader: Reader) -> Any:
    """``value`` as ``hint`` holds it (a nested record read, a JSON pair as a tuple); else ``_Wrong``."""
    if hint is Any:
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
    if origin in (list, tuple):
        if not isinstance(value, list) or (origin is tuple and len(value) != len(args)):
            raise _Wrong(type_name(hint))
        try:
            items = [read_value(v, args[0] if origin is list else args[i], f"{path}[{i}]", reader)
                     for i, v in enumerate(value)]
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
    checks: dict[type, Callable[[Any], bool]] = {
        bool: lambda v: isinstance(v, bool), int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: is_number, str: lambda v: isinstance(v, str)}
    ok = checks[hint](value)
    if not ok:
        raise _Wrong(type_name(hint))
    return value


def plain(value: Any) -> Any:
    """A record (at any depth) as JSON data; tuples as lists."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass
class Record:
    """A JSON object as a typed dataclass; see the module's docstring."""

    KEEP_NONE: ClassVar[bool] = False
    unknown: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        keys = self.__dict__.setdefault("_keys", [])
        keys += [k for k in self.unknown if k not in keys]

    @classmethod
    def hints(cls) -> dict[str, Any]:
        """JSON key → type hint, one per field (``unknown`` is not a key)."""
        if cls not in _HINTS:
            resolved = typing.get_type_hints(cls)
            _HINTS[cls] = {f.name: resolved[f.name] for f in fields(cls) if f.name != "unknown"}
        return _HINTS[cls]

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in self.hints():
            keys = self.__dict__.setdefault("_keys", [])
            if value is None and not self.KEEP_NONE:
                if name in keys:
                    keys.remove(name)
            elif name not in keys:
                keys.append(name)

    @classmethod
    def read(cls: type[R], data: dict[str, Any], reader: Reader, prefix: str = "") -> R:
        """A record from a JSON object, its key order kept; a wrong value goes to ``reader``."""
        hints, known, unknown, keys = cls.hints(), {}, {}, []
        for key, value in data.items():
            if key in hints:
                if value is not None:
                    try:
                        value = read_value(value, hints[key], f"{prefix}{key}", reader)
                    except _Wrong as err:
                        reader.wrong(f"{prefix}{key}", value, err.expected)
                        continue
                known[key] = value
            else:
                unknown[key] = value
            keys.append(key)
        for f in fields(cls):
            if f.name not in known and f.name != "unknown" and f.default is MISSING and f.default_factory is MISSING:
                raise ResultsError(f"{reader.where}: {prefix}{f.name}: missing")
        obj = cls(**known, unknown=unknown)
        obj.__dict__["_keys"] = keys
        return obj

    @classmethod
    def from_dict(cls: type[R], data: Any, where: str | Path = "", problems: list[str] | None = None) -> R:
        """``read`` of JSON data (NaN/±Infinity read as null); not an object is a ``ResultsError``."""
        if not isinstance(data, dict):
            raise ResultsError(f"{where}: expected a JSON object, got {type(data).__name__}")
        return cls.read(finite(data), Reader(str(where), problems))

    def keys(self) -> list[str]:
        """The keys ``to_dict`` writes, in its order."""
        return [k for k in self.__dict__.get("_keys", []) if k in self.hints() or k in self.unknown]

    def to_dict(self) -> dict[str, Any]:
        hints = self.hints()
        return {k: plain(getattr(self, k) if k in hints else self.unknown[k]) for k in self.keys()}

    def set(self, key: str, value: Any) -> None:
        """``key`` set by name: its field, or an unknown key (written after the others)."""
        if key in self.hints():
            setattr(self, key, value)
            return
        self.unknown[key] = value
        if key not in self.__dict__.setdefault("_keys", []):
            self.__dict__["_keys"].append(key)

    def update(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            self.set(key, value)

    def grown(self, key: str, empty: Any) -> Any:
        """The field ``key``, set to ``empty`` first when absent (a dict's ``setdefault``)."""
        if getattr(self, key) is None:
            setattr(self, key, empty)
        return getattr(self, key)

    def copy(self: R) -> R:
        return copy.deepcopy(self)
