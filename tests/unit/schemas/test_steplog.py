"""The step log's typed rows: a row in docs/steplog.md's format reads; every wrong value is refused with its key."""

import pytest

from specbench.schemas.steplog import GpuRow, RowError, SchedRow, StepHeader
from tests.support.steplog import WALL0, gpu_row, header, sched_row


def test_a_well_formed_sched_row_reads_with_its_histogram_sums():
    row = SchedRow.from_line(sched_row(3, WALL0, [4, 1, 2], k=3, graph_mode="FULL", padded_tokens=16, unpadded_tokens=12))
    assert (row.step, row.num_reqs, row.accepted, row.draft_tokens) == (3, 3, 4, 9)
    assert row.committed == 7 and row.hist_accepted == 4 and row.graph_mode == "FULL" and row.padded_tokens == 16


def test_a_baseline_row_without_stats_has_null_spec_numbers():
    row = SchedRow.from_line(sched_row(1, WALL0, [1], drafts=None, draft_tokens=None, accepted=None))
    assert row.accepted is None and row.drafts is None and row.hist_accepted == 0


@pytest.mark.parametrize("change, key", [
    ({"step": 0}, "step"), ({"step": "1"}, "step"), ({"step": True}, "step"),
    ({"wall": 12.0}, "wall"), ({"wall": float("nan")}, "wall"),
    ({"num_reqs": -1}, "num_reqs"), ({"hist": [1] * 16}, "hist"), ({"hist": [-1] + [0] * 16}, "hist"),
    ({"kv_usage": 1.5}, "kv_usage"), ({"accepted": 50}, "accepted"), ({"graph_mode": 3}, "graph_mode"),
    ({"padded_tokens": -4}, "padded_tokens"), ({"accepted_per_pos": ["x"]}, "accepted_per_pos"),
])
def test_a_bad_sched_value_is_refused_naming_its_key(change, key):
    with pytest.raises(RowError, match=key):
        SchedRow.from_line({**sched_row(1, WALL0, [2], k=3), **change})


def test_gpu_rows_and_headers():
    g = GpuRow.from_line(gpu_row(2, WALL0, 9.5))
    assert g.since_prev_ms == 9.5 and g.t_d1 == 7.0
    assert GpuRow.from_line(gpu_row(1, WALL0, None, draft=None)).t_d0 is None
    for bad in ({**gpu_row(2, WALL0, 9.5), "t_fwd": -1}, {**gpu_row(2, WALL0, 9.5), "since_prev_ms": "9"}, [1]):
        with pytest.raises(RowError):
            GpuRow.from_line(bad)
    assert StepHeader.of_file(header()).runner == "v1"
    with pytest.raises(RowError, match="schema"):
        StepHeader.of_file({**header(), "schema": "other/1"})


def test_a_token_row_is_read_strictly():
    from specbench.schemas.steplog import TokenRow
    good = {"step": 3, "wall": 1.8e9, "req_id": "chatcmpl-x", "batch": 1, "draft_pos": 2, "ctx": 12, "out_pos": 4,
            "token": 7, "target_top": 7, "accepted": True, "t_prob": 0.5, "t_entropy": 1.2, "t_margin": 0.1,
            "d_prob": None, "d_entropy": None, "d_margin": None}
    row = TokenRow.from_line(good)
    assert row.accepted is True and row.t_prob == 0.5 and row.d_prob is None
    for key, bad in (("accepted", 1), ("t_prob", 1.5), ("token", -1), ("req_id", 5), ("draft_pos", 0), ("t_entropy", float("nan"))):
        with pytest.raises(RowError, match=key):
            TokenRow.from_line({**good, key: bad})
