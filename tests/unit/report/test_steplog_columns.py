"""The step log in the report: the Step table's cells and the flags under the tables."""

from specbench.report.markdown import warnings
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
