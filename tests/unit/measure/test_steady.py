"""The steady window: closed loop from the moment C requests are in flight to the first end after the last send,
open loop the sends' first and last 10 % cut; throughput over the chunks inside it, latencies over the requests
wholly inside it, and no window (null, with its reason) where the pass never filled C slots or, at C > 1, sent
fewer than C replacements inside it (one wave)."""

import pytest

from specbench.measure.steady import closed_window, open_window, steady_window
from specbench.measure.summarize import add_comparisons, summarize_cell
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_steady import SteadyWindow


def rec(pid: str, sent: float, times: list[float], tokens: list[int], repeat: int = 0, config: str = "c",
        error: str | None = None, concurrency: int = 2) -> RequestRecord:
    return RequestRecord(prompt_id=pid, dataset="d", config=config, send_time=sent, chunk_times=times,
                         chunk_tokens=tokens, output_tokens=sum(tokens), token_source="usage_continuous",
                         end_time=times[-1] if times else None, repeat=repeat, error=error, concurrency=concurrency)


def phase(c: int, wall: float, repeat: int = 0, rate: float | None = None, config: str = "c") -> PhaseInfo:
    return PhaseInfo(config=config, dataset="d", concurrency=c, request_rate=rate, repeat=repeat, wall_s=wall)


#: two lanes (C=2): lane A sends r0 at 0, r2 at 0.3 (as r0 ends), r4 at 0.5; lane B r1 at 0.05, r3 at 0.45.
#: In flight reaches 2 at 0.05 (r1's send); the last send is 0.5 and the first end after it r4's at 0.7.
LANES = [
    rec("r0", 0.00, [0.10, 0.20, 0.30], [1, 2, 2]),
    rec("r1", 0.05, [0.15, 0.25, 0.35, 0.45], [1, 1, 3, 1]),
    rec("r2", 0.30, [0.40, 0.50], [1, 2]),
    rec("r3", 0.45, [0.55, 0.65, 0.75, 0.85], [1, 2, 2, 2]),
    rec("r4", 0.50, [0.60, 0.70], [1, 3]),
]


def test_closed_window_opens_when_c_are_in_flight_and_closes_at_the_first_end_after_the_last_send():
    w = closed_window(LANES, 2)
    assert (w.start, w.end, w.why_none) == (0.05, 0.70, None)


def test_headline_numbers_over_the_window():
    got = steady_window([phase(2, 0.85)], LANES)
    # chunks arriving in [0.05, 0.70]: r0 5, r1 6, r2 3, r3 1 + 2 (0.55, 0.65), r4 4 = 21 tokens over 0.65 s
    assert got.steady_window_s == pytest.approx(0.65) and got.steady_share == pytest.approx(0.65 / 0.85)
    assert got.steady_output_throughput_tps == pytest.approx(21 / 0.65)
    # wholly inside: r1 (0.05–0.45), r2 (0.30–0.50), r4 (0.50–0.70); r0 was sent before 0.05, r3 ends after 0.70
    assert got.steady_requests == 3
    assert got.steady_latency_mean_ms == pytest.approx(1000 * (0.40 + 0.20 + 0.20) / 3)
    assert got.steady_ttft_mean_ms == pytest.approx(1000 * 0.10)
    # TPOT: (latency − TTFT) ÷ (tokens − 1): r1 0.3/5, r2 0.1/2, r4 0.1/3
    assert got.steady_tpot_mean_ms == pytest.approx(1000 * (0.3 / 5 + 0.1 / 2 + 0.1 / 3) / 3)
    # decode chunks inside: r0 2+2, r1 1+3+1, r2 2, r3 2, r4 3 → 16 tokens in 8 chunks
    assert got.steady_tokens_per_step == pytest.approx(16 / 8)
    assert got.steady_note is None


def test_fewer_requests_than_c_has_no_window_and_says_why():
    got = steady_window([phase(8, 1.0)], LANES)
    assert got == SteadyWindow(steady_note="no steady window: 5 requests per pass < C=8: in flight never reached C")
    assert closed_window(LANES, 0).why_none == "no concurrency recorded for the pass"


def test_at_c1_the_window_is_the_whole_pass():
    one = [rec("a", 0.0, [0.1, 0.2], [1, 1]), rec("b", 0.2001, [0.3, 0.5], [1, 2])]
    got = steady_window([phase(1, 0.5)], one)
    assert got.steady_window_s == pytest.approx(0.5) and got.steady_share == pytest.approx(1.0)
    assert got.steady_output_throughput_tps == pytest.approx(5 / 0.5) and got.steady_requests == 2
    assert got.steady_note == "C=1: the steady window is the whole pass"
    # one request is no wave at C=1 (no batch for it to crowd): still the whole pass, not the one-wave rule's none
    alone = steady_window([phase(1, 0.3)], [rec("a", 0.0, [0.1, 0.3], [1, 2], concurrency=1)])
    assert alone.steady_window_s == pytest.approx(0.3) and alone.steady_requests == 1
    assert alone.steady_note == "C=1: the steady window is the whole pass"


def test_open_loop_cuts_the_first_and_last_tenth_of_the_sends():
    sends = [rec(f"p{i}", 0.1 * i, [0.1 * i + 0.05, 0.1 * i + 0.5], [1, 4]) for i in range(20)]
    w = open_window(sends)
    assert (w.start, w.end) == (pytest.approx(0.2), pytest.approx(1.7))
    got = steady_window([phase(0, 2.4, rate=10.0)], sends)
    # wholly inside [0.2, 1.7]: sent at 0.2 … 1.2 (their last chunk by 1.7): 11 requests
    assert got.steady_requests == 11 and got.steady_note is None
    assert open_window(sends[:9]).why_none == "9 sends per pass < 10: no 10% to cut at each end"


