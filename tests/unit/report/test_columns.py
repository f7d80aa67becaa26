"""docs/metrics.md's column reference is generated from the column entries (report/columns.py,
report/quality_columns.py): header, unit, definition and table in one place.

Regenerate it: ``SPECBENCH_WRITE_DOCS=1 pytest tests/unit/report/test_columns.py``.
"""

import os

from specbench.report.colspec import GROUPS
from specbench.report.columns import all_columns, reference_markdown
from specbench.schemas.row import FIELD_NAMES
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "metrics.md"
START, END = "<!-- columns:start -->", "<!-- columns:end -->"


def spliced(text: str) -> str:
    """``text`` with the generated reference between the two markers."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n\n{reference_markdown()}\n{END}{tail}"


def test_docs_metrics_is_the_column_reference():
    if os.environ.get("SPECBENCH_WRITE_DOCS") == "1":
        DOC.write_text(spliced(DOC.read_text()))
    text = DOC.read_text()
    assert text == spliced(text), ("docs/metrics.md disagrees with report/columns.py; regenerate it: "
                                   "SPECBENCH_WRITE_DOCS=1 pytest tests/unit/report/test_columns.py")


def test_every_column_says_what_it_is_and_which_table_it_is_in():
    columns = all_columns()
    assert len({c.header for c in columns}) == len(columns)
    for c in columns:
        assert c.group in GROUPS and len(c.definition) > 20, c.header
        assert c.keys and set(c.keys) <= set(FIELD_NAMES), (c.header, set(c.keys) - set(FIELD_NAMES))
        assert c.header in reference_markdown()


def test_a_column_says_what_its_first_field_means_and_in_its_unit():
    """A column's definition and unit are its field's declaration (schemas/row_*.py), not a second text."""
    from specbench.schemas.row import ResultRow

    for c in all_columns():
        spec = ResultRow.specs()[c.keys[0]]
        assert c.definition.startswith(spec.doc), c.header
        assert c.unit is not None or c.shown_unit == {"share": "%"}.get(spec.unit, spec.unit), c.header


def test_speedup_carries_its_interval_and_output_tok_s_its_spread_over_repeats():
    """One cell each (issue 41 item 7): the comparison table keeps the reference's twelve columns."""
    from specbench.schemas.row_read import rows_from

    cells = {c.header: c for c in all_columns()}
    row, = rows_from([{"dataset": "d", "run": "spec", "output_throughput_tps": 327.254, "speedup_vs_baseline": 1.511,
                       "std": {"output_throughput_tps": 4.1}, "ci95": {"speedup_vs_baseline": [1.223, 1.860]},
                       "speedup_repeats": [1.3, 1.7], "speedup_varies": True, "speedup_repeats_fresh_servers": True}])
    assert cells["Speedup"].cell(row) == "1.51x [1.22–1.86] ⚠ varies between servers: 1.30–1.70×"
    assert cells["Output tok/s"].cell(row) == "327 ± 4"
    one, = rows_from([{"dataset": "d", "run": "spec", "output_throughput_tps": 327.254, "speedup_vs_baseline": 1.511}])
    assert (cells["Speedup"].cell(one), cells["Output tok/s"].cell(one)) == ("1.511x", "327.25")  # the reference's
    assert "Speedup 95% CI" not in cells
