"""A launch's step log as the export reads it: in typed columns, not records.

``run.steplog.read_launch`` keeps every step as two records (several KB a step, and every launch read stays in
its cache), which is what the run's per-cell numbers need; the export only copies the rows of each timed pass
into parquet, so here each line goes through the same strict row readers (``SchedRow``/``GpuRow.from_line``,
the same skips: a torn, overlong or non-JSON line, a row the reader refuses) and what the ``steps`` table
holds is kept in numpy arrays, about 250 bytes a step, one launch at a time. The rows are joined and cut as
``measure.steplog.join`` and ``cut`` do them (the scheduler's rows sorted by step, the first of a step kept;
the runner's row the first of its step; a pass the steps whose scheduler wall time lies in its window), and a
pass's rows become arrow batches straight from the arrays.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from ..run.steplog_read import MAX_LINE
from ..schemas.steplog import HIST_LEN, TIME_POINTS, GpuRow, RowError, SchedRow

T = TypeVar("T")
SCHED_INTS = ("num_reqs", "num_tokens", "decode_reqs", "spec_tokens", "prefill_tokens", "ctx_tokens")
GPU_FLOATS = ("since_prev_ms", *(f"t_{p}" for p in TIME_POINTS if p != "exec_end"))
NONE = -1  # an absent count (padded_tokens, full_graph): every count is ≥ 0


def rows_of(folder: Path, kind: str, reader: Callable[[Any], T]) -> Iterator[T]:
    """The rows of every ``<kind>-*.jsonl`` of a launch folder that the strict reader takes, file by file in
    name order, line by line."""
    for path in sorted(folder.glob(f"{kind}-*.jsonl")):
        try:
            with path.open("rb") as f:
                for raw in f:
                    if not raw.endswith(b"\n") or len(raw) > MAX_LINE:
                        continue
                    try:
                        yield reader(json.loads(raw))
                    except (ValueError, RecursionError, RowError):
                        continue
        except OSError:
            continue


def _first_of_each(steps: np.ndarray) -> np.ndarray:
    """Indices of the first row of each step, in step order (a stable sort: ties keep the files' order)."""
    order = np.argsort(steps, kind="stable")
    ordered = steps[order]
    return order[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(order) else order


@dataclass(frozen=True)
class LaunchColumns:
    """One launch's joined steps in step order, column by column (``NONE`` / NaN where a value is absent)."""

    step: np.ndarray
    wall: np.ndarray
    ints: dict[str, np.ndarray]
    full_graph: np.ndarray
    padded_tokens: np.ndarray
    hist: np.ndarray  # (steps, HIST_LEN)
    floats: dict[str, np.ndarray]  # the runner's times; NaN: no runner row, or none recorded

    def window(self, start: float, end: float) -> np.ndarray:
        """The indices of the steps whose scheduler wall time lies in [start, end] (``measure.steplog.cut``)."""
        return np.flatnonzero((self.wall >= start) & (self.wall <= end))


def read_columns(folder: Path) -> LaunchColumns:
    """A launch folder's ``sched-*`` and ``gpu-*`` rows, read and joined on ``step``."""
    steps, walls, full, padded = array("q"), array("d"), array("b"), array("q")
    ints = {name: array("q") for name in SCHED_INTS}
    hist = array("q")
    for r in rows_of(folder, "sched", SchedRow.from_line):
        steps.append(r.step)
        walls.append(r.wall)
        for name, col in ints.items():
            col.append(getattr(r, name))
        full.append(NONE if r.graph_mode is None else int(r.graph_mode == "FULL"))
        padded.append(NONE if r.padded_tokens is None else r.padded_tokens)
        hist.extend(r.hist)
    keep = _first_of_each(np.frombuffer(steps, dtype=np.int64))
    gpu_steps, times = array("q"), {name: array("d") for name in GPU_FLOATS}
    for g in rows_of(folder, "gpu", GpuRow.from_line):
        gpu_steps.append(g.step)
        for name, column in times.items():
            value = getattr(g, name)
            column.append(np.nan if value is None else float(value))
    step = np.frombuffer(steps, dtype=np.int64)[keep]
    known, first = np.unique(np.frombuffer(gpu_steps, dtype=np.int64), return_index=True)
    at = np.minimum(np.searchsorted(known, step), max(len(known) - 1, 0))
    joined = (known[at] == step) if len(known) else np.zeros(len(step), dtype=bool)
    floats = {name: np.where(joined, np.frombuffer(col, dtype=np.float64)[first[at]] if len(known) else np.nan, np.nan)
              for name, col in times.items()}
    return LaunchColumns(step=step, wall=np.frombuffer(walls, dtype=np.float64)[keep],
                         ints={name: np.frombuffer(col, dtype=np.int64)[keep] for name, col in ints.items()},
                         full_graph=np.frombuffer(full, dtype=np.int8)[keep],
                         padded_tokens=np.frombuffer(padded, dtype=np.int64)[keep],
                         hist=np.frombuffer(hist, dtype=np.int64).reshape(-1, HIST_LEN)[keep], floats=floats)


def _float(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.float64(), mask=np.isnan(values))


def step_batch(cols: LaunchColumns, idx: np.ndarray, part: dict[str, Any], schema: pa.Schema) -> pa.Table:
    """The ``steps`` rows of the steps ``idx`` of one part (its identity columns), as ``schema`` orders them."""
    n = len(idx)
    hist = cols.hist[idx]
    graph, padded = cols.full_graph[idx], cols.padded_tokens[idx]
    columns: dict[str, pa.Array] = {
        **{k: pa.array([part[k]] * n, type=schema.field(k).type) for k in schema.names if k in part},
        "wall": pa.array(cols.wall[idx], type=pa.float64()),
        **{name: pa.array(col[idx], type=pa.int64()) for name, col in cols.ints.items()},
        "full_graph": pa.array(graph == 1, type=pa.bool_(), mask=graph == NONE),
        "padded_tokens": pa.array(padded, type=pa.int64(), mask=padded == NONE),
        "hist": pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * HIST_LEN, HIST_LEN, dtype=np.int32)),
                                         pa.array(hist.ravel(), type=pa.int64())),
        **{name: _float(col[idx]) for name, col in cols.floats.items()},
    }
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)
