"""The export's steps and outputs tables from hand-written step-log files and records."""

from specbench.report.export_steps import STEP_COLUMNS, outputs_frame, steps_frame
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from tests.support.steplog import WALL0, gpu_row, sched_row, write_launch

IDENT = {"gpu": "H200", "target": "t", "split": "d", "drafter": "dspark", "k": 3, "c": 1}


def test_steps_are_the_passes_rows_with_the_seeds_columns(tmp_path):
    sched = [sched_row(n, WALL0 + n, [3], 3, graph_mode="FULL" if n < 3 else "PIECEWISE", padded_tokens=8,
                       unpadded_tokens=4) for n in (1, 2, 3, 4)]
    write_launch(tmp_path / "logs/steplog/spec-s0", sched, [gpu_row(n, WALL0 + n, 5.0) for n in (1, 2, 3)])
    phases = [PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=1, wall_s=1.0,
                        scraped_before=WALL0 + 1.5, scraped_after=WALL0 + 9, steplog="logs/steplog/spec-s0"),
              PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=2, wall_s=1.0,
                        scraped_before=WALL0, scraped_after=WALL0 + 9, steplog="logs/steplog/spec-s0", interrupted=True)]
    frame = steps_frame(tmp_path, phases, lambda cell: IDENT)
    assert list(frame.columns) == STEP_COLUMNS and len(frame) == 3  # steps 2-4; the interrupted pass left out
    assert list(frame.full_graph) == [True, False, False] and list(frame.padded_tokens) == [8, 8, 8]
    assert list(frame.start) == [1, 1, 1] and frame.since_prev_ms.isna().tolist() == [False, False, True]
    assert list(frame["hist"].iloc[0][:4]) == [0, 0, 0, 1] and set(frame.drafter) == {"dspark"}


def test_outputs_are_the_measured_requests():
    recs = [RequestRecord("q1", "d", "spec", phase="warmup", output_token_ids=[1]),
            RequestRecord("q1", "d", "spec", category="math", prompt_tokens=7, output_token_ids=[4, 5], concurrency=1),
            RequestRecord("q2", "d", "spec", turn=1, output_token_ids=[6], concurrency=1, repeat=1)]
    frame = outputs_frame(recs, lambda cell: IDENT)
    assert list(frame.req) == [1, 2] and list(frame.question_id) == ["q1", "q2#1"] and list(frame.start) == [0, 1]
    assert [list(x) for x in frame.output_ids] == [[4, 5], [6]] and frame.category.iloc[0] == "math"
    assert outputs_frame(recs, lambda cell: None).empty
