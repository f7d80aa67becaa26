"""The batch the server ran against the cell's load point, from the step log's running, waiting and kv_usage."""

import pytest

from specbench.measure.server_batch import WAITING_NOTE_SHARE, batch_note, server_batch
from specbench.measure.steplog import Step, StepColumns
from specbench.schemas.notes import NoteCode
from specbench.schemas.row_steplog import ServerBatch
from specbench.schemas.steplog import SchedRow
from tests.support.steplog import WALL0, sched_row

QUEUES = ("running", "waiting", "kv_usage")


def columns(running, waiting, kv, start=1):
    """One pass's steps with these queues after each step (None: the row lacks the key, as older logs do)."""
    rows = []
    for i, (r, w, u) in enumerate(zip(running, waiting, kv)):
        row = {k: v for k, v in sched_row(start + i, WALL0 + start + i, [1]).items() if k not in QUEUES}
        row.update({k: v for k, v in zip(QUEUES, (r, w, u)) if v is not None})
        rows.append(Step(SchedRow.from_line(row)))
    return StepColumns.of(rows)


def test_a_log_without_the_queues_gives_missing_never_zero():
    steps = columns([None] * 4, [None] * 4, [None] * 4)
    batch = server_batch([steps])
    assert batch == ServerBatch(steplog_running_p50=None, steplog_running_max=None, steplog_waiting_share=None,
                                steplog_kv_peak=None)
    assert batch_note(batch, 64, True) is None
    assert server_batch([]) == batch


def test_a_kv_bound_pass_gives_the_servers_batch():
    """C=8 asked; the KV cache holds 3: the scheduler runs 3, the rest wait, until the last requests drain."""
    first = columns([2, 3, 3, 3, 3, 3], [6, 5, 5, 4, 3, 2], [0.5, 0.97, 0.99, 0.98, 0.99, 0.98])
    second = columns([3, 3, 2, 1], [1, 0, 0, 0], [0.9, None, 0.4, 0.2], start=20)  # a step without kv_usage: left out
    batch = server_batch([first, second])
    assert batch.steplog_running_p50 == 3.0 and batch.steplog_running_max == 3
    assert batch.steplog_waiting_share == pytest.approx(7 / 10) and batch.steplog_kv_peak == pytest.approx(0.99)
    note = batch_note(batch, 8, True)
    assert note is not None and note.code == NoteCode.SERVER_BATCH
    assert note.values == {"concurrency": 8, "running_p50": 3.0, "running_max": 3, "waiting_share": pytest.approx(0.7),
                           "kv_peak": pytest.approx(0.99)}


def test_only_a_closed_loop_whose_server_held_the_batch_below_c_gets_the_note():
    at_c = server_batch([columns([8] * 10, [0] * 10, [0.2] * 10)])
    assert at_c.steplog_running_p50 == 8.0 and at_c.steplog_waiting_share == 0.0 and batch_note(at_c, 8, True) is None
    bound = server_batch([columns([3] * 10, [5] * 10, [0.99] * 10)])
    assert batch_note(bound, 8, True) is not None
    assert batch_note(bound, 8, False) is None  # open loop: its in-flight count is the arrivals', not C
    assert batch_note(bound, 3, True) is None and batch_note(bound, 1, True) is None
    # a start-up ramp: the requests wait a step or two, then all C run at once
    ramp = server_batch([columns([4, 6] + [8] * 8, [4, 2] + [0] * 8, [0.1] * 10)])
    assert ramp.steplog_waiting_share >= WAITING_NOTE_SHARE and batch_note(ramp, 8, True) is None
    # a drain: the batch falls below C because the client sends no more, and nothing waits
    drain = server_batch([columns([8, 8, 7, 6, 5, 4, 3, 2, 1, 1], [0] * 10, [0.1] * 10)])
    assert drain.steplog_running_p50 < 8 and drain.steplog_waiting_share < WAITING_NOTE_SHARE
    assert batch_note(drain, 8, True) is None
