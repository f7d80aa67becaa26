"""The step log in the report: the Step table's cells and the flags under the tables."""

from specbench.report.notes import warnings
from specbench.report.steplog_columns import STEP_COLUMNS, STEP_SOURCE_COLUMN
from specbench.schemas.row import ResultRow


def row(run, **keys):
    r = ResultRow.start("d", run)
    r.update(keys)
    return r


def test_step_cells():
    r = row("spec", steplog_steps=42, steplog_step_mean_ms=8.5, steplog_step_p50_ms=7.0, steplog_step_p95_ms=19.0,
            steplog_fwd_ms=3.9, steplog_verify_ms=0.5, steplog_accepted=78, steplog_counter_accepted=80,
            steplog_accepted_agree=False, steplog_graph_modes={"FULL": 0.75, "NONE": 0.25}, step_source="step log")
    cells = {c.header: c.cell(r) for c in STEP_COLUMNS}
    assert cells["Step ms mean/p50/p95"] == "8.50/7.00/19.00" and cells["Fwd/LM head/verify/draft/gap ms"] == "3.90/—/0.50/—/—"
    assert cells["Accepted log = counter"] == "78 ≠ 80 ⚠" and cells["Graph modes"] == "FULL 75% NONE 25%"
    assert STEP_SOURCE_COLUMN.cell(r) == "step log" and not STEP_COLUMNS[0].shown([row("base")])


def test_step_log_flags_travel_under_the_table():
    r = row("spec", steplog_accepted=10, steplog_counter_accepted=12, steplog_accepted_agree=False,
            steplog_hist_accepted=9, steplog_hist_agree=False, stream_merged_chunks=4, step_source="step log",
            concurrency=64)
    text = "\n".join(warnings([r]))
    assert "accepted tokens (10) differ from the /metrics counter delta (12)" in text
    assert "counts 9 accepted tokens, its spec-decode stats 10" in text
    assert "come from the step log, unaffected" in text and "overstated by the same factor" not in text


def _pass(repeat, share, longest=()):
    return {"repeat": repeat, "server_start": repeat, "stalls": len(longest), "stall_ms": 10.0, "share": share,
            "one_time_events": 0, "longest": list(longest)}


def test_a_pass_that_lost_two_percent_to_stalls_is_named_and_so_are_the_repeats_that_disagree():
    """Issue 39: the stalls of a pass that lost ≥ 2 % are named under the table; where the speedup varies between
    server starts, the line says the disagreeing start is the one with stalls."""
    stall = {"step": 1, "at_s": 0.0, "ms": 246.0, "excess_ms": 240.0, "where": "drafter",
             "causes": ["triton_autotune: _kernel (231 ms)"]}
    r = row("spec", steplog_stalls=2, steplog_stall_ms=460.0, steplog_stall_share=0.05,
            steplog_stall_causes={"triton_autotune": 400.0, "unknown": 60.0},
            steplog_stall_passes=[_pass(0, 0.15, [stall, {**stall, "ms": 227.0}]), _pass(1, 0.001), _pass(2, 0.0)],
            speedup_repeats=[1.26, 1.57, 1.67], speedup_varies=True, speedup_repeats_fresh_servers=True, concurrency=16)
    lines = warnings([r])
    assert ("⚠ spec / d / C=16 (repeat 0, server start 0): stalls took 15.0% of the timed pass — 2 step(s), the longest "
            "246 and 227 ms (drafter): triton_autotune: _kernel (231 ms)") in lines
    assert "⚠ spec / d / C=16: the speedup varies between repeats, and the repeats with stalls are 0 (1.26×; without " \
           "stalls 1.57–1.67×)" in lines
    cells = {c.header: c.cell(r) for c in STEP_COLUMNS}
    assert cells["Stalls n/ms/share"] == "2/460/5.0%" and cells["Stall causes"] == "triton_autotune 400, unknown 60"


def test_passes_under_two_percent_are_not_named():
    r = row("spec", steplog_stalls=1, steplog_stall_passes=[_pass(0, 0.019)], speedup_varies=False)
    assert not [w for w in warnings([r]) if "stalls" in w]


def test_a_hostile_stall_list_is_skipped_not_raised():
    """results.json is input: a stall entry with text for ms, a cause that is not a list, a longest that is not a
    list — the line is still written with what can be read."""
    r = row("spec", steplog_stall_passes=[{"repeat": 0, "stalls": 1, "share": 0.5, "longest": [
        {"ms": "many", "causes": "gc", "where": 7}, {"ms": 80.0, "causes": [1, "unknown"]}]},
        {"repeat": 1, "share": 0.4, "longest": "none"}])
    lines = [w for w in warnings([r]) if "stalls took" in w]
    assert len(lines) == 2 and "the longest 80 ms (7): 1; unknown" in lines[0]


def _batch_row(run, concurrency, p50, top, waiting, kv):
    from specbench.measure.server_batch import batch_note
    from specbench.schemas.row_steplog import ServerBatch

    batch = ServerBatch(steplog_running_p50=p50, steplog_running_max=top, steplog_waiting_share=waiting, steplog_kv_peak=kv)
    r = row(run, steplog_steps=483, concurrency=concurrency)
    r.add(batch)
    note = batch_note(batch, concurrency, True)
    r.notes = [note] if note else []
    return r


def test_a_cell_whose_server_ran_its_own_batch_says_so_under_the_table():
    """The H200 long-context run, 32k tokens at C=64: the KV cache held 22 requests, the others waited, TTFT was
    52 s, and nothing under the table said the batch was not 64."""
    bound = _batch_row("baseline", 64, 22.0, 22, 0.723, 0.969)
    at_c = _batch_row("dspark", 16, 16.0, 16, 0.008, 0.025)
    lines = warnings([bound, at_c])
    assert ("⚠ baseline / d / C=64: the server ran a median 22 (max 22) of the 64 requests in flight at once; requests "
            "waited on 72% of steps, KV cache peak 97% — the batch was the server's, not C=64, and TTFT includes the "
            "wait") in lines
    assert not [w for w in lines if "dspark" in w]
    cells = [next(c for c in STEP_COLUMNS if c.header.startswith("Running")).cell(r) for r in (bound, at_c)]
    assert cells == ["22/22, 72%, 97% ⚠", "16/16, 1%, 2%"]
