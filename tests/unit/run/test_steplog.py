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
from tests.support.steplog import WALL0, gpu_row, sched_row, step_guesses, write_launch


def phase(repeat, t0, t1, folder="logs/steplog/spec-s0", accepted=None, concurrency=1, rate=None):
    return PhaseInfo(config="spec", dataset="d", concurrency=concurrency, request_rate=rate, repeat=repeat, wall_s=1.0,
                     acceptance=AcceptanceWindow.from_dict({"spec_accepted_tokens": accepted}), scraped_before=t0, scraped_after=t1, steplog=folder)


def test_bad_lines_are_skipped_and_counted_never_raised(tmp_path):
    good = [sched_row(n, WALL0 + n, [3], 3) for n in (1, 2)]
    bad = [json.dumps(sched_row(3, WALL0 + 3, [3], 3, hist=[1])), "{not json", json.dumps([1, 2]),
           json.dumps({**sched_row(4, WALL0 + 4, [2], 3), "num_tokens": "many"}), "#torn" + json.dumps(good[0])[:20]]
    folder = write_launch(tmp_path / "l", good, [gpu_row(1, WALL0 + 1, None), gpu_row(2, WALL0 + 2, 1000.0)],
                          extra_lines={"sched": bad, "gpu": ['{"step": -1}']})
    (folder / "header-99.json").write_text("{broken")
    log = read_launch(folder)
    assert log.steps.step.tolist() == [1, 2] and log.steps.has_gpu.all()
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
    assert read_launch(folder).steps.step.tolist() == [1, 2]


