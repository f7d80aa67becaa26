"""Step-log rows in columns: every field of every record kept, read back as the same records; rows taken,
an absent row among them; a launch's rows joined in step order."""

from collections import Counter

import numpy as np

from specbench.measure.step_columns import NONE, RowColumns, StepColumns, join
from specbench.schemas.steplog import EventRow, GpuRow, SchedRow, TokenRow
from tests.support.steplog import WALL0, gpu_row, sched_row, token_row


def fields(record):
    return {k: getattr(record, k) for k in type(record).specs()}


SCHED = [SchedRow.from_line(sched_row(1, WALL0 + 1, [3, 1], 3, accepted_per_pos=[2, 1, 0], graph_mode="FULL",
                                      padded_tokens=8, unpadded_tokens=6)),
         SchedRow.from_line({k: v for k, v in sched_row(2, WALL0 + 2, [1], None, accepted_per_pos=[]).items()
                             if k not in ("running", "waiting", "kv_usage", "drafts", "accepted")}),
         SchedRow.from_line(sched_row(3, WALL0 + 3.25, [2] * 5, 1, accepted_per_pos=[5], graph_mode="PIECEWISE",
                                      skipped_reqs=["chatcmpl-a", "chatcmpl-b"]))]


def test_rows_in_columns_read_back_as_the_same_records():
    """Absent values (None), tuples of fixed and of any length, text, flags and numbers of every record type."""
    tokens = [TokenRow.from_line(token_row(4, WALL0 + 4, "req-1", 1, 7, 42, True)),
              TokenRow.from_line({**token_row(4, WALL0 + 4, "r", 2, 8, 43, False), "req_id": None, "ctx": None,
                                  "out_pos": None, "t_prob": None})]
    events = [EventRow(kind="gc", wall=WALL0, ms=12.5, step=None, detail="generation 2"),
              EventRow(kind="preemption", wall=WALL0 + 1, ms=0.0, step=3, detail=None)]
    gpu = [GpuRow.from_line(gpu_row(1, WALL0 + 1, None, draft=None)), GpuRow.from_line(gpu_row(2, WALL0 + 2, 3.5))]
    for cls, rows in ((SchedRow, SCHED), (GpuRow, gpu), (TokenRow, tokens), (EventRow, events)):
        back = RowColumns.of(cls, rows).records()
        assert [fields(r) for r in back] == [fields(r) for r in rows], cls.__name__
        assert [r.to_dict() for r in back] == [{k: v for k, v in r.to_dict().items() if v is not None} for r in rows]


def test_rows_taken_in_any_order_with_an_absent_row():
    cols = RowColumns.of(SchedRow, SCHED)
    taken = cols.take(np.array([2, NONE, 0]))
    assert taken.absent("running").tolist() == [False, True, False] and taken["step"].tolist() == [3, NONE, 1]
    assert taken.values("accepted_per_pos") == [(5,), (), (2, 1, 0)]
    assert [fields(r) for r in taken.take(np.array([0, 2])).records()] == [fields(SCHED[2]), fields(SCHED[0])]
    following = cols.take(np.array([1, 2]))  # rows that follow each other: the columns' views
    assert following.values("accepted_per_pos") == [(), (5,)] and following["hist"].base is not None
    assert [fields(r) for r in following.records()] == [fields(SCHED[1]), fields(SCHED[2])]
    assert cols.text_counts("graph_mode") == Counter({"FULL": 1, "PIECEWISE": 1})


def test_a_launch_joined_in_step_order_and_back_as_steps():
    sched = RowColumns.of(SchedRow, [SCHED[2], SCHED[0], SCHED[1]])
    gpu = RowColumns.of(GpuRow, [GpuRow.from_line(gpu_row(n, WALL0 + n, 2.0)) for n in (3, 1, 3)])
    skipped: Counter[str] = Counter()
    steps = join(sched, gpu, skipped)
    assert steps.step.tolist() == [1, 2, 3] and steps.has_gpu.tolist() == [True, False, True]
    assert skipped == {"gpu: duplicate step": 1}
    records = steps.records()
    assert [fields(s.sched) for s in records] == [fields(r) for r in SCHED] and records[1].gpu is None
    again = StepColumns.of(records)
    assert again.step.tolist() == [1, 2, 3] and [s.gpu is None for s in again.records()] == [False, True, False]
    assert steps.window(WALL0 + 1.5, WALL0 + 3.25).step.tolist() == [2, 3] and not steps.without_gpu().has_gpu.any()
