"""Step-log rows in columns: each field of a row's typed record (``schemas.steplog``) in one numpy array, a few
hundred bytes a step where the records cost ~2.5 KB (2 million steps were 14 GB as records). Every line is still
read by its record's strict reader first (``run.steplog_read``); only its values are kept, here. Records are made
again only for the rows a caller asks for (one timed pass's steps, for its stalls).

A launch's steps are the scheduler's rows in step order with, row for row, the runner's row of the same step
(``join``); a timed pass is the steps whose scheduler wall time lies in its window (``StepColumns.window``)."""

from __future__ import annotations

import math
import typing
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from ..schemas.record import Record
from ..schemas.steplog import GpuRow, SchedRow

R = TypeVar("R", bound=Record)
Array = npt.NDArray[Any]
NONE = -1  # an absent count, flag or text: every integer the step log records is ≥ 0 (``FieldColumn``'s check)
TYPECODE = {"int": "q", "float": "d", "bool": "b", "text": "i", "ints": "q", "texts": "i"}
DTYPE = {"int": np.int64, "float": np.float64, "bool": np.int8, "text": np.int32, "ints": np.int64, "texts": np.int32}


@dataclass(frozen=True)
class FieldColumn:
    """How one field of a record is kept: ``int`` (int64), ``float`` (float64; NaN: absent — a ranged number is
    never NaN, an unranged one is read as null), ``bool`` (int8), ``text`` (the index of the value among the
    field's distinct values), ``ints`` (a tuple of integers: ``length`` a row, or any number, with offsets), ``texts``
    (a tuple of texts of any number, each the index of its value, with offsets)."""

    name: str
    kind: str
    length: int = 0


def field_columns(cls: type[Record]) -> tuple[FieldColumn, ...]:
    """Each field of ``cls`` as a column; a field no column can hold is a TypeError (at import, below)."""
    out = []
    for name, spec in cls.specs().items():
        args = [a for a in typing.get_args(spec.hint) if a is not type(None)] if spec.nullable else [spec.hint]
        hint = args[0] if len(args) == 1 else None
        low = spec.meta.get("low")
        if hint is int and low is not None and low >= 0:
            out.append(FieldColumn(name, "int"))
        elif hint in (float, bool, str):
            out.append(FieldColumn(name, {float: "float", bool: "bool", str: "text"}[hint]))
        elif typing.get_origin(hint) is tuple and typing.get_args(hint) == (int, ...):
            out.append(FieldColumn(name, "ints", spec.meta.get("length") or 0))
        elif typing.get_origin(hint) is tuple and typing.get_args(hint) == (str, ...):
            out.append(FieldColumn(name, "texts"))
        else:
            raise TypeError(f"{cls.__name__}.{name}: no column holds {spec.hint} (an integer needs low ≥ 0)")
    return tuple(out)


class RowBuilder(Generic[R]):
    """Rows of one record type added one at a time (each read by the record's strict reader), kept column by column."""

    def __init__(self, cls: type[R]) -> None:
        self.cls, self.fields = cls, field_columns(cls)
        self.arrays: dict[str, array[Any]] = {f.name: array(TYPECODE[f.kind]) for f in self.fields}
        self.ends = {f.name: array("q", [0]) for f in self.fields if f.kind in ("ints", "texts") and not f.length}
        self.codes: dict[str, dict[str, int]] = {f.name: {} for f in self.fields if f.kind in ("text", "texts")}
        self.n = 0

    def add(self, row: R) -> str | None:
        """Add ``row``; the name of a field whose value no column holds (an integer beyond 64 bits), then nothing added."""
        values = row.__dict__
        f = self.fields[0]
        try:
            for f in self.fields:
                v, col = values[f.name], self.arrays[f.name]
                if f.kind == "float":
                    col.append(math.nan if v is None else v)
                elif f.kind == "text":
                    col.append(NONE if v is None else self.codes[f.name].setdefault(v, len(self.codes[f.name])))
                elif f.kind == "texts":
                    codes = self.codes[f.name]
                    col.extend(codes.setdefault(t, len(codes)) for t in v or ())
                    self.ends[f.name].append(len(col))
                elif f.kind != "ints":
                    col.append(NONE if v is None else v)
                else:
                    col.extend(v or ())
                    if not f.length:
                        self.ends[f.name].append(len(col))
        except OverflowError:
            self.rollback()
            return f.name
        self.n += 1
        return None

    def rollback(self) -> None:
        """Every column back to its ``n`` rows (a row added in part)."""
        for f in self.fields:
            col = self.arrays[f.name]
            if f.kind in ("ints", "texts") and not f.length:
                del self.ends[f.name][self.n + 1:]
                del col[self.ends[f.name][-1]:]
            else:
                del col[self.n * (f.length or 1):]

    def done(self) -> RowColumns[R]:
        data = {}
        for f in self.fields:
            col = np.frombuffer(self.arrays[f.name], DTYPE[f.kind])
            data[f.name] = col.reshape(self.n, f.length) if f.kind == "ints" and f.length else col
        return RowColumns(self.cls, self.n, data, {k: np.frombuffer(v, np.int64) for k, v in self.ends.items()},
                          {k: tuple(codes) for k, codes in self.codes.items()})