def test_sglang_with_a_step_log_is_refused_before_any_server_starts(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n')
    suite = parse_suite({"name": "s", "model": "m", "engine": "sglang", "server": {"steplog": "steps"},
                         "configs": [{"name": "sg_eagle", "method": "eagle3", "num_speculative_tokens": 3,
                                      "drafter": "d"}],
                         "datasets": [{"name": "p", "path": "p.jsonl"}]}, tmp_path / "suite.yaml")
    with pytest.raises(SuiteError) as info:
        preflight(suite)
    assert "'sg_eagle'" in str(info.value) and "sglang" in str(info.value) and info.value.exit_code == 2


def _token_launch(tmp_path, committed, lost=(), orphan=False):
    """A launch whose steps each committed ``committed[n]`` tokens (k=3), with its token log; the rows of a step
    in ``lost`` never reached disk, and ``orphan`` adds a row of a step no scheduler row has."""
    folder = write_launch(tmp_path / "logs/steplog/spec-s0", [sched_row(n, WALL0 + n, [c], 3) for n, c in committed.items()])
    rows = [r for n, c in committed.items() if n not in lost
            for r in step_guesses(n, WALL0 + n + (0.7 if n in (2, 5) else 0.1), "a", 3, c - 1)]
    rows += step_guesses(99, WALL0 + 4.2, "a", 3, 1) if orphan else []
    (folder / "tokens-2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


COMMITTED = {1: 2, 2: 2, 3: 3, 4: 3, 5: 4, 6: 3}  # pass: steps 3-5, 2 + 2 + 3 accepted


def test_the_token_log_is_cut_by_the_passes_step_numbers_where_a_step_straddles_a_scrape(tmp_path):
    """Issue 38 item 3: step 2 (warm-up) was sampled 0.2 s after the first scrape, step 5 (the pass's last) 0.2 s
    after the second; cut by their own wall times the pass held 5 accepted guesses where its steps held 7."""
    _token_launch(tmp_path, COMMITTED)
    keys = _keys(steplog_results(tmp_path, [phase(0, WALL0 + 2.5, WALL0 + 5.5, accepted=7)]))
    assert keys["steplog_accepted"] == 7 and keys["steplog_token_accepted"] == 7 and keys["steplog_token_agree"] is True
    assert keys["steplog_token_guesses"] == 9 and keys["steplog_token_unplaced"] is None


def test_token_rows_that_cannot_be_placed_are_said(tmp_path):
    """A step whose token rows were lost, and rows of a step the scheduler log lacks: counted by reason."""
    _token_launch(tmp_path, COMMITTED, lost=(4,), orphan=True)
    keys = _keys(steplog_results(tmp_path, [phase(0, WALL0 + 2.5, WALL0 + 5.5, accepted=7)]))
    assert keys["steplog_token_accepted"] == 5 and keys["steplog_token_agree"] is False
    assert keys["steplog_token_unplaced"] == {"pass steps that accepted guesses but have no token row": 1,
                                              "token rows of a step the scheduler log lacks": 3}


def test_a_launch_without_a_token_log_has_no_token_keys(tmp_path):
    write_launch(tmp_path / "logs/steplog/spec-s0", [sched_row(n, WALL0 + n, [3], 3) for n in range(1, 4)])
    assert "steplog_token_guesses" not in _keys(steplog_results(tmp_path, [phase(0, WALL0 + 0.5, WALL0 + 3.5, accepted=6)]))


def test_an_integer_beyond_64_bits_is_a_line_left_out_not_a_crash(tmp_path):
    """The strict reader takes any integer ≥ 0; a column holds 64 bits: such a line is counted like any bad value
    (the export's column reader stopped on OverflowError, the results kept the step)."""
    from specbench.report.export_steps import TableKey, steps_frame

    rows = [sched_row(1, WALL0 + 1, [3], 3), sched_row(2, WALL0 + 2, [3], 3, num_tokens=2**70), sched_row(3, WALL0 + 3, [3], 3)]
    folder = write_launch(tmp_path / "logs/steplog/spec-s0", rows)
    assert read_launch(folder).steps.step.tolist() == [1, 3] and read_launch(folder).skipped == {"sched: num_tokens": 1}
    frame = steps_frame(tmp_path, [phase(0, WALL0, WALL0 + 4)], lambda cell: TableKey("g", "t", "d", "x", 3, 1))
    assert len(frame) == 2


def test_guesses_of_a_request_vllm_had_finished_are_left_out_of_both_sides_and_said(tmp_path):
    """Under async scheduling (V2: DSpark on the H200) the runner verifies a step for a request that reached
    max_tokens the step before; the scheduler skips it (`skipped_reqs`), so its kept guesses are in the token log
    but in no counter: the H200 run of 2026-12-04 read 286 token-log vs 283 step-log accepted."""
    committed = {1: 2, 2: 2, 3: 3, 4: 3, 5: 4, 6: 3}
    folder = write_launch(tmp_path / "logs/steplog/spec-s0",
                          [sched_row(n, WALL0 + n, [c], 3, **({"skipped_reqs": ["b"]} if n == 4 else {}))
                           for n, c in committed.items()])
    rows = [r for n, c in committed.items() for r in step_guesses(n, WALL0 + n + 0.1, "a", 3, c - 1)]
    rows += step_guesses(4, WALL0 + 4.1, "b", 3, 3)  # request b, finished: all 3 kept, none counted
    (folder / "tokens-2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    keys = _keys(steplog_results(tmp_path, [phase(0, WALL0 + 2.5, WALL0 + 5.5, accepted=7)]))
    assert keys["steplog_token_accepted"] == 7 and keys["steplog_token_agree"] is True
    assert keys["steplog_token_unplaced"] == {"guesses of a request vLLM had finished (verified, not counted by it)": 3}


def test_a_cell_whose_server_ran_fewer_than_c_carries_the_batch_and_its_note(tmp_path):
    """The H200 long-context run at C=64: the KV cache held ~22 requests of 36k tokens, the rest waited, and the cell
    said C=64. The step log's queues go on the row, with the note; a cell that ran C at once gets none."""
    bound = [sched_row(n, WALL0 + n, [1] * 3, running=3, waiting=5, kv_usage=0.99) for n in range(1, 5)]
    write_launch(tmp_path / "logs/steplog/spec-s0", bound)
    keys = _keys(steplog_results(tmp_path, [phase(0, WALL0 + 0.5, WALL0 + 4.5, concurrency=8)]))
    assert (keys["steplog_running_p50"], keys["steplog_running_max"]) == (3.0, 3)
    assert keys["steplog_waiting_share"] == 1.0 and keys["steplog_kv_peak"] == 0.99
    (note,) = keys["notes"]
    assert note["code"] == "server_batch" and note["values"]["concurrency"] == 8
    open_loop = _keys(steplog_results(tmp_path, [phase(0, WALL0 + 0.5, WALL0 + 4.5, concurrency=8, rate=2.0)]))
    assert open_loop["steplog_running_p50"] == 3.0 and "notes" not in open_loop

    at_c = [sched_row(n, WALL0 + n, [1] * 8, running=8, waiting=0, kv_usage=0.3) for n in range(1, 5)]
    write_launch(tmp_path / "logs/steplog/full-s0", at_c)
    keys = _keys(steplog_results(tmp_path, [phase(0, WALL0 + 0.5, WALL0 + 4.5, "logs/steplog/full-s0", concurrency=8)]))
    assert keys["steplog_running_p50"] == 8.0 and keys["steplog_waiting_share"] == 0.0 and "notes" not in keys
