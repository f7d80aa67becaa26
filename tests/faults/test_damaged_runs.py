"""Damage after the fact: a run directory damaged after it was written, read back.

Each test damages a copy of a committed run (or a small hand-made one) the way a disk, a copy or a hand
can: a step-log file cut in the middle of a line or copied in from another launch or run, a header
missing or of another format, a second engine core's steps, a pass or a request recorded twice, a
``requests.jsonl.gz`` cut or corrupt, or left beside a plain ``requests.jsonl``. The answer is always
the same numbers as before the damage where what is left provably is the run's, what was left out
counted by reason (``steplog_skipped_rows`` / ``steplog_error``), and one warning line on stderr when
the run is read back — never a silently different number, never a traceback.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from specbench.cli import main
from specbench.report.notes import sentence
from specbench.run.readback import read_requests
from specbench.run.rundir import RunDir, read_phases
from specbench.run.steplog import steplog_results
from specbench.schemas.acceptance import AcceptanceWindow
from specbench.schemas.notes import Note
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.row import ResultRow
from tests.support.damage import DAY_S, SWING_8B, TOKENS_SMOL, copy_run, cut_file, gzip_with_bad_block, shifted_lines
from tests.support.steplog import WALL0, sched_row, write_launch

NGRAM, BASE = "logs/steplog/ngram_k3-s0", "logs/steplog/baseline-s0"
STEPS, ACCEPTED, GUESSES = 1895, 941, 2100  # ngram_k3's timed pass in the committed run (its results.json)


def step_keys(run: Path) -> dict[str, dict]:
    """Each config's step-log keys as the run stage computes them from the run directory."""
    out = {}
    for cell, found in steplog_results(run, read_phases(run)).items():
        row = ResultRow.start(cell.dataset, cell.config)
        found.add_to(row)
        out[cell.config] = row.to_dict(reference_first=False)
    return out


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning" in line]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(TOKENS_SMOL, tmp_path / "run")


# ---- the step log ---------------------------------------------------------------------------------------------


def test_a_sched_file_of_another_launch_is_left_out_not_joined(run, tmp_path, capsys):
    """baseline's sched file (and header) copied into ngram_k3's launch: its steps 1..3070 collide with the
    launch's own; joined on the step number they replaced 1867 of its pass's 1895 steps."""
    for name in ("sched-5035.jsonl", "header-5035.json"):
        shutil.copy(run / BASE / name, run / NGRAM / name)
    phase = json.loads((run / "phases.jsonl").read_text().splitlines()[1])
    gc = {"kind": "gc", "wall": phase["scraped_before"] + 1.0, "ms": 80.0, "step": 5, "detail": "gen 2"}
    (run / NGRAM / "events-5035.jsonl").write_text(json.dumps(gc) + "\n")  # that process's events went with it
    keys = step_keys(run)["ngram_k3"]
    assert (keys["steplog_steps"], keys["steplog_accepted"], keys["steplog_token_guesses"]) == (STEPS, ACCEPTED, GUESSES)
    assert keys["steplog_skipped_rows"] == {
        "sched: another launch's steps (sched-5035.jsonl: none in this launch's timed passes)": 3070,
        "events: its process's steps are another launch's (events-5035.jsonl)": 1}
    capsys.readouterr()
    assert main(["export", str(run), "-o", str(tmp_path / "x")]) == 0
    said = warnings_of(capsys.readouterr().err)
    assert len(said) == 1 and "ngram_k3-s0: step log: 3071 line(s) left out" in said[0] and "sched-5035.jsonl" in said[0]
    steps = pd.read_parquet(tmp_path / "x" / "steps")
    assert len(steps[steps.drafter == "ngram"]) == STEPS and len(pd.read_parquet(tmp_path / "x" / "tokens")) == GUESSES


def test_a_token_log_copied_into_a_launch_without_one_is_not_its(run):
    """ngram_k3's token log copied into baseline's launch (which ran at `steps`): step numbers alike, but its
    rows' times are not baseline's steps' — baseline got 2004 guesses it never made."""
    shutil.copy(run / NGRAM / "tokens-5309.jsonl", run / BASE)
    keys = step_keys(run)["baseline"]
    assert "steplog_token_guesses" not in keys and keys["steplog_steps"] == 2814
    assert keys["steplog_skipped_rows"] == {
        "tokens: another launch's rows (tokens-5309.jsonl: their times are not this launch's steps')": 2253}


