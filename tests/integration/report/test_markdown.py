"""`specbench report`: the reference markdown table byte for byte, CSV / JSON renderings, errors."""

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.report import render
from specbench.report.markdown import markdown
from specbench.run.readback import read_results
from specbench.schemas.meta import RunMeta
from specbench.schemas.row_read import rows_from
from tests.support import paths
from tests.support.md_tables import tables_of

DATA = paths.DATA / "report"
RESULTS = DATA / "results_example.json"
MD = DATA / "results_example.md"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return json.loads(RESULTS.read_text())


@pytest.fixture(scope="module")
def rows(records):
    return rows_from(records)


@pytest.fixture(scope="module")
def expected_md() -> str:
    return MD.read_text()


def test_local_copies_match_shared_reference(shared):
    ref = shared / "reference"
    if not (ref / "results_example.json").exists():
        pytest.skip("shared reference not present")
    assert (ref / "results_example.json").read_bytes() == RESULTS.read_bytes()
    assert (ref / "results_example.md").read_bytes() == MD.read_bytes()


def test_render_markdown_is_the_reference_exactly(rows, expected_md):
    assert not expected_md.endswith("\n")
    assert render(rows, "markdown") == expected_md


def test_cli_report_markdown_prints_reference(capsys, expected_md):
    assert main(["report", str(RESULTS), "--format", "markdown"]) == 0
    out = capsys.readouterr()
    assert out.out == expected_md + "\n"
    assert out.err == ""
    # markdown is the default format
    assert main(["report", str(RESULTS)]) == 0
    assert capsys.readouterr().out == expected_md + "\n"


