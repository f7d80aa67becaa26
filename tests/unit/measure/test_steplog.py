"""The step log's measures on hand-made steps: step time, its split, batch buckets, and the counter checks."""

import pytest

from specbench.measure.step_columns import RowColumns, join
from specbench.measure.steplog import (
    PassSteps,
    Step,
    StepColumns,
    StepDecomposition,
    StepLog,
    cell_stats,
    cut,
    steplog_decomposition,
)
from specbench.schemas.row import ResultRow
from specbench.schemas.steplog import GpuRow, SchedRow
from tests.support.steplog import WALL0, gpu_row, sched_row


def steps(committed_per_step, k=3, since=10.0, timing=True, start=1):
    out = []
    for i, committed in enumerate(committed_per_step):
        n, wall = start + i, WALL0 + (start + i) * since / 1000
        s = SchedRow.from_line(sched_row(n, wall, committed, k))
        g = GpuRow.from_line(gpu_row(n, wall, since if i else 999.0)) if timing else None
        out.append(Step(s, g))
    return tuple(out)


def passed(ss, counter_accepted=None):
    return PassSteps(StepColumns.of(ss), counter_accepted)


def test_step_time_split_and_counters_agree():
    ss = steps([[3, 1], [4, 4], [2, 1]])
    stats = cell_stats([passed(ss, counter_accepted=2 + 6 + 1)])
    assert stats.steplog_steps == 3
    assert stats.steplog_step_mean_ms == pytest.approx(10.0)  # the first step spans the idle gap: left out
    assert stats.steplog_step_clock == "runner (since_prev_ms)"
    assert stats.steplog_fwd_ms == pytest.approx(3.9) and stats.steplog_lm_head_ms == pytest.approx(0.5)
    assert stats.steplog_verify_ms == pytest.approx(0.5) and stats.steplog_drafter_ms == pytest.approx(2.0)
    assert stats.steplog_gap_ms == pytest.approx(10.0 - 7.5)
    assert stats.steplog_hist[:5] == [0, 2, 1, 1, 2]
    assert stats.steplog_accepted == stats.steplog_hist_accepted == stats.steplog_counter_accepted == 9
    assert stats.steplog_accepted_agree is True and stats.steplog_hist_agree is True
    assert stats.steplog_tokens_per_step == pytest.approx(15 / 6)
    assert stats.steplog_step_by_batch == {"2-4": {"steps": 2, "mean_ms": 10.0}}


def test_a_counter_mismatch_is_flagged_with_both_numbers():
    stats = cell_stats([passed(steps([[3], [2]]), counter_accepted=4)])
    assert (stats.steplog_accepted, stats.steplog_counter_accepted, stats.steplog_accepted_agree) == (3, 4, False)
    broken = steps([[3]])
    bad = Step(SchedRow.from_line(sched_row(9, WALL0 + 1, [3], 3, accepted=1)), None)
    stats = cell_stats([passed(broken + (bad,), counter_accepted=3)])
    assert stats.steplog_hist_agree is False and stats.steplog_hist_accepted == 4


def test_without_gpu_rows_the_step_time_is_the_schedulers_wall_clock():
    stats = cell_stats([passed(steps([[1], [1], [1]], k=None, since=20.0, timing=False))])
    assert stats.steplog_step_mean_ms == pytest.approx(20.0) and stats.steplog_step_clock == "scheduler wall"
    assert stats.steplog_fwd_ms is None
    assert stats.steplog_accepted == 0 and stats.steplog_counter_accepted == 0  # no speculation, no counter
    assert stats.steplog_tokens_per_step == 1.0


def test_graph_modes_and_padding():
    ss = tuple(Step(SchedRow.from_line(sched_row(i, WALL0 + i, [1], None, graph_mode=m, padded_tokens=8, unpadded_tokens=6)))
               for i, m in ((1, "FULL"), (2, "FULL"), (3, "PIECEWISE"), (4, "NONE")))
    stats = cell_stats([passed(ss)])
    assert stats.steplog_graph_modes == {"FULL": 0.5, "NONE": 0.25, "PIECEWISE": 0.25}
    assert stats.steplog_padding_share == pytest.approx(2 / 6)


def test_join_and_cut():
    from collections import Counter
    sched = RowColumns.of(SchedRow, [SchedRow.from_line(sched_row(n, WALL0 + n, [2], 3)) for n in (2, 1, 3, 3)])
    gpu = RowColumns.of(GpuRow, [GpuRow.from_line(gpu_row(n, WALL0 + n, 5.0)) for n in (1, 3, 3)])
    skipped: Counter[str] = Counter()
    joined = join(sched, gpu, skipped)
    assert joined.step.tolist() == [1, 2, 3] and joined.has_gpu.tolist() == [True, False, True]
    assert skipped == {"sched: duplicate step": 1, "gpu: duplicate step": 1}
    assert cut(StepLog(joined), WALL0 + 1.5, WALL0 + 3).step.tolist() == [2, 3]


def row(run, step=None, tokens=None, **keys):
    r = ResultRow.start("d", run)
    r.update({"steplog_step_mean_ms": step, "steplog_tokens_per_step": tokens, **keys})
    return r


def test_decomposition_from_the_step_log_and_its_source():
    base = row("base", step=10.0, tokens=1.0)
    spec = row("spec", step=15.0, tokens=3.0, step_cost_ratio=2.0, speedup_decomposed=1.2, speedup_vs_baseline=1.8,
               speedup_decomposed_ci_low=1.0, speedup_decomposed_ci_high=1.5)
    out = steplog_decomposition(spec, base)
    assert out.step_source == "step log" and out.step_cost_ratio == pytest.approx(1.5)
    assert out.speedup_decomposed == pytest.approx(2.0) and out.speedup_residual == pytest.approx(0.9)
    assert out.speedup_decomposed_ci_low == pytest.approx(1.0 / 1.2 * 2.0)
    gaps = steplog_decomposition(row("spec", step=15.0, tokens=3.0, step_cost_ratio=2.0), row("base"))
    assert gaps == StepDecomposition(step_source="chunk gaps", step_cost_ratio=2.0)  # the row's own values kept
    assert steplog_decomposition(base, base) is None



def test_a_pass_without_steps_takes_no_step_time_from_the_next():
    """A pass whose window held no step gave one time (None) and no step: the next pass's times were paired
    with the steps before theirs (by batch: 1 step of 2), and the clock said the scheduler's."""
    stats = cell_stats([passed(()), passed(steps([[3], [3], [3]]))])
    assert stats.steplog_step_by_batch == {"1": {"steps": 2, "mean_ms": 10.0}}
    assert stats.steplog_step_clock == "runner (since_prev_ms)"


def test_the_step_time_is_one_rule_on_records_and_on_columns():
    import math

    from specbench.measure.steplog import column_times, step_times

    for ss in (steps([[3], [2], [4]]), steps([[1], [1]], k=None, since=20.0, timing=False), steps([[2]])):
        times, clock = step_times(ss)
        cols, cols_clock = column_times(StepColumns.of(ss))
        assert clock == cols_clock and [None if math.isnan(t) else t for t in cols.tolist()] == times
