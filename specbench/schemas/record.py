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
naming where and the key's path, or — with a ``problems`` list — dropped and said there.

Versions: ``VERSION`` 1 is every file written so far and is implied by the absence of
``schema_version`` (so files stay the bytes they were); a later version writes the key first, and a
strict reader refuses a file whose ``schema_version`` is newer than the one it knows; a reader given a
``newer`` list (the report's, for a history) reads it with what it knows and says so there, and
``unknown_paths`` lists the keys it kept without reading.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..errors import ResultsError
from ..util.jsonio import dumps
from ..util.numbers import finite
from .record_values import (
    Reader,
    RowError,
    ValueReader,
    WrongValue,
    field_reader,
    key,
    not_finite,
    read_value,
    show,
    type_name,
)

__all__ = ["VERSION_KEY", "FieldSpec", "Reader", "Record", "RowError", "key", "plain", "read_value", "show", "type_name",
           "unknown_paths"]

R = TypeVar("R", bound="Record")
VERSION_KEY = "schema_version"


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
    default: Any = None
    factory: Callable[[], Any] | None = None

    @property
    def doc(self) -> str:
        return str(self.meta.get("doc") or "")

    @property
    def unit(self) -> str:
        return str(self.meta.get("unit") or "")

    @property
    def ranged(self) -> bool:
        """A number range is declared (``key(low=, high=)``): NaN/±Infinity there is refused, not null."""
        return self.meta.get("low") is not None or self.meta.get("high") is not None

    def empty(self) -> Any:
        return self.factory() if self.factory is not None else self.default


def _spec(f: Any, hint: Any) -> FieldSpec:
    return FieldSpec(f.name, hint, f.default is MISSING and f.default_factory is MISSING, f.metadata,
                     field_reader(hint, f.metadata), hint is Any or type(None) in typing.get_args(hint),
                     None if f.default is MISSING else f.default,
                     None if f.default_factory is MISSING else f.default_factory)


_SPECS: dict[type, dict[str, FieldSpec]] = {}


def read_keys(specs: dict[str, FieldSpec], data: dict[str, Any], reader: Reader,
              prefix: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, None]]:
    """A JSON object's keys as a record's fields (read), its unknown keys, and the order it had them."""
    known: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    keys: dict[str, None] = {}
    nan_null = reader.nonfinite_null
    for name, value in data.items():
        spec = specs.get(name)
        if spec is None:
            unknown[name] = finite(value) if nan_null else value
            keys[name] = None
            continue
        if nan_null and not_finite(value) and not spec.ranged:
            value = None  # NaN/±Infinity where no range is declared: not measured
        if value is None and reader.line and not spec.nullable:
            if spec.required:
                reader.wrong(f"{prefix}{name}", value, type_name(spec.hint))
            continue  # a line's null where no null belongs: the field's default
        elif value is not None:
            try:
                value = spec.read(value, prefix + name if prefix else name, reader)
            except WrongValue as err:
                reader.wrong(f"{prefix}{name}", value, err.expected)
                continue
            known[name] = value
        else:
            known[name] = value
        keys[name] = None
    for spec in specs.values():
        if spec.required and spec.name not in known:
            reader.missing(f"{prefix}{spec.name}")
    return known, unknown, keys


def check_version(cls: type[Record], version: Any, reader: Reader, prefix: str) -> None:
    """A file a newer specbench wrote (``schema_version`` above ``cls.VERSION``): refused in one line, or
    said in ``reader.newer`` when the reader collects it."""
    if isinstance(version, int) and not isinstance(version, bool) and version > cls.VERSION:
        what = cls.FILE or cls.__name__
        if reader.newer is None:
            raise ResultsError(f"{reader.where}: {prefix}{VERSION_KEY} {version}: written by a newer specbench "
                               f"(this one reads {what} up to version {cls.VERSION}): upgrade specbench")
        reader.newer.append(f"{prefix}{VERSION_KEY} {version} (this version reads {what} up to {cls.VERSION})")


