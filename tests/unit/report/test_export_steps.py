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
    later = PhaseInfo(config="spec", dataset="d", concurrency=2, request_rate=None, repeat=0, wall_s=1.0,
                      scraped_before=WALL0 + 5.5, scraped_after=WALL0 + 9, steplog="logs/steplog/spec-s0")
    both = tokens_frame(tmp_path, [phase, later], [], lambda cell: IDENT)  # two passes of one launch
    assert sorted(set(both.step)) == [3, 4, 5, 6] and len(both) == len(frame) + 3


def test_the_exported_steps_are_the_rows_the_runs_own_reader_cuts(tmp_path):
    """The export reads a launch with the run's own checked reader (in columns): the rows of the records
    ``run.steplog.read_launch`` gives back, joined and cut the same way — a second engine core's file (its steps 3
    and 12 left out, not joined: step 12 was exported into the second pass), a runner row twice or missing, torn,
    non-JSON and refused lines, absent values."""
    from dataclasses import asdict

    from specbench.run.steplog import pass_steps, read_launch

    folder = tmp_path / "logs/steplog/spec-s0"
    sched = [sched_row(n, WALL0 + n, [n % 4 + 1], 3, graph_mode=[None, "FULL", "PIECEWISE"][n % 3],
                       padded_tokens=None if n % 5 == 0 else 8 + n) for n in range(1, 10)]
    gpu = [gpu_row(n, WALL0 + n, None if n == 2 else 1.5 * n, draft=None if n % 2 else (5.0, 7.0)) for n in (1, 2, 3, 3, 5, 6, 9)]
    write_launch(folder, sched, gpu, extra_lines={"sched": ["not json", json.dumps(sched_row(10, WALL0 + 10, [1], num_reqs=-1)),
                                                            "#torn" + json.dumps(sched_row(11, WALL0 + 11, [1]))[5:-2]]})
    write_launch(folder, [sched_row(n, WALL0 + n + 0.5, [1]) for n in (3, 12)], pid=7)  # another engine core's file
    phases = [PhaseInfo(config="spec", dataset="d", concurrency=c, request_rate=None, repeat=r, wall_s=1.0,
                        scraped_before=WALL0 + lo, scraped_after=WALL0 + hi, steplog="logs/steplog/spec-s0")
              for c, r, lo, hi in ((1, 0, 1, 5), (2, 0, 5, 12.5), (1, 1, 20, 30))]
    frame = steps_frame(tmp_path, phases, lambda cell: IDENT)
    log, expected = read_launch(folder), []
    for p in phases:
        for s in pass_steps(log, p).records():
            g, sc = s.gpu, s.sched
            expected.append({**asdict(IDENT), "start": p.repeat, "wall": sc.wall, "num_reqs": sc.num_reqs,
                             "num_tokens": sc.num_tokens, "decode_reqs": sc.decode_reqs, "spec_tokens": sc.spec_tokens,
                             "prefill_tokens": sc.prefill_tokens, "ctx_tokens": sc.ctx_tokens,
                             "full_graph": None if sc.graph_mode is None else sc.graph_mode == "FULL",
                             "padded_tokens": sc.padded_tokens, "hist": list(sc.hist),
                             "since_prev_ms": g.since_prev_ms if g else None,
                             **{c: getattr(g, c) if g else None for c in STEP_COLUMNS if c.startswith("t_")}})
    got = [{k: (None if v is None or (isinstance(v, float) and v != v) else v) for k, v in row.items()}
           for row in frame.drop(columns=["stall", "stall_causes"]).astype(object).to_dict("records")]
    got = [{**row, "hist": list(row["hist"])} for row in got]
    assert len(expected) == 10 and got == expected


def test_every_steps_file_has_the_tables_column_types(tmp_path):
    """One arrow schema per table: a pass whose steps recorded no graph mode, no padding and no runner times
    writes typed null columns, not columns of no type, so the files of a table read back together."""
    import pandas as pd
    import pyarrow.parquet as pq

    from specbench.report.export_files import replacing
    from specbench.report.export_steps import export_steps

    write_launch(tmp_path / "logs/steplog/spec-s0", [sched_row(n, WALL0 + n, [2], 3, graph_mode="FULL", padded_tokens=8)
                                                     for n in (1, 2)], [gpu_row(n, WALL0 + n, 1.0) for n in (1, 2)])
    write_launch(tmp_path / "logs/steplog/spec-s1", [sched_row(n, WALL0 + 100 + n, [2], 3) for n in (1, 2)])
    (tmp_path / "phases.jsonl").write_text("".join(json.dumps(PhaseInfo(
        config="spec", dataset="d", concurrency=1, request_rate=None, repeat=r, wall_s=1.0, scraped_before=WALL0 + 100 * r,
        scraped_after=WALL0 + 100 * r + 9, steplog=f"logs/steplog/spec-s{r}").to_dict()) + "\n" for r in (0, 1)))
    with replacing(tmp_path / "prof", "run") as rep:
        export_steps([], tmp_path, rep, lambda cell: IDENT)
    files = sorted((tmp_path / "prof" / "steps").rglob("*.parquet"))
    assert [f.name for f in files] == ["run-r0.parquet", "run-r1.parquet"]
    assert pq.read_schema(files[0]).remove_metadata() == pq.read_schema(files[1]).remove_metadata()
    steps = pd.read_parquet(tmp_path / "prof" / "steps")
    assert len(steps) == 4 and steps.full_graph.tolist()[:2] == [True, True] and steps.full_graph.isna().tolist()[2:] == [True, True]


def test_a_stall_is_flagged_with_its_causes_and_the_passs_events_are_a_table(tmp_path):
    """Issue 39: the steps table says which steps were stalls and why (as the results name them), and an
    ``events`` table holds what the recorder saw happen inside each timed pass's window."""
    from specbench.report.export_steps import EVENT_COLUMNS, event_batches
    from specbench.run.steplog import read_once

    run = tmp_path / "run"
    folder = run / "logs/steplog/spec-s0"
    walls = [WALL0 + 0.006 * n for n in range(1, 9)]
    walls[5:] = [w + 0.25 for w in walls[5:]]  # step 5 takes 256 ms: a stall
    write_launch(folder, [sched_row(n, walls[n - 1], [3], 3) for n in range(1, 9)])
    events = [{"kind": "triton_compile", "wall": walls[4] + 0.001, "ms": 240.0, "step": 5, "detail": "Triton kernel k"},
              {"kind": "gc", "wall": WALL0 - 100.0, "ms": 9.0, "step": None, "detail": "outside the pass"}]
    (folder / "events-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    phases = [PhaseInfo(config="spec", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=0.3,
                        scraped_before=WALL0, scraped_after=WALL0 + 1.0, steplog="logs/steplog/spec-s0")]
    frame = steps_frame(run, phases, lambda cell: IDENT)
    stalled = frame[frame.stall]
    assert list(stalled.index) == [4] and stalled.stall_causes.iloc[0] == "triton_compile: Triton kernel k (240 ms)"
    assert frame.stall_causes.isna().sum() == len(frame) - 1
    ((part, table),) = list(event_batches(read_once(run, phases, folder), [(phases[0], IDENT)]))
    got = table.to_pandas()
    assert list(got.columns) == EVENT_COLUMNS and part["start"] == 0
    assert got[["kind", "step", "one_time", "detail"]].values.tolist() == [["triton_compile", 5, True, "Triton kernel k"]]
