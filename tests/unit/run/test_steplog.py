"""Reading a launch folder's step log: every bad line skipped and counted with its reason, passes cut by
their /metrics scrapes, a cell's keys from its phases."""

import json

import pytest

from specbench.errors import SuiteError
from specbench.run.preflight import preflight
from specbench.run.steplog import read_launch, steplog_results
from specbench.schemas.acceptance import AcceptanceWindow
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.row import ResultRow
from specbench.suite import parse_suite
from tests.support.steplog import WALL0, gpu_row, sched_row, write_launch


def phase(repeat, t0, t1, folder="logs/steplog/spec-s0", accepted=None):
    return PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=repeat, wall_s=1.0,
                     acceptance=AcceptanceWindow.from_dict({"spec_accepted_tokens": accepted}), scraped_before=t0, scraped_after=t1, steplog=folder)


def test_bad_lines_are_skipped_and_counted_never_raised(tmp_path):
    good = [sched_row(n, WALL0 + n, [3], 3) for n in (1, 2)]
    bad = [json.dumps(sched_row(3, WALL0 + 3, [3], 3, hist=[1])), "{not json", json.dumps([1, 2]),
           json.dumps({**sched_row(4, WALL0 + 4, [2], 3), "num_tokens": "many"}), "#torn" + json.dumps(good[0])[:20]]
    folder = write_launch(tmp_path / "l", good, [gpu_row(1, WALL0 + 1, None), gpu_row(2, WALL0 + 2, 1000.0)],
                          extra_lines={"sched": bad, "gpu": ['{"step": -1}']})
    (folder / "header-99.json").write_text("{broken")
    log = read_launch(folder)
    assert [s.sched.step for s in log.steps] == [1, 2] and all(s.gpu is not None for s in log.steps)
    assert log.skipped == {"sched: hist": 1, "sched: not JSON": 1, "sched: expected a JSON object, got list": 1,
                           "sched: num_tokens": 1, "sched: torn or overlong line": 1, "gpu: step": 1,
                           "header: unreadable": 1}
    assert len(log.headers) == 2


def _keys(stats):
    """The one cell's step-log keys as its row carries them."""
    (cell,) = stats.values()
    row = ResultRow.start("d", "c")
    cell.add_to(row)
    return row.to_dict(reference_first=False)


def test_passes_are_cut_by_their_scrapes_and_summed_per_cell(tmp_path):
    rows = [sched_row(n, WALL0 + n, [3], 3) for n in range(1, 9)]  # warm-up 1-2, pass 3-5, warm-up 6, pass 7-8
    write_launch(tmp_path / "logs/steplog/spec-s0", rows)
    phases = [phase(0, WALL0 + 2.5, WALL0 + 5.5, accepted=6), phase(1, WALL0 + 6.5, WALL0 + 8.5, accepted=4)]
    stats = steplog_results(tmp_path, phases)
    keys = _keys(stats)
    assert keys["steplog_steps"] == 5 and keys["steplog_accepted"] == 10 and keys["steplog_counter_accepted"] == 10
    assert keys["steplog_accepted_agree"] is True and keys["steplog_window"] == "/metrics scrapes"
    assert keys["steplog_step_mean_ms"] == 1000.0  # scheduler wall: 1 s apart, each pass's first step left out
    assert keys["steplog_error"] is None and keys["steplog_skipped_rows"] is None


def test_a_missing_folder_or_window_is_said_not_raised(tmp_path):
    stats = steplog_results(tmp_path, [phase(0, WALL0, WALL0 + 1, folder="logs/steplog/gone-s0"),
                                       phase(1, None, None, folder="../../etc")])
    keys = _keys(stats)
    assert "gone-s0: no such folder" in keys["steplog_error"] and "../../etc" in keys["steplog_error"]
    assert keys["steplog_window"] is None and "steplog_steps" not in keys


def test_a_launch_is_read_again_once_its_files_grow(tmp_path):
    folder = write_launch(tmp_path / "l", [sched_row(1, WALL0 + 1, [2], 3)])
    first = read_launch(folder)
    assert read_launch(folder) is first  # unchanged: parsed once
    with (folder / "sched-1.jsonl").open("a") as f:
        f.write(json.dumps(sched_row(2, WALL0 + 2, [2], 3)) + "\n")
    assert [s.sched.step for s in read_launch(folder).steps] == [1, 2]


def test_sglang_with_a_step_log_is_refused_before_any_server_starts(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n')
    suite = parse_suite({"name": "s", "model": "m", "engine": "sglang", "server": {"steplog": "steps"},
                         "configs": [{"name": "sg_eagle", "method": "eagle3", "num_speculative_tokens": 3,
                                      "drafter": "d"}],
                         "datasets": [{"name": "p", "path": "p.jsonl"}]}, tmp_path / "suite.yaml")
    with pytest.raises(SuiteError) as info:
        preflight(suite)
    assert "'sg_eagle'" in str(info.value) and "sglang" in str(info.value) and info.value.exit_code == 2
