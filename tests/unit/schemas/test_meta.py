"""meta.json as a typed record (issue 27, item 3): every meta.json specbench has written reads into
``RunMeta`` and writes back byte for byte; a wrong type is one line naming the file and the key
(strict) or a dropped key said (the report's lenient read); a newer version's keys survive; the
tune analysis stored in it (and in schedule.json) is typed and written back as it was. One rule
for "a number" (``util.numbers``)."""

from __future__ import annotations

import json

import pytest

from specbench.errors import ResultsError
from specbench.measure.best_k import tune_analysis
from specbench.run.readback import read_requests
from specbench.schemas.meta import RunMeta, ServerMeta
from specbench.schemas.plans import Schedule, TuneResult
from specbench.schemas.row_read import rows_from
from specbench.util.jsonio import dumps, read_json
from specbench.util.numbers import finite, is_number
from tests.support.paths import DATA, ROOT, RUNS

#: meta.json as older specbench versions wrote it: the fewest committed runs' files that together hold every key
#: any of them has (meta_versions/), and the runs other tests read
COMMITTED = sorted([DATA / "html" / "run" / "meta.json", *(RUNS / "meta_versions").glob("*.json"), *RUNS.glob("*/meta.json"),
                    *RUNS.glob("modes_table/*/meta.json")])
TUNE_RUN = RUNS / "cpu_tune"  # results/evidence/cpu/cpu_explain-tune: meta, schedule, results and requests


def meta_file(path):
    """A meta.json read strictly (as ``--resume`` reads it, less the one-line wrapping of its refusal)."""
    return RunMeta.from_dict(read_json(path), path)


def as_written(data: object) -> str:
    """The bytes specbench writes for a JSON file (``util.jsonio.write_json``)."""
    return dumps(data, indent=2, default=str) + "\n"


def test_the_committed_runs_are_there():
    assert len(COMMITTED) >= 10 and TUNE_RUN / "meta.json" in COMMITTED


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_meta_json_reads_strictly_and_writes_back_byte_identical(path, tmp_path):
    text = path.read_text()
    meta = RunMeta.from_dict(json.loads(text), path)  # strict: a wrong type would raise
    assert as_written(meta.to_dict()) == text
    meta_file(path).save(tmp_path / "meta.json")
    assert (tmp_path / "meta.json").read_bytes() == path.read_bytes()


def test_attribute_reads_of_a_committed_run():
    meta = meta_file(TUNE_RUN / "meta.json")
    assert meta.suite is not None and meta.suite.raw is not None and meta.suite_name == meta.raw.name
    assert meta.runs and meta.runs[0].resume is False
    assert meta.servers and all(isinstance(s, ServerMeta) for s in meta.servers.values())
    assert meta.comparability is not None and isinstance(meta.comparability.max_tokens, int)
    assert meta.timing is not None and meta.timing.total_s is not None and meta.tune is not None


def test_the_tune_result_is_typed_and_written_back_as_stored():
    meta = meta_file(TUNE_RUN / "meta.json")
    assert meta.tune is not None
    assert isinstance(meta.tune.result, TuneResult)
    stored = json.loads((TUNE_RUN / "meta.json").read_text())["tune"]["result"]
    result = TuneResult.from_dict(stored, "tune.result")
    assert result.cells and result.cells[0].candidates and result.cells[0].candidates[0].k == 0
    assert as_written(result.to_dict()) == as_written(stored)
    schedule = json.loads((TUNE_RUN / "schedule.json").read_text())
    assert [Schedule.from_dict(s).to_dict() for s in schedule["schedules"]] == schedule["schedules"]
    assert as_written([s.to_dict() for s in result.schedules]) == as_written(schedule["schedules"])


def test_the_typed_analysis_reproduces_the_committed_one():
    """The analysis, run again on the committed tune run's rows and requests, writes the same bytes."""
    meta = meta_file(TUNE_RUN / "meta.json")
    rows = rows_from(json.loads((TUNE_RUN / "results.json").read_text()))
    requests = read_requests(TUNE_RUN, quiet=True)
    assert meta.tune is not None and requests
    assert as_written(tune_analysis(rows, requests, meta).to_dict()) == as_written(meta.tune.result.to_dict())


# ---- a newer version's keys, key order, None ----

def test_unknown_keys_at_any_level_are_kept_and_written_back_in_place():
    data = {"specbench_version": "9.0", "future": {"a": 1}, "host": {"platform": "x", "gpu": "H200", "cpus": 2},
            "runs": [{"started_at": "t", "shard": 3}], "servers": {"b": {"engine": "vllm", "next": [1]}}}
    meta = RunMeta.from_dict(data, "meta.json")
    assert meta.unknown == {"future": {"a": 1}} and meta.host is not None and meta.host.unknown == {"gpu": "H200"}
    assert json.dumps(meta.to_dict()) == json.dumps(data)