def test_a_file_of_another_run_is_outside_the_runs_time_span(run):
    """ngram_k3's sched file as a run a day earlier wrote it, as sched-1.jsonl: joined first, it took every
    step number of the launch, and the pass, cut by wall time, had no step left."""
    (run / NGRAM / "sched-1.jsonl").write_text(shifted_lines(run / NGRAM / "sched-5309.jsonl", -DAY_S))
    keys = step_keys(run)["ngram_k3"]
    assert (keys["steplog_steps"], keys["steplog_accepted"]) == (STEPS, ACCEPTED)
    assert keys["steplog_skipped_rows"] == {"sched: wall time outside the run's (meta.json)": 2055}


def test_a_missing_header_is_said_and_its_rows_still_read(run):
    (run / NGRAM / "header-5309.json").unlink()
    keys = step_keys(run)["ngram_k3"]
    assert (keys["steplog_steps"], keys["steplog_accepted"], keys["steplog_token_guesses"]) == (STEPS, ACCEPTED, GUESSES)
    assert keys["steplog_error"] == f"{NGRAM}: no header-5309.json: its sched, gpu, tokens rows read without it"


def test_a_header_of_another_format_disowns_its_processs_rows(run):
    header = run / NGRAM / "header-5309.json"
    header.write_text(json.dumps({**json.loads(header.read_text()), "schema": "otherlog/2"}))
    keys = step_keys(run)["ngram_k3"]
    assert "steplog_steps" not in keys and "steplog_token_guesses" not in keys
    assert keys["steplog_skipped_rows"]["sched: its process's header is not specbench.steplog/1 ('otherlog/2')"] == 2055
    assert keys["steplog_error"] == f"{NGRAM}: no step of this launch left to cut repeat 0 from"


def test_a_sched_file_cut_in_the_middle_of_a_line_does_not_count_the_pass_it_cut(run, tmp_path, capsys):
    """Cut at 30 %: the pass kept 670 of its 1895 steps and 359 of 941 accepted tokens, said as one torn line."""
    cut_file(run / NGRAM / "sched-5309.jsonl", 0.3)
    keys = step_keys(run)["ngram_k3"]
    assert "steplog_steps" not in keys and "steplog_token_guesses" not in keys
    assert "sched-5309.jsonl is cut in the middle of a line" in keys["steplog_error"]
    assert "before repeat 0 ended: its steps are not counted" in keys["steplog_error"]
    assert keys["steplog_skipped_rows"] == {"sched: torn or overlong line": 1}
    capsys.readouterr()
    assert main(["export", str(run), "-o", str(tmp_path / "x")]) == 0
    said = warnings_of(capsys.readouterr().err)
    assert len(said) == 1 and "sched-5309.jsonl is cut in the middle of a line (its rows after" in said[0]


def test_a_second_engine_cores_steps_are_not_mixed_into_the_first(tmp_path):
    """Two sched sequences in one launch, both inside the pass: joined on the step number, core B's steps 11-12
    were added to core A's 1-10 (26 accepted tokens of neither core); the log follows one core and says so."""
    folder = write_launch(tmp_path / "logs/steplog/spec-s0", [sched_row(n, WALL0 + n, [3], 3) for n in range(1, 11)])
    (folder / "header-3.json").write_text((folder / "header-1.json").read_text().replace('"pid": 1', '"pid": 3'))
    (folder / "sched-3.jsonl").write_text("".join(json.dumps(sched_row(n, WALL0 + 0.6 + 0.8 * n, [4], 3)) + "\n"
                                                  for n in range(1, 13)))
    phase = PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=10.0,
                      acceptance=AcceptanceWindow.from_dict({"spec_accepted_tokens": 56}), scraped_before=WALL0 + 0.5,
                      scraped_after=WALL0 + 10.5, steplog="logs/steplog/spec-s0")
    (cell,) = steplog_results(tmp_path, [phase]).values()
    assert cell.stats is not None and (cell.stats.steplog_steps, cell.stats.steplog_accepted) == (12, 36)  # core B's
    assert cell.source.steplog_skipped_rows == {
        "sched: a second engine core's steps (sched-1.jsonl), not joined: the log follows sched-3.jsonl": 10}


