"""A launch's step log as the export writes it: a pass's rows of the run's own checked reader
(``run.steplog_read``: the launch's steps and token rows in typed columns, about 400 bytes a step) turned into
arrow batches straight from the columns, no record or dict per row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..measure.step_columns import NONE, Array, RowColumns
from ..measure.steplog import StepColumns
from ..schemas.steplog import HIST_LEN, EventRow, TokenRow


def _ints(values: Array) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=values == NONE)


def _floats(values: Array) -> pa.Array:
    return pa.array(values, type=pa.float64(), mask=np.isnan(values))


def _part(part: dict[str, Any], n: int, schema: pa.Schema) -> dict[str, pa.Array]:
    return {k: pa.array([part[k]] * n, type=schema.field(k).type) for k in schema.names if k in part}


def step_batch(steps: StepColumns, idx: Array, part: dict[str, Any], schema: pa.Schema,
               stalls: dict[int, str] | None = None) -> pa.Table:
    """The ``steps`` rows of the steps ``idx`` of one part (its identity columns), as ``schema`` orders them; a step
    in ``stalls`` (step → its causes) is flagged with them (``measure.stalls``)."""
    n, sched, gpu = len(idx), steps.sched, steps.gpu
    graph = sched["graph_mode"][idx]
    numbers = steps.step[idx].tolist()
    named = stalls or {}
    columns: dict[str, pa.Array] = {
        **_part(part, n, schema),
        "stall": pa.array([s in named for s in numbers], type=pa.bool_()),
        "stall_causes": pa.array([named.get(s) for s in numbers], type=pa.string()),
        "wall": pa.array(sched["wall"][idx], type=pa.float64()),
        "full_graph": pa.array(sched.is_text("graph_mode", "FULL")[idx], type=pa.bool_(), mask=graph == NONE),
        "padded_tokens": _ints(sched["padded_tokens"][idx]),
        "hist": pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * HIST_LEN, HIST_LEN, dtype=np.int32)),
                                         pa.array(sched["hist"][idx].ravel(), type=pa.int64())),
    }
    for name in schema.names:
        if name not in columns:
            columns[name] = _floats(gpu[name][idx]) if name in gpu.data else pa.array(sched[name][idx], type=pa.int64())
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def token_batch(tokens: RowColumns[TokenRow], idx: Array, req: Array, part: dict[str, Any], schema: pa.Schema) -> pa.Table:
    """The ``tokens`` rows of the token rows ``idx`` of one part, ``req`` each one's request (``NONE``: not found)."""
    columns: dict[str, pa.Array] = {**_part(part, len(idx), schema), "req": _ints(req)}
    for name in schema.names:
        if name in columns:
            continue
        values = tokens[name][idx]
        columns[name] = (_floats(values) if values.dtype == np.float64 else
                         pa.array(values == 1, type=pa.bool_(), mask=values == NONE) if values.dtype == np.int8 else _ints(values))
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def event_batch(events: Sequence[EventRow], part: dict[str, Any], schema: pa.Schema) -> pa.Table:
    """The ``events`` rows of one part: what the recorder saw happen during the pass (``EventRow``)."""
    columns: dict[str, pa.Array] = {**_part(part, len(events), schema),
                                    "kind": pa.array([e.kind for e in events], type=pa.string()),
                                    "wall": pa.array([e.wall for e in events], type=pa.float64()),
                                    "ms": pa.array([e.ms for e in events], type=pa.float64()),
                                    "step": pa.array([e.step for e in events], type=pa.int64()),
                                    "one_time": pa.array([e.one_time for e in events], type=pa.bool_()),
                                    "detail": pa.array([e.detail for e in events], type=pa.string())}
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)