@dataclass(frozen=True)
class RowColumns(Generic[R]):
    """Rows of one record type, column by column: ``data[name]`` per field (``NONE`` / NaN where absent; a tuple
    of fixed length a 2-D array; one of any length its values, ``ends[name]`` the offset after each row's, from 0)
    and each text field's distinct values (``texts[name]``: its column holds their index)."""

    cls: type[R]
    n: int
    data: dict[str, Array]
    ends: dict[str, Array]
    texts: dict[str, tuple[str, ...]]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str) -> Array:
        return self.data[name]

    @classmethod
    def of(cls, record: type[R], rows: Iterable[R]) -> RowColumns[R]:
        """Records as columns (records a caller holds; the readers add each row as it is read)."""
        b = RowBuilder(record)
        for r in rows:
            if b.add(r) is not None:
                raise ValueError(f"{record.__name__}: a value beyond 64 bits")
        return b.done()

    def text_counts(self, name: str) -> Counter[str]:
        """How many rows hold each value of text field ``name`` (absent ones not counted)."""
        codes = self.data[name]
        counts = np.bincount(codes[codes >= 0], minlength=len(self.texts[name]))
        return Counter({t: int(n) for t, n in zip(self.texts[name], counts) if n})

    def is_text(self, name: str, value: str) -> Array:
        """Which rows hold ``value`` in text field ``name``."""
        names = self.texts[name]
        return np.equal(self.data[name], names.index(value) if value in names else -2)

    def slice(self, start: int, stop: int) -> RowColumns[R]:
        """Rows ``start`` to ``stop`` (not included), the columns' views: no copy (the columns themselves for all)."""
        if (start, stop) == (0, self.n):
            return self
        data = {name: col if name in self.ends else col[start:stop] for name, col in self.data.items()}
        ends = {name: e[start:stop + 1] - e[start] for name, e in self.ends.items()}
        for name, e in self.ends.items():
            data[name] = self.data[name][e[start]:e[stop]]
        return RowColumns(self.cls, stop - start, data, ends, self.texts)

    def take(self, idx: Array) -> RowColumns[R]:
        """The rows ``idx`` (in its order; views when they follow each other, as a timed pass's steps and a launch
        without damage do); a ``NONE`` there is an absent row (every field absent)."""
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) and 0 <= idx[0] and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
            return self.slice(int(idx[0]), int(idx[0]) + len(idx))
        absent = idx < 0
        at = np.where(absent, 0, idx) if self.n else np.zeros(0, dtype=np.int64)
        data, ends = {}, {}
        for name, col in self.data.items():
            if name in self.ends:
                data[name], ends[name] = _take_ragged(col, self.ends[name], at, absent, self.n)
                continue
            taken = col[at] if self.n else np.zeros((len(idx), *col.shape[1:]), dtype=col.dtype)
            taken[absent] = np.nan if col.dtype == np.float64 else NONE
            data[name] = taken
        return RowColumns(self.cls, len(idx), data, ends, self.texts)

    def values(self, name: str) -> list[Any]:
        """Field ``name`` of every row as its record holds it (None where absent; a tuple of integers a tuple)."""
        col = self.data[name]
        if name in self.ends:
            values, ends = col.tolist(), self.ends[name].tolist()
            if name in self.texts:
                values = [self.texts[name][c] for c in values]
            return [tuple(values[a:b]) for a, b in zip(ends, ends[1:])]
        if col.ndim == 2:
            return list(map(tuple, col.tolist()))
        if name in self.texts:
            texts = (*self.texts[name], None)  # NONE: the last
            return [texts[c] for c in col.tolist()]
        if col.dtype == np.int8:
            return [None if c < 0 else c == 1 for c in col.tolist()]
        if col.dtype == np.float64:
            return [None if v != v else v for v in col.tolist()]
        return [None if v < 0 else v for v in col.tolist()]

    def absent(self, name: str) -> Array:
        """Which rows have no value for field ``name``."""
        col = self.data[name]
        if name in self.ends and name in self.texts:  # a tuple of texts is written only when it holds some
            return np.asarray(self.ends[name][1:] == self.ends[name][:-1], dtype=bool)
        if name in self.ends or col.ndim == 2:
            return np.zeros(self.n, dtype=bool)
        return np.isnan(col) if col.dtype == np.float64 else col == NONE

    def records(self) -> list[R]:
        """Every row as its record (``unknown`` keys were not kept; an absent row is not one), made as
        ``Record.read`` makes one: the fields set directly, the keys it carries those not None."""
        names = list(self.data)
        carried = np.zeros(self.n, dtype=np.int64)  # bit i: the row carries field i
        for i, name in enumerate(names):
            carried |= (~self.absent(name)).astype(np.int64) << i
        keys = {bits: dict.fromkeys(n for i, n in enumerate(names) if bits >> i & 1) for bits in np.unique(carried).tolist()}
        make, cls, out = self.cls.__new__, self.cls, []
        for values, bits in zip(zip(*(self.values(name) for name in names)), carried.tolist()):
            obj = make(cls)
            obj.__dict__.update(zip(names, values), unknown={}, _keys=keys[bits].copy())
            out.append(obj)
        return out


