"""The export's steps and outputs tables from hand-written step-log files and records."""

import json

from specbench.report.export_steps import STEP_COLUMNS, TOKEN_COLUMNS, TableKey, outputs_frame, steps_frame, tokens_frame
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from tests.support.steplog import WALL0, gpu_row, sched_row, step_guesses, token_row, write_launch

IDENT = TableKey(gpu="H200", target="t", split="d", drafter="dspark", k=3, c=1)


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


def test_tokens_are_the_passes_guesses_joined_to_their_requests(tmp_path):
    """Each vLLM request's kept guesses are found in exactly one measured output at their positions (kept
    guesses past max_tokens, cut from the output, are no evidence); a bad line is skipped, never raised."""
    folder = tmp_path / "logs/steplog/spec-s0"
    write_launch(folder, [sched_row(n, WALL0 + n, [3], 3) for n in (1, 2)])
    rows = [token_row(1, WALL0 + 1, "chatcmpl-a", 1, 0, 40, True), token_row(1, WALL0 + 1, "chatcmpl-a", 2, 1, 41, False),
            token_row(2, WALL0 + 2, "chatcmpl-b", 1, 2, 52, True), token_row(2, WALL0 + 2, "chatcmpl-b", 2, 3, 99, True),
            token_row(2, WALL0 + 2, "chatcmpl-c", 1, 0, 7, True),  # agrees with no output: req unknown
            token_row(3, WALL0 + 20, "chatcmpl-a", 1, 5, 1, True)]  # after the pass's window
    (folder / "tokens-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": "x"}\n')
    phase = PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=1.0,
                      scraped_before=WALL0, scraped_after=WALL0 + 9, steplog="logs/steplog/spec-s0")
    recs = [RequestRecord("q0", "d", "spec", phase="warmup", output_token_ids=[40, 41]),
            RequestRecord("q1", "d", "spec", output_token_ids=[40, 42, 9], concurrency=1),
            RequestRecord("q2", "d", "spec", output_token_ids=[50, 51, 52], concurrency=1)]  # b's 2nd guess: past the end
    frame = tokens_frame(tmp_path, [phase], recs, lambda cell: IDENT)
    assert list(frame.columns) == TOKEN_COLUMNS and len(frame) == 5
    assert frame.req.tolist()[:4] == [1, 1, 2, 2] and frame.req.isna().tolist()[4]
    assert frame.accepted.tolist() == [True, False, True, True, True] and frame.d_prob.isna().all()


def test_tokens_are_cut_by_the_passes_step_numbers_not_their_own_wall_times(tmp_path):
    """Issue 38: a token row's wall is the sampler's, in another process: a warm-up step sampled just after the
    first scrape, and the pass's last step sampled just after the second, straddle the window edges. The export
    takes the rows of the pass's steps, as the results do."""
    folder = tmp_path / "logs/steplog/spec-s0"
    committed = {1: 2, 2: 2, 3: 3, 4: 3, 5: 4, 6: 3}  # tokens each step's one request committed (k=3)
    write_launch(folder, [sched_row(n, WALL0 + n, [c], 3) for n, c in committed.items()])
    rows = [r for n, c in committed.items() for r in step_guesses(n, WALL0 + n + (0.7 if n in (2, 5) else 0.1), "a", 3, c - 1)]
    (folder / "tokens-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    phase = PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=1.0,
                      scraped_before=WALL0 + 2.5, scraped_after=WALL0 + 5.5, steplog="logs/steplog/spec-s0")
    frame = tokens_frame(tmp_path, [phase], [], lambda cell: IDENT)
    assert sorted(set(frame.step)) == [3, 4, 5] and int(frame.accepted.sum()) == 2 + 2 + 3
