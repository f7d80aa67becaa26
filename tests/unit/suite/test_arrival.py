"""``load.arrival``: each mode loads into typed values, a trace file is read where the suite is (Mooncake's JSONL,
Azure's CSV, specbench's own lines with text and session), and every bad input is one line naming the file
and key — a trace's bad line by its number."""

from pathlib import Path

import pytest
import yaml

from specbench.errors import SuiteError
from specbench.schemas.notes import Note, NoteCode
from specbench.suite import arrival, read_suite

# Mooncake's published example lines (kvcache-ai/Mooncake FAST25-release/README.md, as AIPerf's docs show them)
MOONCAKE = """{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}
{"timestamp": 10535, "input_length": 672, "output_length": 26, "hash_ids": [46, 47]}
{"timestamp": 27482, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}
"""
# the first rows of Azure's AzureLLMInferenceTrace_conv.csv (Azure/AzurePublicDataset)
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2224670,879,55
"""


def suite(tmp_path: Path, load: dict, files: dict[str, str] | None = None) -> Path:
    (tmp_path / "p.jsonl").write_text('{"prompt": "hello"}\n')
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "model": "smol", "configs": [{"name": "baseline", "url": "http://h:1"}],
                                    "datasets": [{"name": "p", "path": "p.jsonl"}], "load": load}))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(SuiteError) as info:
        read_suite(path)
    lines = str(info.value).splitlines()
    assert all(line.startswith(f"{path}: load.") for line in lines), lines
    return lines


def test_poisson_is_the_default_and_its_name_alone_is_enough(tmp_path):
    assert read_suite(suite(tmp_path, {"request_rate": 2})).load.arrival.kind == "poisson"
    loaded = read_suite(suite(tmp_path, {"request_rate": 2, "arrival": "poisson"}))
    assert loaded.load.arrival.kind == "poisson" and "arrival" not in loaded.comparability().to_dict()


def test_gamma_keeps_the_swept_rates_and_joins_the_comparability(tmp_path):
    s = read_suite(suite(tmp_path, {"request_rate": [1, 4], "arrival": {"kind": "gamma", "burstiness": 0.5}}))
    assert s.load.request_rate == (1.0, 4.0) and s.load.arrival.burstiness == 0.5
    assert s.comparability().to_dict()["arrival"] == {"kind": "gamma", "burstiness": 0.5}


def test_a_ramp_is_its_cells_end_rate(tmp_path):
    s = read_suite(suite(tmp_path, {"concurrency": 8, "arrival": {"kind": "ramp", "shape": "exponential", "start": 1,
                                                                  "end": 16, "duration_s": 30}}))
    a = s.load.arrival
    assert (a.shape, a.start, a.end, a.duration_s) == ("exponential", 1.0, 16.0, 30.0)
    assert s.load.request_rate == (16.0,) and s.load.concurrency == (8,)  # 8: the in-flight cap
    assert a.note() == Note.of(NoteCode.ARRIVALS_RAMP, shape="exponential", start=1.0, end=16.0, duration_s=30.0,
                               burstiness=1.0)  # worded in report/notes.py (tests/unit/report/test_notes.py)


def test_a_mooncake_trace_is_read_in_milliseconds_and_scaled(tmp_path):
    s = read_suite(suite(tmp_path, {"arrival": {"kind": "trace", "path": "t.jsonl", "time_scale": 0.5}}, {"t.jsonl": MOONCAKE}))
    a = s.load.arrival
    assert a.format == "mooncake" and [(t.at_s, t.input_length, t.output_length, t.line) for t in a.trace] == [
        (0.0, 655, 52, 1), (10.535 * 0.5, 672, 26, 2), (27.482 * 0.5, 655, 52, 3)]
    assert s.load.request_rate == (float(f"{2 / 13.741:.4g}"),)  # 2 gaps over 13.741 s: the trace's mean rate
    assert len(a.trace_sha256 or "") == 64 and s.comparability().to_dict()["arrival"]["time_scale"] == 0.5


def test_an_azure_trace_is_read_from_its_csv(tmp_path):
    a = read_suite(suite(tmp_path, {"arrival": {"kind": "trace", "path": "a.csv"}}, {"a.csv": AZURE})).load.arrival
    assert a.format == "azure"
    assert [t.at_s for t in a.trace] == pytest.approx([0.0, 4.314579, 4.541877])
    assert [(t.input_length, t.output_length, t.line) for t in a.trace] == [(374, 44, 2), (396, 109, 3), (879, 55, 4)]


def test_specbench_lines_carry_text_and_session(tmp_path):
    trace = ('{"timestamp": 0, "output_length": 3, "text": "say hi", "session_id": 7}\n\n'
             '{"timestamp": 500, "input_length": 10, "output_length": 0, "session_id": "a"}\n')
    a = read_suite(suite(tmp_path, {"arrival": {"kind": "trace", "path": "t.jsonl"}}, {"t.jsonl": trace})).load.arrival
    assert [(t.text, t.session_id, t.input_length, t.line) for t in a.trace] == [("say hi", "7", None, 1), (None, "a", 10, 3)]


@pytest.mark.parametrize("arrival,load,files,want", [
    ({"kind": "bursty"}, {}, {}, "load.arrival.kind: expected one of poisson, gamma, ramp, trace, got 'bursty'"),
    ("bursty", {}, {}, "load.arrival: expected one of poisson, gamma, ramp, trace, got 'bursty'"),
    ({"burstiness": 2}, {}, {}, "load.arrival.kind: expected one of poisson, gamma, ramp, trace, got nothing"),
    ("gamma", {"request_rate": 2}, {}, "load.arrival.burstiness: required for gamma arrivals"),
    ({"kind": "gamma", "burstiness": 0}, {"request_rate": 2}, {}, "load.arrival.burstiness: expected a number above 0"),
    ({"kind": "gamma", "burstiness": -1}, {"request_rate": 2}, {}, "load.arrival.burstiness: expected a number above 0"),
    ({"kind": "gamma", "burstiness": 2}, {}, {}, "load.arrival: gamma arrivals need load.request_rate"),
    ({"kind": "poisson", "burstiness": 2}, {"request_rate": 2}, {}, "load.arrival.burstiness: not a key of poisson"),
    ({"kind": "ramp", "start": 1, "end": -4}, {}, {}, "load.arrival.end: expected a number from 0.001 to 100000, got -4"),
    ({"kind": "ramp", "start": 0, "end": 4}, {}, {}, "load.arrival.start: expected a number from 0.001"),
    ({"kind": "ramp", "start": 1}, {}, {}, "load.arrival.end: required for a ramp"),
    ({"kind": "ramp", "start": 1, "end": 4, "duration_s": 0}, {}, {}, "load.arrival.duration_s: expected a number above 0"),
    ({"kind": "ramp", "start": 1, "end": 4, "shape": "cubic"}, {}, {}, "load.arrival.shape: expected one of linear, exponential"),
    ({"kind": "ramp", "start": 1, "end": 4}, {"request_rate": 3}, {}, "load.request_rate: not with load.arrival ramp"),
    ({"kind": "trace"}, {}, {}, "load.arrival.path: required for a trace"),
    ({"kind": "trace", "path": "none.jsonl"}, {}, {}, "none.jsonl: file not found"),
    ({"kind": "trace", "path": "t.jsonl", "time_scale": 0}, {}, {"t.jsonl": MOONCAKE}, "load.arrival.time_scale: expected a number above 0"),
    ({"kind": "trace", "path": "t.jsonl", "format": "sharegpt"}, {}, {"t.jsonl": MOONCAKE}, "load.arrival.format: expected one of mooncake, azure"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": MOONCAKE.replace("10535", "-5")}, "t.jsonl: line 2: timestamp -5 is negative"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": MOONCAKE.replace("27482", "9000")},
     "t.jsonl: line 3: timestamp 9000 is before line 2's (10535): a trace's lines are in time order"),
    ({"kind": "trace", "path": "a.csv"}, {}, {"a.csv": AZURE.replace("18:15:51.22", "18:15:41.22")},
     "a.csv: line 4: TIMESTAMP 2023-11-16 18:15:41.2224670 is before line 3's"),
    ({"kind": "trace", "path": "a.csv"}, {}, {"a.csv": AZURE.replace("GeneratedTokens", "Out")}, "a.csv: line 1: an Azure trace's header"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": MOONCAKE.replace('"output_length": 26', '"output_length": -2')},
     "t.jsonl: line 2: output_length: expected an integer from 0 to 10000000, got -2"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": '{"timestamp": 0, "output_length": 2}\n'},
     "t.jsonl: line 1: input_length: expected an integer"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": MOONCAKE + "{oops\n"}, "t.jsonl: line 4: not JSON"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": "\n"}, "t.jsonl: no requests in it"),
    ({"kind": "trace", "path": "t.jsonl"}, {}, {"t.jsonl": MOONCAKE.replace("10535", "0").replace("27482", "0")},
     "every request at the same time"),
    ({"kind": "trace", "path": "t.jsonl"}, {"request_rate": 1}, {"t.jsonl": MOONCAKE}, "load.request_rate: not with load.arrival trace"),
])
def test_every_bad_arrival_is_one_line_naming_the_key(tmp_path, arrival, load, files, want):
    lines = problems(suite(tmp_path, {**load, "arrival": arrival}, files))
    assert len(lines) == 1 and want in lines[0], lines


def test_a_trace_that_cannot_be_read_names_its_file(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    [line] = problems(suite(tmp_path, {"arrival": {"kind": "trace", "path": "dir.jsonl"}}))
    assert line.endswith("dir.jsonl: is a directory, not a trace file")
    (tmp_path / "b.jsonl").write_bytes(b"\xff\xfe")
    [line] = problems(suite(tmp_path, {"arrival": {"kind": "trace", "path": "b.jsonl"}}))
    assert line.endswith("b.jsonl: not UTF-8 text")


def test_a_trace_past_its_bounds_is_refused_before_it_is_held(tmp_path, monkeypatch):
    monkeypatch.setattr(arrival, "MAX_TRACE_LINES", 2)
    [line] = problems(suite(tmp_path, {"arrival": {"kind": "trace", "path": "t.jsonl"}}, {"t.jsonl": MOONCAKE}))
    assert line.endswith("t.jsonl: line 3: more than 2 requests: cut the trace")
    monkeypatch.setattr(arrival, "MAX_TRACE_BYTES", 100)
    [line] = problems(suite(tmp_path, {"arrival": {"kind": "trace", "path": "t.jsonl"}}, {"t.jsonl": MOONCAKE}))
    assert line.endswith("t.jsonl: larger than 100 bytes: cut the trace")