def test_keys_take_their_place_when_first_set_as_a_dicts_would():
    meta = RunMeta.from_dict({"started_at": "t0", "notes": []})
    meta.updated_at = "t1"
    meta.set_chunk_clock("b", "kernel")
    meta.started_at = "t2"  # already there: stays first
    meta.set("plan_of_a_newer_version", {"x": 1})
    assert list(meta.to_dict()) == ["started_at", "notes", "updated_at", "chunk_clock", "plan_of_a_newer_version"]
    meta.updated_at = None  # None is absent
    assert "updated_at" not in meta.to_dict()


def test_a_key_read_as_null_stays_null():
    data = {"finished_at": None, "host": {"platform": "x", "cpus": None}}
    assert json.dumps(RunMeta.from_dict(data).to_dict()) == json.dumps(data)


def test_the_record_is_versioned_and_reads_a_file_without_the_newer_keys():
    assert RunMeta.VERSION == 1
    old = {"specbench_version": "0.1.0", "suite": {"name": "s", "path": "s.yaml", "raw": {"name": "s"}},
           "comparability": {"model": "m"}, "started_at": "t", "finished_at": "t", "host": {}, "failed_configs": {}}
    meta = RunMeta.from_dict(old)
    assert meta.suite_file is None and meta.weights is None and meta.runs is None and meta.servers is None
    assert meta.to_dict() == old


# ---- wrong types: strict is one line naming file and key; lenient drops and says ----

@pytest.mark.parametrize("data, key", [
    ({"runs": 5}, "runs"), ({"servers": []}, "servers"), ({"comparability": []}, "comparability"),
    ({"comparability": {"configs": ["a"]}}, "comparability.configs"), ({"host": {"cpus": "many"}}, "host.cpus"),
    ({"notes": ["a", 1]}, "notes"), ({"runs": [{"resume": "yes"}]}, "runs[0].resume"),
    ({"servers": {"b": {"pid": 1.5}}}, "servers.b.pid"), ({"suite": {"raw": {"configs": 5}}}, "suite.raw.configs"),
    ({"specbench_version": True}, "specbench_version"),
])
def test_a_wrong_type_is_one_line_naming_the_file_and_key(data, key):
    with pytest.raises(ResultsError) as err:
        RunMeta.from_dict(data, "/r/meta.json")
    assert str(err.value).startswith(f"/r/meta.json: {key}: expected ") and "\n" not in str(err.value)
    problems: list[str] = []
    lenient = RunMeta.from_dict({"started_at": "t", **data}, "/r/meta.json", problems)
    assert len(problems) == 1 and problems[0].startswith(f"/r/meta.json: {key}: ") and problems[0].endswith("; ignored")
    assert lenient.started_at == "t"


def test_not_an_object_is_one_line(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text("[1]")
    with pytest.raises(ResultsError, match=f"^{path}: expected a JSON object, got list$"):
        meta_file(path)
    path.write_text('{"runs": ')
    with pytest.raises(ResultsError, match=f"^{path}:1: not valid JSON"):
        meta_file(path)


def test_nan_and_infinity_read_as_null():
    meta = RunMeta.from_dict({"timing": {"total_s": float("nan"), "harness_share": float("inf")}})
    assert meta.timing is not None and meta.timing.total_s is None and meta.timing.harness_share is None


# ---- one rule for a number ----

@pytest.mark.parametrize("value, number", [
    (1, True), (0.5, True), (-3, True), (True, False), (False, False), (float("nan"), False), (float("inf"), False),
    (float("-inf"), False), ("1", False), (None, False), ([1], False), (10 ** 400, False), (-(10 ** 400), False),
    (10 ** 300, True)])  # JSON's 400-digit integer is no number a float can hold (it once raised OverflowError)
def test_is_number_is_a_finite_int_or_float_never_a_bool(value, number):
    assert is_number(value) is number


def test_the_gate_and_the_report_share_the_one_rule():
    from specbench import gate
    from specbench.run import readback as load
    from specbench.schemas import row_read

    assert gate.is_number is is_number and load.is_number is is_number and row_read.is_number is is_number
    assert not gate.is_number(float("nan"))  # the gate's own rule let NaN through


def test_finite_replaces_non_finite_floats_at_any_depth():
    assert finite({"a": [1.0, float("nan"), (float("inf"), 2)], "b": {"c": float("-inf")}, "d": True}) == \
        {"a": [1.0, None, [None, 2]], "b": {"c": None}, "d": True}