# ---- a pass or a request recorded twice -------------------------------------------------------------------------


def test_a_pass_recorded_twice_is_counted_once_and_said(run, tmp_path, capsys):
    lines = (run / "phases.jsonl").read_text().splitlines()
    (run / "phases.jsonl").write_text("\n".join([*lines, lines[1]]) + "\n")
    assert main(["export", str(run), "-o", str(tmp_path / "x")]) == 0
    said = warnings_of(capsys.readouterr().err)
    assert len(said) == 1, said
    assert "1 pass(es) recorded complete more than once" in said[0]
    assert "ngram_k3 / gsm8k / C=1 repeat 0 on lines 2, 3: line 2 counted (the same line again)" in said[0]
    steps = pd.read_parquet(tmp_path / "x" / "steps")
    assert len(steps[steps.drafter == "ngram"]) == STEPS and len(pd.read_parquet(tmp_path / "x" / "tokens")) == GUESSES
    keys = step_keys(run)["ngram_k3"]  # as a --resume rebuilds the results
    assert (keys["steplog_steps"], keys["steplog_accepted"], keys["steplog_token_guesses"]) == (STEPS, ACCEPTED, GUESSES)


def test_of_two_different_lines_of_one_pass_the_one_inside_the_run_is_counted(run):
    """A line of the same pass from another run (its scrapes a day earlier) written first: the run's own counts;
    two lines both inside the run: the first written counts. Either way said, never both."""
    lines = (run / "phases.jsonl").read_text().splitlines()
    other = json.loads(lines[1])
    other.update(scraped_before=other["scraped_before"] - DAY_S, scraped_after=other["scraped_after"] - DAY_S, wall_s=3.0)
    (run / "phases.jsonl").write_text("\n".join([lines[0], json.dumps(other), lines[1]]) + "\n")
    said: list[Note] = []
    phases = read_phases(run, said)
    assert [p.wall_s for p in phases] == [json.loads(lines[0])["wall_s"], json.loads(lines[1])["wall_s"]]
    assert "line 3 counted (the others' /metrics scrape times lie outside the run's time span in meta.json)" in sentence(said[0])
    other.update(scraped_before=json.loads(lines[1])["scraped_before"], scraped_after=json.loads(lines[1])["scraped_after"])
    (run / "phases.jsonl").write_text("\n".join([lines[0], lines[1], json.dumps(other)]) + "\n")
    said.clear()
    assert [p.wall_s for p in read_phases(run, said)] == [p.wall_s for p in phases]
    assert "on lines 2, 3: line 2 counted (the first written" in sentence(said[0])


def test_resume_keeps_one_line_of_a_pass_recorded_twice_and_notes_it(run):
    lines = (run / "phases.jsonl").read_text().splitlines()
    (run / "phases.jsonl").write_text("\n".join([*lines, lines[0]]) + "\n")
    cut, notes = RunDir(run).supersede_incomplete()
    assert cut == [] and (run / "phases.jsonl").read_text().splitlines() == lines
    assert any("baseline / gsm8k / C=1 repeat 0 on lines 1, 3: line 1 counted" in sentence(n) for n in notes)


def test_a_request_recorded_twice_counts_once(run, capsys):
    lines = (run / "requests.jsonl").read_bytes().splitlines(keepends=True)
    (run / "requests.jsonl").write_bytes(b"".join(lines + lines[:5]))
    assert len(read_requests(run)) == len(lines)
    assert "5 request record(s) recorded twice (the same line again): each counted once" in capsys.readouterr().err
    said: list[Note] = []
    assert len(RunDir(run).read_requests(said)) == len(lines) and "5 line(s) repeat an earlier line exactly" in sentence(said[0])


# ---- requests.jsonl.gz ------------------------------------------------------------------------------------------


