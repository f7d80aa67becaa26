"""ResultRow: results.json rows byte-identical to the dict rows they replace, and one strict loader."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

from specbench.errors import ResultsError
from specbench.measure.quality import add_quality
from specbench.measure.slo import attach_capacity
from specbench.measure.summarize import add_comparisons, summarize_cell
from specbench.run.readback import read_run
from specbench.schemas.cell import Cell
from specbench.schemas.row import FIELD_NAMES, REFERENCE_KEYS, ResultRow
from specbench.schemas.row_read import read_row
from specbench.schemas.slo_search import SloSearch
from tests.support.paths import DATA

#: written by the dict rows of commit a3b46e1 (summarize_cell → add_comparisons → add_quality →
#: order_row → attach_capacity) for the simulated sweep of tests/data/html/make_fixture.py; re-recorded once for
#: the log-scale speedup interval over repeats (issue 38: its ci95.speedup_vs_baseline and speedup_ci_method only);
#: re-recorded once for the key order of the metric groups (issue 41: keys in declaration order, not the order they
#: were set in; every value equal to the rows before, key order aside); re-recorded once for issue 42's keys (the
#: steady window's steady_*, accepted_per_step*, and the steady window's line in notes; every other value as before);
#: re-recorded once for the one-wave rule (8 prompts at C=8: no replacement, so no steady window): the five C=8
#: cells that had one lost their steady_* values (null) and gained the reason in steady_note and notes, nothing else
GOLDEN = DATA / "rows" / "results_golden.json"


def _fixture():
    spec = importlib.util.spec_from_file_location("make_fixture", DATA / "html" / "make_fixture.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows() -> list[ResultRow]:
    mf = _fixture()
    phases, records = mf.simulate()
    rows = []
    for dataset in mf.DATASETS:
        for conc in mf.CONCURRENCY:
            for config, method, k in mf.CONFIGS:
                cp = [p for p in phases if p.cell == Cell(config, dataset, conc)]
                cr = [r for r in records if (r.config, r.dataset, r.concurrency) == (config, dataset, conc)]
                rows.append(summarize_cell(cp, cr, method=method, k=k))
    add_comparisons(rows, records, "baseline")
    suite = SimpleNamespace(configs=[SimpleNamespace(name=c) for c, _, _ in mf.CONFIGS], baseline=SimpleNamespace(name="baseline"),
                            load=SimpleNamespace(slo=None, grade=("gsm8k",)), cost=None)
    add_quality(rows, phases, records, suite)
    attach_capacity(rows, {"baseline": {"gsm8k": SloSearch(95, 2.0, [2.0, 3.0], 4)},
                           "ngram_k3": {"gsm8k": SloSearch(95, 3.0, [3.0, 4.0], 5)}}, "baseline")
    return rows


def test_results_json_is_byte_identical_to_the_dict_rows():
    rows = _rows()
    assert json.dumps([r.to_dict() for r in rows], indent=2) + "\n" == GOLDEN.read_text()


def test_a_row_read_back_writes_the_same_json(tmp_path):
    (tmp_path / "results.json").write_text(GOLDEN.read_text())
    run = read_run(tmp_path, quiet=True)
    assert run.problems == []
    assert json.dumps([r.to_dict() for r in run.rows], indent=2) + "\n" == GOLDEN.read_text()
    assert [r.to_dict(reference_first=False) for r in run.rows] == json.loads(GOLDEN.read_text())


def test_unknown_keys_are_kept_and_known_ones_typed_and_written_in_the_rows_order():
    data = {"run": "spec", "zz_newer_metric": {"a": 1}, "dataset": "d", "acceptance_pos_4": 0.5, "status": "ok",
            "output_throughput_tps": 12.5}
    row = read_row(data, where="x/results.json")
    assert row.output_throughput_tps == 12.5 and row.unknown == {"zz_newer_metric": {"a": 1}, "acceptance_pos_4": 0.5}
    assert row.to_dict(reference_first=False) == data
    assert list(row.to_dict(reference_first=False)) == ["dataset", "run", "output_throughput_tps", "acceptance_pos_4",
                                                        "status", "zz_newer_metric"]
    assert list(row.to_dict())[:len(REFERENCE_KEYS)] == REFERENCE_KEYS


def test_a_wrong_type_is_one_line_naming_file_record_and_key():
    problems: list[str] = []
    row = read_row({"run": "r", "dataset": "d", "status": 3, "slo_attainment": "high"}, "f.json", 2, problems)
    assert row.status is None and row.slo_attainment is None
    assert problems == ["f.json: record 2 (r / d): status: expected text, got 3; shown as —",
                        "f.json: record 2 (r / d): slo_attainment: expected a finite number, got 'high'; shown as —"]
    with pytest.raises(ResultsError, match=r"^f.json: record 0 \(r / d\): status: expected text, got 3 \(and 1 more\)$"):
        read_row({"run": "r", "dataset": "d", "status": 3, "slo_attainment": "high"}, "f.json")


def test_every_key_the_golden_rows_carry_is_a_field_or_a_run_time_position():
    keys = {k for r in json.loads(GOLDEN.read_text()) for k in r}
    assert {k for k in keys if k not in FIELD_NAMES} == {"acceptance_pos_4", "acceptance_pos_5"}


#: sha256 of the HTML page that commit a3b46e1 (dict rows) rendered from GOLDEN with the html fixture's
#: meta.json and requests.jsonl; the markdown it rendered is tests/data/rows/report_golden.md (both
#: re-rendered since for the decomposition note's new wording, the Req accept len tooltips, and load labels C=8
#: (one label); then for the tables by question (report/tables.py): the markdown's comparison table is the
#: reference columns + Conc + CI, Why / Per request / Quality & cost / Checks below it, the all-— Accuracy column
#: left out with its reason under the tables; the HTML table groups the same columns under one header row, every
#: header with its definition as tooltip; no number changed; then the Speedup 95% CI tooltip names the
#: "varies between servers" flag; then the latency CDF headings say the load point by its one label, C=8, not
#: "concurrency 8"; then the speedup's interval over repeats on the log scale (issue 38 item 6): only the
#: Speedup 95% CI of the repeat cells moved; then the header tooltips from the results fields' own definitions
#: (issue 41: only the title attributes of the header cells moved); then issue 42: the Steady state table, the line
#: under the comparison table saying its headline is over whole passes, the steady window's notes and the accepted
#: tokens per step plot (no other number moved); then numbers with their spread (issue 41 item 7): Speedup holds its
#: 95% CI ("Speedup 95% CI" gone) and Output tok/s its ± σ over repeats, each to the digits its spread leaves
#: meaningful: only the comparison table's header and cells moved; the notes (stored as codes since, item 3) did not;
#: then the one-wave rule (GOLDEN above): the five one-wave C=8 cells' Steady state cells went to —, the markdown
#: gained their reason under the tables (the page showed no row notes); nothing else moved; then the page's Notes: the
#: markdown's lines under the tables (report/notes.py ``lines``: the failed cell's ⚠, the grouped steady-window and
#: accuracy notes) as a Notes section at the end, ⚠ items class "warning" (one CSS rule), with a Notes link in the
#: nav; no table cell or plot moved
PAGE_SHA256 = "8be321c08fd45bb5a41c3f707ce252cc855bc916d72fce28bdbdca2592ed5ac5"


def test_report_pages_render_byte_identical_from_typed_rows(tmp_path):
    import hashlib
    import shutil

    from specbench.report.html import write_html
    from specbench.report.markdown import markdown

    for name in ("meta.json", "requests.jsonl"):
        shutil.copy(DATA / "html" / "run" / name, tmp_path / name)
    shutil.copy(GOLDEN, tmp_path / "results.json")
    run = read_run(tmp_path, quiet=True)
    assert markdown(run.rows, run.meta, run.explained) == (DATA / "rows" / "report_golden.md").read_text()
    page = write_html([tmp_path], tmp_path / "report.html").read_bytes()
    assert hashlib.sha256(page).hexdigest() == PAGE_SHA256


def test_plots_take_load_points_from_the_cell_and_keep_two_caps_at_one_rate_apart():
    """An open-loop sweep at one rate with two in-flight caps is two cells; the report model used to
    key plots by (kind, value) alone and merged them."""
    from specbench.report.model import Model
    from specbench.schemas.cell import Cell, LoadPoint, load_of
    from specbench.schemas.row_read import rows_from

    base = {"dataset": "d", "run": "baseline", "method": "baseline", "request_rate": 4.0, "concurrency": None,
            "status": "ok", "output_throughput_tps": 10.0}
    rows = rows_from([{**base, "max_concurrency": 8}, {**base, "max_concurrency": 32, "output_throughput_tps": 20.0}])
    m = Model(rows, None)
    assert [ld.concurrency for ld in m.loads] == [8, 32]
    assert m.row("baseline", "d", LoadPoint(32, 4.0)).output_throughput_tps == 20.0
    assert load_of(rows[0]) == Cell.of_row(rows[0]).point
    closed = rows_from([{**base, "request_rate": None, "concurrency": None}])[0]
    assert load_of(closed).label == "load not recorded"