def _take_ragged(values: Array, ends: Array, at: Array, absent: Array, n: int) -> tuple[Array, Array]:
    lengths = np.where(absent, 0, (ends[1:] - ends[:-1])[at] if n else 0)
    new_ends = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    starts = np.repeat((ends[:-1][at] if n else np.zeros(len(at), dtype=np.int64)) - new_ends[:-1], lengths)
    return values[starts + np.arange(new_ends[-1])], new_ends


SCHED_FIELDS, GPU_FIELDS = field_columns(SchedRow), field_columns(GpuRow)  # a field no column holds fails here


@dataclass(frozen=True)
class StepColumns:
    """Engine steps in step order: the scheduler's rows and, row for row, the runner's (an absent row where the
    ``timing`` level recorded none)."""

    sched: RowColumns[SchedRow]
    gpu: RowColumns[GpuRow]

    def __len__(self) -> int:
        return self.sched.n

    @property
    def step(self) -> Array:
        return self.sched["step"]

    @property
    def wall(self) -> Array:
        return self.sched["wall"]

    @property
    def has_gpu(self) -> Array:
        return np.not_equal(self.gpu["step"], NONE)

    @classmethod
    def of(cls, steps: Sequence[Step]) -> StepColumns:
        """Steps held as records, as columns."""
        sched = RowColumns.of(SchedRow, (s.sched for s in steps))
        gpu = RowColumns.of(GpuRow, (s.gpu for s in steps if s.gpu is not None))
        at = np.cumsum([s.gpu is not None for s in steps], dtype=np.int64) - 1
        return cls(sched, gpu.take(np.where([s.gpu is not None for s in steps], at, NONE).astype(np.int64)))

    def take(self, idx: Array) -> StepColumns:
        return StepColumns(self.sched.take(idx), self.gpu.take(idx))

    def window_index(self, start: float, end: float) -> Array:
        """The indices of the steps whose scheduler wall time lies in [start, end]."""
        return np.flatnonzero((self.wall >= start) & (self.wall <= end))

    def window(self, start: float, end: float) -> StepColumns:
        """The steps whose scheduler wall time lies in [start, end]: a timed pass's, when the window is its two
        /metrics scrapes (the server is idle at both)."""
        return self.take(self.window_index(start, end))

    def without_gpu(self) -> StepColumns:
        """The steps with their scheduler rows only."""
        return StepColumns(self.sched, self.gpu.take(np.full(len(self), NONE, dtype=np.int64)))

    def records(self) -> tuple[Step, ...]:
        """The steps as records (one pass's, for what reads them so)."""
        gpu = iter(self.gpu.take(np.flatnonzero(self.has_gpu)).records())
        return tuple(Step(s, next(gpu) if has else None) for s, has in zip(self.sched.records(), self.has_gpu.tolist()))


@dataclass(frozen=True)
class Step:
    """One engine step: the scheduler's row, and the runner's where the ``timing`` level recorded it."""

    sched: SchedRow
    gpu: GpuRow | None = None


def first_of_each(keys: Sequence[Array]) -> tuple[Array, Array]:
    """The order that sorts rows by ``keys`` (the last the primary key; ties keep their order), and which of the
    sorted rows is the first of its key."""
    order = np.lexsort(keys) if len(keys[0]) else np.zeros(0, dtype=np.int64)
    same = np.zeros(len(order), dtype=bool)
    same[1:] = True
    for k in keys:
        ks = k[order]
        same[1:] &= ks[1:] == ks[:-1]
    return order, ~same


def join(sched: RowColumns[SchedRow], gpu: RowColumns[GpuRow], skipped: Counter[str], sched_rows: Array | None = None,
         gpu_rows: Array | None = None) -> StepColumns:
    """The rows (``*_rows``: these of them, in this order; None: all) joined on ``step``, in step order; a second
    row of the same step (another engine core or worker) is skipped, the first kept."""
    g_rows = np.arange(len(gpu)) if gpu_rows is None else gpu_rows
    s_rows = np.arange(len(sched)) if sched_rows is None else sched_rows
    g_order, g_first = first_of_each([gpu["step"][g_rows]])
    if (dup := int((~g_first).sum())):
        skipped["gpu: duplicate step"] += dup
    known, known_at = gpu["step"][g_rows][g_order[g_first]], g_rows[g_order[g_first]]
    s_order, s_first = first_of_each([sched["step"][s_rows]])
    if (dup := int((~s_first).sum())):
        skipped["sched: duplicate step"] += dup
    keep = s_rows[s_order[s_first]]
    steps = sched["step"][keep]
    pos = np.minimum(np.searchsorted(known, steps), max(len(known) - 1, 0))
    found = known[pos] == steps if len(known) else np.zeros(len(steps), dtype=bool)
    return StepColumns(sched.take(keep), gpu.take(np.where(found, known_at[pos] if len(known) else 0, NONE)))
