"""One reader of a run directory's files for every reader (``run/files_read.py``): meta.json in the mode of who
reads it (resume: strictly; gate: a wrong value dropped and said, a newer file refused; report: a newer file read
and said), and a JSONL line scanned into its record or why not."""

from __future__ import annotations

import json

import pytest

from specbench.errors import ResultsError, RunDirError
from specbench.run.files_read import read_meta, scan_lines
from specbench.schemas.phase import PhaseInfo

WRONG = {"started_at": "t", "notes": {"now": "an object"}}
NEWER = {"schema_version": 2, "started_at": "t"}


def meta_file(tmp_path, data) -> object:
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(data))
    return path


def test_resume_refuses_a_wrong_value_and_a_newer_file_in_one_line(tmp_path):
    for data, why in ((WRONG, "notes: expected a list of texts or objects"), (NEWER, "schema_version 2: written by a newer specbench")):
        with pytest.raises(RunDirError, match=f"^{tmp_path / 'meta.json'}: {why}.*; cannot continue this run$"):
            read_meta(meta_file(tmp_path, data), "resume")


def test_the_gate_drops_a_wrong_value_and_refuses_a_newer_file(tmp_path):
    read = read_meta(meta_file(tmp_path, WRONG), "gate")
    assert read.meta is not None and read.meta.started_at == "t" and read.meta.notes is None
    assert [p.split(": ", 1)[1] for p in read.problems] == ['notes: expected a list of texts or objects, got {"now": "an object"}; ignored']
    with pytest.raises(ResultsError, match="schema_version 2: written by a newer specbench"):
        read_meta(meta_file(tmp_path, NEWER), "gate")


def test_the_report_reads_a_newer_file_and_says_why(tmp_path):
    read = read_meta(meta_file(tmp_path, NEWER), "report")
    assert read.meta is not None and read.meta.started_at == "t" and read.newer == [
        "schema_version 2 (this version reads meta.json up to 1)"]
    assert read_meta(tmp_path / "none.json", "resume").meta is None


def test_a_line_is_its_record_or_why_not_and_a_torn_one_says_so():
    good = json.dumps({"config": "c", "dataset": "d", "concurrency": 1, "request_rate": None, "repeat": 0,
                       "wall_s": 1.0}).encode()
    lines = [good, b"", b'{"config": "c", "datas', b"[1, 2]", b'{"config": 5}', b"\xff" + good]
    got = [(line.number, line.record is not None, line.why and line.why.split(" (")[0], line.torn)
           for line in scan_lines(lines, PhaseInfo)]
    assert [g[:2] for g in got] == [(1, True), (3, False), (4, False), (5, False), (6, False)]
    assert [(why, torn) for _, _, why, torn in got[1:]] == [
        ("not JSON", True), ("not a JSON object", False), ("config: expected text, got 5", False), ("not UTF-8", True)]
    replaced = next(scan_lines([good.replace(b'"c"', b'"c\xff"')], PhaseInfo, replace=True))
    assert replaced.record is not None and replaced.record.config == "c\ufffd"
