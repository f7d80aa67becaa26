"""Stalls named (issue 39) on hand-made steps and events: which steps are stalls, what overlapped them, what is
left unknown, and what they cost the pass."""

from specbench.measure.stalls import ALL_STEPS, BASIS_MIN, DECODE_ONLY, STALL_MS, UNKNOWN, pass_stalls, stall_stats
from specbench.measure.steplog import Step
from specbench.schemas.steplog import EventRow, GpuRow, SchedRow
from tests.support.steplog import WALL0, gpu_row, sched_row


def timeline(ms_per_step, tokens=None, modes=None, drafter_ms=None):
    """Steps 1..n, step i taking ``ms_per_step[i]`` (its start to the next one's), on the runner's clock and the
    wall clock alike; ``drafter_ms[i]`` stretches that step's drafter part."""
    out, wall, since = [], WALL0, None
    for i, ms in enumerate(ms_per_step):
        n = i + 1
        over = {}
        if tokens and tokens[i]:
            over = {"num_tokens": tokens[i], "prefill_tokens": tokens[i] - 4}
        if modes:
            over["graph_mode"] = modes[i]
        d = (drafter_ms or {}).get(n) or 0.2 * ms
        base = ms - d  # forward 60 %, LM head, verify, then the drafter, the end just before the next step
        g = gpu_row(n, wall, since, fwd=(0.0, 0.6 * base), lm_head=(0.6 * base, 0.65 * base), samp=0.65 * base,
                    draft=(0.7 * base, 0.7 * base + d), end=0.7 * base + d + 0.05 * base)
        out.append(Step(SchedRow.from_line(sched_row(n, wall, [3] * 4, 3, **over)), GpuRow.from_line(g)))
        since, wall = ms, wall + ms / 1000.0
    return tuple(out)


def event(kind, at_s, ms, step=None, detail=None):
    return EventRow(kind=kind, wall=WALL0 + at_s, ms=ms, step=step, detail=detail)


def test_a_slow_step_is_a_stall_named_by_the_event_in_it():
    steps = timeline([6.0] * 5 + [250.0] + [6.0] * 5, drafter_ms={6: 240.0})
    events = [event("triton_autotune", 0.033, 231.0, step=6, detail="_fused_kernel (BLOCK 64)"),
              event("gc", 0.2, 1.0, detail="generation 0")]  # a 1 ms collection elsewhere is no cause
    p = pass_stalls(steps, events, wall_s=0.31)
    (stall,) = p.stalls
    assert (stall.step, stall.ms, stall.excess_ms, stall.where) == (6, 250.0, 244.0, "drafter")
    assert stall.causes == ("triton_autotune: _fused_kernel (BLOCK 64) (231 ms)",)
    assert p.causes_ms == {"triton_autotune": 244.0} and p.unknown_ms == 0.0
    assert p.stall_ms == 244.0 and abs(p.share - 244.0 / 310.0) < 1e-6


def test_a_stall_nothing_explains_is_unknown_and_counted():
    p = pass_stalls(timeline([6.0] * 4 + [60.0] + [6.0] * 4), [], wall_s=0.1)
    assert [s.causes for s in p.stalls] == [(UNKNOWN,)] and p.unknown_ms == 54.0 and p.causes_ms == {UNKNOWN: 54.0}


def test_a_collection_in_another_process_is_found_by_the_wall_clock():
    """An event with no step (the API server's collection) overlapping the stall's wall-clock span."""
    steps = timeline([6.0] * 3 + [120.0] + [6.0] * 3)
    p = pass_stalls(steps, [event("gc", 0.02, 100.0, detail="generation 2")], wall_s=0.2)
    assert p.stalls[0].causes == ("gc: generation 2 (100 ms)",)


def test_a_prefill_many_times_a_median_step_and_a_step_out_of_graph_mode_explain_themselves():
    tokens = [16] * 4 + [2048] + [16] * 4
    modes = ["FULL"] * 6 + ["NONE"] + ["FULL"] * 2
    p = pass_stalls(timeline([6.0] * 4 + [80.0, 6.0, 70.0] + [6.0] * 2, tokens=tokens, modes=modes), [], wall_s=0.2)
    assert [s.causes for s in p.stalls] == [("prefill: 2048 tokens (128× a median step's)",),
                                             ("graph mode: NONE (the pass ran FULL)",)]


def test_a_stall_is_five_times_the_median_or_fifty_ms_whatever_the_median():
    slow = timeline([40.0] * 6 + [STALL_MS] + [40.0] * 3)
    assert [s.step for s in pass_stalls(slow, [], 0.5).stalls] == [7]
    assert pass_stalls(timeline([1.0] * 6 + [4.9] + [1.0] * 3), [], 0.02).stalls == ()
    assert [s.step for s in pass_stalls(timeline([1.0] * 6 + [5.0] + [1.0] * 3), [], 0.02).stalls] == [7]


