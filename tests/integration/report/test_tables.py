"""The markdown report by question: the comparison table people paste (the reference table's columns, the speedup
with its CI in one cell, and the swept load: at most 14), then Why / Per request / Quality & cost / Checks, each
only when it has something measured, then the sweep / what-if / tune tables and the notes."""

import re

from specbench.report.html import table_html
from specbench.report.markdown import DECOMPOSITION_NOTE, markdown
from specbench.report.model import Model
from specbench.run.readback import read_run
from specbench.schemas.row_read import rows_from
from tests.support.md_tables import tables_of
from tests.support.paths import DATA, RUNS

#: an H200 run with every column filled: decomposition, per-request acceptance, energy, cost, what-if
GPU_RUN = RUNS / "gpu_whatif_map"  # results/evidence/h200/whatif_dspark_k3: its results.json and meta.json
REFERENCE = tables_of((DATA / "report" / "results_example.md").read_text())[""][0]
WHY = ["Tok/step", "Step cost", "Decomposed speedup", "Residual"]


def test_a_gpu_run_pastes_as_the_reference_columns_then_one_table_per_question():
    run = read_run(GPU_RUN, quiet=True)
    md = markdown(run.rows, run.meta, run.explained)
    tables = tables_of(md)
    main = tables[""][0]
    assert main == REFERENCE[:2] + ["Conc"] + REFERENCE[2:]
    assert len(main) == 13
    assert list(tables) == ["", "Why: tokens per step vs step cost", "Per request", "Quality & cost",
                            "Speedup vs concurrency", "What-if: speedup vs acceptance length"]  # nothing to check
    assert tables["Why: tokens per step vs step cost"][0] == ["Dataset", "Run", "Conc", *WHY]
    assert tables["Per request"][0][:3] == tables["Quality & cost"][0][:3] == ["Dataset", "Run", "Conc"]
    for title in ("", "Why: tokens per step vs step cost", "Per request", "Quality & cost"):
        assert [row[:3] for row in tables[title][1:]] == [[r.dataset, r.run, str(r.concurrency)] for r in run.rows]
    # each of the 26 columns the one wide table had (27 before Speedup took its CI) is in one table, once (beside
    # the repeated identity columns)
    shown = [h for t in list(tables.values())[:4] for h in t[0][3:]] + main[:3]
    assert len(shown) == len(set(shown)) == 26
    assert "J/token" in shown and "$/M tok" in shown and "Req accept len p10/p50/p90" in shown
    # the decomposition's note right below Why, the notes and warnings below every table
    assert md.index(DECOMPOSITION_NOTE) < md.index("Per request\n")
    assert md.index("What-if: speedup vs acceptance length") < md.index("- Speedup = output tok/s")
    assert md.rindex("|") < md.index("- ⚠ ")


def test_a_table_or_column_with_nothing_measured_is_left_out_of_the_markdown_but_not_the_html():
    common = {"dataset": "d", "concurrency": 1, "accuracy": None,
              "accuracy_error": "no request was graded (failed requests are not graded)"}
    rows = rows_from([{**common, "run": "baseline", "stream_mean_acceptance_length": 1.0, "step_cost_ratio": None,
                       "speedup_decomposed": None, "speedup_residual": None},
                      {**common, "run": "spec", "stream_mean_acceptance_length": 2.0, "step_cost_ratio": 1.25,
                       "speedup_decomposed": None, "speedup_residual": None}])
    md = markdown(rows)
    tables = tables_of(md)
    assert list(tables) == ["", "Why: tokens per step vs step cost"]  # no Quality & cost: its one column is all —
    assert tables["Why: tokens per step vs step cost"] == [
        ["Dataset", "Run", "Tok/step", "Step cost"], ["d", "baseline", "1.000", "—"], ["d", "spec", "2.000", "1.250x"]]
    assert md.endswith("- ⚠ baseline / d / C=1, spec / d / C=1: Accuracy (graded) not measured: no request was "
                       "graded (failed requests are not graded)")
    headers = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', table_html(Model(rows, None)))
    assert {"Decomposed speedup", "Residual", "Accuracy (graded)"} <= set(headers)


def test_the_comparison_table_keeps_to_14_columns_when_closed_and_open_loop_cells_mix():
    """Both load columns would make 14 (the reference's twelve and two): one Load column says each cell's load point
    instead."""
    rows = rows_from([{"dataset": "d", "run": "baseline", "concurrency": 4},
                      {"dataset": "d", "run": "spec", "concurrency": 4, "ci95": {"speedup_vs_baseline": [1.0, 1.2]}},
                      {"dataset": "d", "run": "spec", "concurrency": None, "request_rate": 2.5, "max_concurrency": 8}])
    main = tables_of(markdown(rows))[""]
    assert len(main[0]) == 13 and main[0][2] == "Load" and "Conc" not in main[0] and "Rate/s" not in main[0]
    assert [r[2] for r in main[1:]] == ["C=4", "C=4", "2.5 req/s"]