def test_a_cut_gzip_keeps_the_records_before_the_cut_and_says_how_many(tmp_path, capsys):
    run = copy_run(SWING_8B, tmp_path / "run")
    cut_file(run / "requests.jsonl.gz", 0.5)
    got = read_requests(run, quiet=True)
    assert got is not None and 0 < len(got) < 816
    capsys.readouterr()
    assert main(["report", str(run), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    said = warnings_of(capsys.readouterr().err)
    assert len(said) == 1 and "requests.jsonl.gz: damaged (cut before the end of its stream)" in said[0]
    assert f"{len(got)} request records read before the damage" in said[0]
    assert main(["export", str(run), "-o", str(tmp_path / "x")]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_corrupt_gzip_stream_is_a_warning_not_a_traceback(tmp_path, capsys):
    lines = [json.dumps({"prompt_id": f"p{i}", "dataset": "d", "config": "c", "send_time": 1.0 + i,
                         "chunk_times": [1.5 + i], "chunk_tokens": [3]}) + "\n" for i in range(150)]
    (tmp_path / "requests.jsonl.gz").write_bytes(gzip_with_bad_block("".join(lines[:100]).encode(),
                                                                     "".join(lines[100:]).encode()))
    got = read_requests(tmp_path)
    assert got is not None and [r.prompt_id for r in got] == [f"p{i}" for i in range(100)]
    said = warnings_of(capsys.readouterr().err)
    assert len(said) == 1 and "damaged (invalid block type): 100 request records read before the damage" in said[0]


def test_a_gzip_beside_a_plain_requests_file_is_read_with_it_not_twice(tmp_path, capsys):
    """requests.jsonl holding the first 300 records (a resume began one afresh, or a gunzip was cut) beside the
    whole archive: each of the 816 counted once, said."""
    run = copy_run(SWING_8B, tmp_path / "run")
    text = gzip.decompress((run / "requests.jsonl.gz").read_bytes()).splitlines(keepends=True)
    (run / "requests.jsonl").write_bytes(b"".join(text[:300]))
    got = read_requests(run)
    assert got is not None and len(got) == len(text) == 816
    said = warnings_of(capsys.readouterr().err)
    assert len(said) == 1 and "both requests.jsonl (300 records) and requests.jsonl.gz (516 more)" in said[0]


# ---- report, gate and compare on a run whose step log left rows out ----------------------------------------------


def test_report_gate_and_compare_say_what_the_step_log_left_out(run, tmp_path, capsys):
    """A run rebuilt (``--resume``) after another launch's sched file was copied in: its results carry what was
    left out, and every reader of the run says it in one line."""
    for name in ("sched-5035.jsonl", "header-5035.json"):
        shutil.copy(run / BASE / name, run / NGRAM / name)
    rows = json.loads((run / "results.json").read_text())
    for row in rows:
        row.update({k: v for k, v in step_keys(run)[row["run"]].items() if k.startswith("steplog_")})
    (run / "results.json").write_text(json.dumps(rows))
    intact = copy_run(TOKENS_SMOL, tmp_path / "intact")
    capsys.readouterr()
    for argv in (["report", str(run)], ["gate", str(run), "--min", "output_throughput_tps=1"],
                 ["compare", str(intact), str(run)]):
        assert main(argv) == 0, argv
        said = warnings_of(capsys.readouterr().err)
        assert len(said) == 1, (argv, said)
        assert "step log of 1 cell(s): 3070 line(s) left out (sched: another launch's steps" in said[0]


# ---- the newest keys read back -----------------------------------------------------------------------------------


def test_the_stall_and_steady_warm_up_keys_read_back_as_written(run, capsys):
    """A run with the step log's stall keys (a list of objects per pass) and steady warm-up (a list of lists): read
    back as "a list of finite numbers", each entry became — (a warning per cell) and the report stopped on
    ``'NoneType' object has no attribute 'get'``."""
    rows = json.loads((run / "results.json").read_text())
    stall = {"repeat": 0, "server_start": 0, "stalls": 2, "stall_ms": 300.0, "share": 0.05, "one_time_events": 1,
             "longest": [{"step": 7, "ms": 200.0, "where": "drafter", "causes": ["compile: propose"]}]}
    for row in rows:
        row.update(steplog_stall_passes=[stall], warmup_steady=False, warmup_steady_passes=[3],
                   warmup_steady_events=[[4, 2, 1]])
    (run / "results.json").write_text(json.dumps(rows))
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    out, err = capsys.readouterr()
    assert warnings_of(err) == [] and "Traceback" not in err
    assert "stalls took 5.0% of the timed pass — 2 step(s), the longest 200 ms (drafter): compile: propose" in out
    assert "still in the last (1)" in out