def test_allocator_growth_counts_as_it_happened_in_the_step_and_one_time_events_are_counted_in_the_window():
    steps = timeline([6.0] * 3 + [90.0] + [6.0] * 3)
    events = [event("alloc_growth", 0.019, 0.0, detail="+2048 MiB reserved"), event("compile", 5.0, 900.0)]
    p = pass_stalls(steps, events, wall_s=0.2, window=(WALL0, WALL0 + 1.0))
    assert p.stalls[0].causes == ("alloc_growth: +2048 MiB reserved",) and p.one_time_events == 1


def test_a_cells_stalls_sum_over_its_passes_and_keep_the_longest_per_pass():
    a = pass_stalls(timeline([6.0] * 4 + [60.0] + [6.0] * 4), [], wall_s=0.1, repeat=0, server_start=0)
    b = pass_stalls(timeline([6.0] * 9), [], wall_s=0.05, repeat=1, server_start=1)
    stats = stall_stats([a, b], [0.1, 0.05])
    assert (stats.steplog_stalls, stats.steplog_stall_ms, stats.steplog_stall_unknown_ms) == (1, 54.0, 54.0)
    assert abs(stats.steplog_stall_share - 54.0 / 150.0) < 1e-6
    assert [p["stalls"] for p in stats.steplog_stall_passes] == [1, 0]
    assert stats.steplog_stall_passes[0]["longest"][0]["causes"] == [UNKNOWN]


def test_several_events_of_one_kind_are_one_cause_with_their_sum_and_the_longest():
    steps = timeline([6.0] * 3 + [300.0] + [6.0] * 3)
    events = [event("gc", 0.02, 90.0, step=4, detail="generation 2, 5 collected"),
              event("gc", 0.12, 150.0, step=4, detail="generation 2, 9 collected"),
              event("preemption", 0.03, 0.0, step=4, detail="request r1")]
    (stall,) = pass_stalls(steps, events, wall_s=0.4).stalls
    assert stall.causes == ("gc: 2 events, 240 ms (longest: generation 2, 9 collected, 150 ms)", "preemption: request r1")


def test_a_prefill_is_named_where_most_steps_carry_one():
    """Long prompts at C=16: most steps carry a prefill chunk, so the median step is one; a prefill is judged
    against the decode-only steps' tokens (the H200 long-context run named these 'unknown' before)."""
    ms = [250.0] * 7 + [20.0] * 4
    steps = timeline(ms, tokens=[8192] * 7 + [None] * 4)
    p = pass_stalls(steps, [], wall_s=sum(ms) / 1000)
    assert len(p.stalls) == 7 and all(st.causes[0].startswith("prefill: 8192 tokens") for st in p.stalls)
    assert p.unknown_ms == 0


def test_where_the_median_step_is_a_prefill_the_prefill_steps_cost_their_excess_over_the_decode_only_median():
    """Long prompts at C=64 (the H200 run at 16k tokens): most steps carry a prefill chunk, so the median step is
    one; judged against it a prefill step cost nothing (DSpark's stalls 7 % of the pass, the baseline's 81 %).
    Against the decode-only steps' median both the threshold and the excess see it."""
    ms = [15.0] * 3 + [250.0] * 12 + [15.0] * 4
    p = pass_stalls(timeline(ms, tokens=[None] * 3 + [8192] * 12 + [None] * 4), [], wall_s=sum(ms) / 1000)
    assert [st.step for st in p.stalls] == list(range(4, 16)) and {st.excess_ms for st in p.stalls} == {235.0}
    assert p.stall_ms == 12 * 235.0 and abs(p.share - 12 * 235.0 / sum(ms)) < 1e-6
    assert p.causes_ms == {"prefill": 12 * 235.0} and (p.basis, p.median_ms) == (DECODE_ONLY, 15.0)
    # under STALL_MS but ≥ 5× the decode-only median: a stall too, though the median over all steps is a prefill
    ms = [6.0] * 3 + [40.0] * 12 + [6.0] * 4
    p = pass_stalls(timeline(ms, tokens=[None] * 3 + [8192] * 12 + [None] * 4), [], wall_s=sum(ms) / 1000)
    assert len(p.stalls) == 12 and p.stall_ms == 12 * 34.0


def test_with_fewer_decode_only_steps_than_the_minimum_the_basis_is_all_steps_and_says_so():
    ms = [250.0] * 8 + [20.0] * (BASIS_MIN - 1) + [250.0] * 2
    few = pass_stalls(timeline(ms, tokens=[8192] * 8 + [None] * (BASIS_MIN - 1) + [8192] * 2), [], sum(ms) / 1000)
    assert (few.basis, few.median_ms, few.stall_ms) == (ALL_STEPS, 250.0, 0.0)
    ms = [250.0] * 8 + [20.0] * BASIS_MIN + [250.0] * 2
    enough = pass_stalls(timeline(ms, tokens=[8192] * 8 + [None] * BASIS_MIN + [8192] * 2), [], sum(ms) / 1000)
    assert (enough.basis, enough.median_ms) == (DECODE_ONLY, 20.0) and enough.stall_ms == 9 * 230.0 + 180.0  # the last step: its own 200 ms end mark
    stats = stall_stats([few, enough], [1.0, 1.0])
    assert [(q["basis"], q["median_ms"]) for q in stats.steplog_stall_passes] == [(ALL_STEPS, 250.0), (DECODE_ONLY, 20.0)]