def test_console_script_report(expected_md):
    exe = shutil.which("specbench") or str(Path(sys.executable).parent / "specbench")
    proc = subprocess.run([exe, "report", str(RESULTS), "--format", "markdown"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected_md + "\n"


def test_report_of_a_run_directory(tmp_path, capsys, expected_md):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RESULTS, run / "results.json")
    assert main(["report", str(run)]) == 0
    assert capsys.readouterr().out == expected_md + "\n"


def test_report_concatenates_several_runs(tmp_path, capsys, records):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(records[:3]))
    second.write_text(json.dumps(records[3:6]))
    assert main(["report", str(first), str(second)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 6
    assert [l.split(" | ")[0:2] for l in lines[2:]] == [["| " + r["dataset"], r["run"]] for r in records[:6]]


# ---------------------------------------------------------------- CSV


def test_csv_one_row_per_cell_every_key(records, capsys):
    assert main(["report", str(RESULTS), "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert text.endswith("\n") and not text.endswith("\n\n")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(records) == 18
    assert list(rows[0]) == list(records[0])  # every key, in record order
    for got, want in zip(rows, records):
        for key, value in want.items():
            if value is None:
                assert got[key] == "", key
            elif isinstance(value, float):
                assert float(got[key]) == value, key  # full precision, not the table's rounding
            else:
                assert got[key] == str(value), key


def test_csv_union_of_keys_and_nested_values():
    recs = [{"dataset": "a", "run": "x", "errors": {"HTTP 500": 2}, "acceptance_per_position": [0.5, 0.25]},
            {"dataset": "b", "run": "y", "extra": 3, "errors": None}]
    rows = list(csv.reader(io.StringIO(render(rows_from(recs), "csv"))))
    assert rows[0] == ["dataset", "run", "acceptance_per_position", "errors", "extra"]  # the row's order, then others
    assert rows[1] == ["a", "x", "[0.5, 0.25]", '{"HTTP 500": 2}', ""]
    assert rows[2] == ["b", "y", "", "", "3"]


# ---------------------------------------------------------------- JSON


def test_json_round_trip(records, rows, capsys):
    assert json.loads(render(rows, "json")) == records
    assert main(["report", str(RESULTS), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == records


def test_unknown_format_raises(rows):
    with pytest.raises(ValueError, match="unknown format 'html'"):
        render(rows, "html")


# ---------------------------------------------------------------- missing values and specbench extras


def test_missing_values_print_as_dash_never_zero():
    row = {"dataset": "d", "run": "r", "requests": 3, "output_throughput_tps": 10.0}
    line = markdown(rows_from([row])).splitlines()[2]
    assert line == "| d | r | 3 | 10.00 | — | —/— | —/— | —/— | —/— | — | -/-/- | — |"


def test_extra_columns_for_specbench_runs():
    rows = [
        {"dataset": "d", "run": "baseline", "requests": 4, "concurrency": 1, "status": "ok", "failed_requests": 0},
        {"dataset": "d", "run": "spec", "requests": 2, "concurrency": 4, "status": "failed", "failed_requests": 2,
         "fidelity_identical": 0.5, "ci95": {"speedup_vs_baseline": [1.1, 1.3]}, "speedup_vs_baseline": 1.2},
    ]
    md = markdown(rows_from(rows), RunMeta(notes=["first note", "second note"]))
    tables = tables_of(md)
    header, _, spec = tables[""]
    assert header[:3] == ["Dataset", "Run", "Conc"] and header[-1] == "Accept len"
    assert "Speedup 95% CI" not in header and len(header) == 13  # the reference's twelve and Conc
    assert spec[2] == "4" and spec[header.index("Speedup")] == "1.20x [1.10–1.30]"  # half-width 0.10: two decimals
    # fidelity under Per request, the failed cell under Checks, each with the identity columns
    assert tables["Per request"] == [["Dataset", "Run", "Conc", "Same output"], ["d", "baseline", "1", "—"],
                                     ["d", "spec", "4", "50.00%"]]
    assert tables["Checks"][0] == ["Dataset", "Run", "Conc", "Failed"] and tables["Checks"][2][-1] == "cell failed"
    lines = md.split("\n")
    assert lines[-4:-1] == ["", "- first note", "- second note"]
    assert lines[-1].startswith("- ⚠ spec / d / C=4: cell failed (2 failed requests")


def test_markdown_and_html_tables_share_one_column_spec():
    """An interrupted cell is said in both renderings, and a rate sweep gets the same Rate/s column; the HTML
    table holds every markdown table's columns, each once, in the same order."""
    import re

    from specbench.report.html import table_html
    from specbench.report.model import Model

    rows = [{"dataset": "d", "run": "baseline", "requests": 4, "request_rate": 4.0, "status": "ok", "failed_requests": 0},
            {"dataset": "d", "run": "spec", "requests": 1, "request_rate": 16.0, "status": "interrupted",
             "failed_requests": 0, "ci95": {"speedup_vs_baseline": [None, None]}}]
    tables = tables_of(markdown(rows_from(rows)))
    html = table_html(Model(rows_from(rows), None))
    headers = [h for t in tables.values() for h in t[0]]
    assert re.findall(r'<th scope="col"[^>]*>(.*?)</th>', html) == list(dict.fromkeys(headers))
    assert tables[""][0][2] == "Rate/s" and tables["Checks"][0] == ["Dataset", "Run", "Rate/s", "Failed"]
    assert tables["Checks"][2][-1] == "cell interrupted"
    assert "cell interrupted" in html


# ---------------------------------------------------------------- errors


def test_missing_results_file_exit_2(tmp_path, capsys):
    missing = tmp_path / "nope" / "results.json"
    assert main(["report", str(missing)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1 and str(missing) in lines[0]


def test_directory_without_results_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0] and "results.json" in err[0]


def test_bad_json_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "results.json"
    bad.write_text('[\n  {"dataset": "a",\n  oops}\n]')
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{bad}:3:" in err[0]


def test_not_a_list_of_records(tmp_path, capsys):
    bad = tmp_path / "results.json"
    bad.write_text('{"dataset": "a"}')
    assert main(["report", str(bad)]) == 2
    assert "expected a JSON list" in capsys.readouterr().err


def test_read_results_reads_meta(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RESULTS, run / "results.json")
    (run / "meta.json").write_text('{"suite": {"name": "x"}}')
    res = read_results([run])
    assert res.meta is not None and res.meta.to_dict() == {"suite": {"name": "x"}} and len(res.rows) == 18


# ---------------------------------------------------------------- the format registry


def test_format_choices_are_the_registry(capsys, tmp_path):
    from specbench.report.formats import FORMATS

    with pytest.raises(SystemExit) as exit_:
        main(["report", str(RESULTS), "--format", "bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert all(f"'{name}'" in err for name in FORMATS) and set(FORMATS) == {"markdown", "json", "csv", "html", "parquet"}
    assert main(["report", str(tmp_path), "--format", "parquet"]) == 2  # a directory of runs has no parquet form
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "--format parquet" in lines[0]
    assert main(["report", str(RESULTS), "--format", "parquet"]) == 2  # needs --output
    assert "--output" in capsys.readouterr().err


def test_requests_of_a_run_archived_compressed_are_read_and_lines_end_at_newline_only(tmp_path):
    """An archived run may keep requests.jsonl gzipped (the committed H200 plan run does); either way a
    line ends at \\n only, so a text holding U+2028 stays one request."""
    import gzip

    from specbench.run.readback import read_requests

    rec = {"prompt_id": "p1", "dataset": "d", "config": "c", "send_time": 1.0, "chunk_times": [1.1, 1.2],
           "chunk_tokens": [1, 2], "text": "a\u2028b\u0085c"}
    lines = "".join(json.dumps({**rec, "send_time": t}, ensure_ascii=False) + "\n" for t in (1.0, 2.0))  # two requests
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir()
    packed.mkdir()
    (plain / "requests.jsonl").write_text(lines, encoding="utf-8")
    (packed / "requests.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    for run in (plain, packed):
        got = read_requests(run, quiet=True)
        assert got is not None and [r.text for r in got] == ["a\u2028b\u0085c"] * 2