@dataclass
class Record:
    """A JSON object as a typed dataclass; see the module's docstring."""

    KEEP_NONE: ClassVar[bool] = False
    VERSION: ClassVar[int] = 1
    #: keys beyond the fields are part of what it holds (a suite as written, a fingerprint compared whole),
    #: never a newer version's: ``unknown_paths`` leaves them out
    OPEN: ClassVar[bool] = False
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
        check_version(cls, data.get(VERSION_KEY), reader, prefix)
        known, unknown, keys = read_keys(cls.specs(), data, reader, prefix)
        obj = cls.empty()  # the fields set directly: no __setattr__ key tracking, no __post_init__
        obj.__dict__.update(known, unknown=unknown, _keys=keys)
        if reader.line:
            why = obj.problem()
            if why:
                raise RowError(why)
        return obj

    def problem(self) -> str | None:
        """Why a record whose every key is of its type still cannot be (a rule across keys), else None."""
        return None

    @classmethod
    def from_dict(cls: type[R], data: Any, where: str | Path = "", problems: list[str] | None = None,
                  newer: list[str] | None = None) -> R:
        """``read`` of JSON data (NaN/±Infinity read as null, except where a range is declared: a wrong
        value there); not an object is a ``ResultsError``; ``newer``: see ``Reader``."""
        if not isinstance(data, dict):
            raise ResultsError(f"{where}: expected a JSON object, got {type(data).__name__}")
        return cls.read(data, Reader(str(where), problems, newer=newer))

    @classmethod
    def from_line(cls: type[R], data: Any) -> R:
        """A record from one parsed JSON line, strictly: anything wrong is a ``RowError`` with the reason."""
        if not isinstance(data, dict):
            raise RowError(f"expected a JSON object, got {type(data).__name__}")
        return cls.read(data, Reader("", line=True))

    @classmethod
    def empty(cls: type[R]) -> R:
        """A record with every field at its default and no key yet: each key set afterwards joins it."""
        obj = cls.__new__(cls)
        obj.__dict__.update({name: spec.empty() for name, spec in cls.specs().items()}, unknown={}, _keys={})
        return obj

    def has(self, key: str) -> bool:
        """Whether ``key`` is one the record carries (``to_dict`` writes it)."""
        return key in self.__dict__.get("_keys", {}) and (key in self.specs() or key in self.unknown)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (a field or a kept unknown key), ``default`` when the record does not carry it."""
        if not self.has(key):
            return default
        return getattr(self, key) if key in self.specs() else self.unknown[key]

    def keys(self) -> list[str]:
        """The keys ``to_dict`` writes, in its order."""
        specs = self.specs()
        return [k for k in self.__dict__.get("_keys", {}) if k in specs or k in self.unknown]

    def to_dict(self) -> dict[str, Any]:
        specs = self.specs()
        return {k: plain(getattr(self, k) if k in specs else self.unknown[k]) for k in self.keys()}

    def to_line(self) -> str:
        """The record as one JSONL line (NaN/±Infinity written as null: JSON has neither)."""
        return dumps(self.to_dict()) + "\n"

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


def unknown_paths(value: Any, prefix: str = "") -> list[str]:
    """The keys a record keeps at any depth without a field for them (a newer version's, another tool's),
    dotted from ``prefix``; a list's items are ``[]``, a mapping's values ``*`` (``runs[].x``, ``servers.*.x``).
    An ``OPEN`` record's extra keys are its content, not listed."""
    out: list[str] = []
    if isinstance(value, Record):
        if not value.OPEN:
            out += [prefix + k for k in value.unknown if k != VERSION_KEY]
        for name in value.specs():
            out += unknown_paths(getattr(value, name), f"{prefix}{name}.")
    elif isinstance(value, dict):
        for item in value.values():
            out += unknown_paths(item, prefix + "*.")
    elif isinstance(value, (list, tuple)):
        for item in value:
            out += unknown_paths(item, prefix.removesuffix(".") + "[].")
    return list(dict.fromkeys(out))
