"""A launch's step log as the export writes it: a pass's rows of the run's own checked reader
(``run.steplog_read``: the launch's steps and token rows in typed columns, about 400 bytes a step) turned into
arrow batches straight from the columns, no record or dict per row."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..measure.step_columns import NONE, Array, RowColumns
from ..measure.steplog import StepColumns
from ..schemas.steplog import HIST_LEN, TokenRow


def _ints(values: Array) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=values == NONE)


def _floats(values: Array) -> pa.Array:
    return pa.array(values, type=pa.float64(), mask=np.isnan(values))


def _part(part: dict[str, Any], n: int, schema: pa.Schema) -> dict[str, pa.Array]:
    return {k: pa.array([part[k]] * n, type=schema.field(k).type) for k in schema.names if k in part}


def step_batch(steps: StepColumns, idx: Array, part: dict[str, Any], schema: pa.Schema) -> pa.Table:
    """The ``steps`` rows of the steps ``idx`` of one part (its identity columns), as ``schema`` orders them."""
    n, sched, gpu = len(idx), steps.sched, steps.gpu
    graph = sched["graph_mode"][idx]
    columns: dict[str, pa.Array] = {
        **_part(part, n, schema),
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