def test_a_repeat_without_a_window_nulls_the_cell_and_names_it():
    second = [rec("r0", 5.0, [5.1, 5.2], [1, 1], repeat=1)]
    got = steady_window([phase(2, 0.85), phase(2, 0.2, repeat=1)], LANES + second)
    assert got.steady_output_throughput_tps is None and got.steady_window_s is None
    assert got.steady_note == "no steady window: repeat 1: 1 requests per pass < C=2: in flight never reached C"


def test_repeats_average_their_window_throughputs_and_pool_their_requests():
    shifted = [rec(r.prompt_id, r.send_time + 10, [t + 10 for t in r.chunk_times], [2 * n for n in r.chunk_tokens],
                   repeat=1) for r in LANES]
    got = steady_window([phase(2, 0.85), phase(2, 0.85, repeat=1)], LANES + shifted)
    assert got.steady_output_throughput_tps == pytest.approx((21 / 0.65 + 42 / 0.65) / 2)
    assert got.steady_window_s == pytest.approx(1.3) and got.steady_requests == 6


def test_failed_requests_hold_a_slot_but_add_no_tokens_or_samples():
    failed = [*LANES[:4], rec("r4", 0.50, [], [], error="boom")]
    failed[4].end_time = 0.70
    got = steady_window([phase(2, 0.85)], failed)
    assert closed_window(failed, 2).end == 0.70
    assert got.steady_output_throughput_tps == pytest.approx(17 / 0.65) and got.steady_requests == 2


def test_speedup_over_the_window_is_against_the_baselines_window():
    base = [rec(r.prompt_id, r.send_time, r.chunk_times, r.chunk_tokens, config="base") for r in LANES]
    spec = [rec(r.prompt_id, r.send_time, r.chunk_times, [2 * n for n in r.chunk_tokens], config="spec")
            for r in LANES]
    rows = [summarize_cell([phase(2, 0.85, config="base")], base, method="baseline", k=None),
            summarize_cell([phase(2, 0.85, config="spec")], spec, method="ngram", k=3)]
    add_comparisons(rows, base + spec, "base")
    assert rows[1].steady_speedup_vs_baseline == pytest.approx(2.0) and rows[0].steady_speedup_vs_baseline == 1.0
    assert rows[1].speedup_vs_baseline == pytest.approx(2.0)



def wave(c: int, start: float = 0.0, repeat: int = 0) -> list[RequestRecord]:
    """C requests sent at once (one per lane, 1 ms apart), each 3 tokens in 3 chunks, ending 0.4 s + 10 ms × lane."""
    return [rec(f"w{start:g}-{i}", start + 0.001 * i, [start + 0.1, start + 0.2, start + 0.4 + 0.01 * i], [1, 1, 1],
                repeat=repeat, concurrency=c) for i in range(c)]


def test_one_wave_at_c4_has_no_window_and_says_why():
    """C prompts at C > 1: nothing replaces a request that ends, so the span from the wave's last send to its first
    end is its prefill and first tokens (the H200's long prompts at C=16 read 0.62–0.78× there, 1.04–1.07× over the
    pass): no window, every steady key null, and the reason in steady_note."""
    w = closed_window(wave(4), 4)
    assert (w.start, w.end) == (None, None)
    assert w.why_none == "one wave: 4 requests at C=4; no request was sent as a replacement, so there is no steady state"
    got = steady_window([phase(4, 0.5)], wave(4))
    assert got == SteadyWindow(steady_note=f"no steady window: {w.why_none}")


def test_fewer_than_c_replacements_have_no_window_and_c_replacements_have_one():
    """Each end of the first wave refills its lane (closed loop): 2×C requests at C=4 give C replacements inside the
    window, a window; 2×C − 1 give three, none."""
    first = wave(4)
    second = [rec(f"n{i}", r.end_time, [r.end_time + 0.1, r.end_time + 0.2], [1, 1], concurrency=4)  # type: ignore[operator]
              for i, r in enumerate(first)]
    w = closed_window(first + second, 4)
    # opens at the wave's last send (0.003); closes at the first end after the last send (0.43): the first
    # replacement's, sent at 0.40 as w0-0 ended, ending 0.60
    assert (w.start, w.end, w.why_none) == (0.003, pytest.approx(0.60), None)
    short = closed_window(first + second[:3], 4)
    assert short.start is None and short.why_none == (
        "7 requests at C=4, 3 sent as replacements inside the window: fewer than one wave (C), so the window is the "
        "first wave's, not a steady state")


def test_a_send_before_c_were_in_flight_is_no_replacement_inside_the_window():
    """A request that failed at once and was replaced before the fourth lane's first send refills no slot of the
    window: 8 requests at C=4, but 3 replacements inside it."""
    failed = rec("f", 0.0, [], [], error="refused", concurrency=4)
    failed.end_time = 0.0005
    lanes = [failed, *wave(4)[1:], rec("f2", 0.0005, [0.1, 0.2, 0.4], [1, 1, 1], concurrency=4)]
    ends = sorted(r.end_time for r in lanes[1:])  # type: ignore[type-var]
    lanes += [rec(f"n{i}", t, [t + 0.1, t + 0.2], [1, 1], concurrency=4) for i, t in enumerate(ends[:3])]
    assert len(lanes) == 8
    assert closed_window(lanes, 4).why_none == (
        "8 requests at C=4, 3 sent as replacements inside the window: fewer than one wave (C), so the window is the "
        "first wave's, not a steady state")
