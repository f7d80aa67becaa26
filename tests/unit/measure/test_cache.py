"""Cached vs cold: a request is cached when the server reported at least half its prompt tokens from the cache;
TTFT, ITL and acceptance split by it, paired on the same question (prompt and turn across repeats, or a
shared-prefix group), and the engine's prefix-cache counters as the fallback hit rate."""

import pytest

from specbench.measure.cache import ResentPrompts, add_resent_notes, cache_split, counter_hit_rate, is_cached, resent_prompts
from specbench.schemas.cell import Cell
from specbench.schemas.notes import Note, NoteCode
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_read import rows_from


def rec(pid: str, cached: int | None, ttft: float, gap: float = 0.01, repeat: int = 0, group: str | None = None,
        tokens: list[int] | None = None, prompt: int = 100, error: str | None = None) -> RequestRecord:
    tokens = tokens or [1, 1, 1]
    times = [ttft + i * gap for i in range(len(tokens))]
    return RequestRecord(prompt_id=pid, dataset="d", config="c", send_time=0.0, chunk_times=times, chunk_tokens=tokens,
                         output_tokens=sum(tokens), prompt_tokens=prompt, cached_tokens=cached, repeat=repeat,
                         token_source="usage_continuous", prefix_group=group, error=error)


def phase(repeat: int = 0, cache: dict | None = None) -> PhaseInfo:
    return PhaseInfo(config="c", dataset="d", concurrency=1, request_rate=None, repeat=repeat, wall_s=1.0,
                     prefix_cache=cache)


def test_cached_is_at_least_half_the_prompt_from_the_cache():
    assert is_cached(rec("a", 50, 0.1)) is True and is_cached(rec("a", 49, 0.1)) is False
    assert is_cached(rec("a", 16, 0.1)) is False  # the chat template's first block: not a cached request
    assert is_cached(rec("a", None, 0.1)) is None and is_cached(rec("a", 0, 0.1, prompt=0)) is None


def test_nothing_reported_and_no_counters_gives_no_keys():
    assert cache_split([phase()], [rec("a", None, 0.1)], spec=False) is None


def test_split_means_and_pairs_across_repeats_on_the_same_prompt():
    records = [rec("p0", 0, 0.200, gap=0.020), rec("p1", 96, 0.040), rec("p2", 96, 0.050),  # repeat 0: p0 cold
               rec("p0", 99, 0.020, gap=0.010, repeat=1), rec("p1", 99, 0.030, repeat=1), rec("p2", 99, 0.030, repeat=1),
               rec("p3", None, 0.5), rec("p4", 80, 0.9, error="boom")]  # not reported / failed: in neither side
    got = cache_split([phase(), phase(1)], records, spec=False)
    assert got is not None
    assert (got.cached_requests, got.cold_requests, got.cache_pairs) == (5, 1, 1)
    assert got.cached_prompt_share == pytest.approx((0 + 96 + 96 + 99 * 3) / 600)
    assert got.cold_ttft_mean_ms == pytest.approx(200.0)
    assert got.cached_ttft_mean_ms == pytest.approx(1000 * (0.04 + 0.05 + 0.02 + 0.03 + 0.03) / 5)
    assert got.cold_itl_mean_ms == pytest.approx(20.0) and got.cached_itl_mean_ms == pytest.approx(10.0)
    # the pair is p0 alone: cold 200 ms / 20 ms ITL, cached 20 ms / 10 ms
    assert got.cache_paired_ttft_ratio == pytest.approx(0.1) and got.cache_paired_itl_ratio == pytest.approx(0.5)
    assert got.cached_acceptance_mean is None and got.cache_paired_acceptance_delta is None  # not speculating
    assert got.prefix_cache_hit_rate is None


def test_a_shared_prefix_group_pairs_its_cold_first_with_its_cached_rest():
    records = [rec("g0-0", 0, 0.300, group="g0"), rec("g0-1", 90, 0.060, group="g0"), rec("g0-2", 90, 0.040, group="g0"),
               rec("g1-0", 0, 0.200, group="g1"), rec("g1-1", 90, 0.020, group="g1"),
               rec("g2-0", 90, 0.030, group="g2")]  # a group measured cached only: no pair
    got = cache_split([phase()], records, spec=False)
    assert got is not None and got.cache_pairs == 2
    # means over the pairs: cold (300 + 200) / 2, cached ((60 + 40) / 2 + 20) / 2
    assert got.cache_paired_ttft_ratio == pytest.approx(((0.05 + 0.02) / 2) / ((0.3 + 0.2) / 2))


def test_acceptance_split_for_a_speculative_config():
    records = [rec("p0", 0, 0.2, tokens=[1, 3, 3]), rec("p0", 99, 0.02, tokens=[1, 2, 2, 2], repeat=1),
               rec("p1", 99, 0.02, tokens=[1, 4, 4])]
    got = cache_split([phase(), phase(1)], records, spec=True)
    assert got is not None
    assert got.cold_acceptance_mean == pytest.approx(3.0) and got.cached_acceptance_mean == pytest.approx((2 + 4) / 2)
    assert got.cache_paired_acceptance_delta == pytest.approx(2.0 - 3.0)


def test_counters_give_the_hit_rate_where_requests_carry_no_count():
    records = [rec("p0", None, 0.2), rec("p1", None, 0.1)]
    got = cache_split([phase(cache={"queries": 300, "hits": 100}), phase(1, {"queries": 100, "hits": 100})],
                      records, spec=False)
    assert got is not None and got.prefix_cache_hit_rate == pytest.approx(0.5)
    assert got.cached_requests is None and got.cache_pairs is None and got.cached_ttft_mean_ms is None


def test_an_untrusted_or_missing_counter_window_gives_no_hit_rate():
    assert counter_hit_rate([phase(cache={"queries": 3, "hits": 1}), phase(1)]) is None
    assert counter_hit_rate([phase(cache={"error": "went down"})]) is None
    assert counter_hit_rate([phase(cache={"queries": 3, "hits": "x"})]) is None
    assert counter_hit_rate([phase(cache={"queries": 0, "hits": 0})]) is None
    got = cache_split([phase(cache={"error": "/metrics vllm:prefix_cache_hits_total went down"})], [rec("a", None, 0.1)],
                      spec=False)
    assert got is not None and got.prefix_cache_hit_rate is None  # the window was read: the cell says it has no rate


def sent(pid: str, cached: int | None, conc: int, phase: str = "measure", turn: int = 0, repeat: int = 0,
         answered: bool = True) -> RequestRecord:
    """A request of config c on data set d at C=``conc`` (a warm-up's: its C as the warm-up records it)."""
    return RequestRecord(prompt_id=pid, dataset="d", config="c", turn=turn, phase=phase, concurrency=conc,
                         repeat=repeat, send_time=1.0, chunk_times=[1.1, 1.2] if answered else [],
                         chunk_tokens=[1, 1] if answered else [], prompt_tokens=100, cached_tokens=cached,
                         error=None if answered else "HTTP 500")


def at(conc: int, start: int | None = 0, repeat: int = 0, reset: bool | None = None) -> PhaseInfo:
    return PhaseInfo(config="c", dataset="d", concurrency=conc, request_rate=None, repeat=repeat, wall_s=1.0,
                     server_start=start, prefix_cache_reset=reset)


def cell(conc: int) -> Cell:
    return Cell("c", "d", conc, None)


def test_a_pass_counts_the_prompts_an_earlier_pass_or_a_warm_up_of_its_server_start_sent():
    records = [
        # C=1: its warm-up sent p0; within the pass p1 twice and a conversation's two turns: shared within itself
        sent("p0", 0, 1, "warmup"), sent("p0", 96, 1), sent("p1", 16, 1), sent("p1", 96, 1),
        sent("m", 16, 1), sent("m", 90, 1, turn=1), sent("p9", 0, 1, answered=False),  # p9: never prefilled
        # C=2, same server start: every prompt the first pass (or the warm-up) sent is found again; p9 and p3 are new
        sent("p0", 0, 2, "warmup"), sent("p0", 96, 2), sent("p1", 96, 2), sent("m", 96, 2), sent("m", 98, 2, turn=1),
        sent("p9", 0, 2), sent("p3", 16, 2),
        # C=4 on the config's next server start: nothing sent before it there
        sent("p0", 16, 4), sent("p1", 16, 4),
    ]
    got = resent_prompts([at(1), at(2), at(4, start=1)], records)
    assert got[cell(1)] == ResentPrompts(requests=5, resent=1, cached=1, cached_share=0.96)
    assert got[cell(2)] == ResentPrompts(requests=6, resent=4, cached=4, cached_share=pytest.approx((96 * 3 + 98) / 400))
    assert got[cell(4)] == ResentPrompts(requests=2, resent=0, cached=0, cached_share=None)


def test_a_repeat_re_sends_its_cells_prompts_and_a_pass_without_a_phase_is_no_history():
    records = [sent("p0", 0, 1), sent("p1", 0, 1, phase="superseded"),  # a cut pass, set aside: no server start known
               sent("p0", 90, 1, repeat=1), sent("p1", 90, 1, repeat=1)]
    got = resent_prompts([at(1), at(1, repeat=1)], records)
    assert got[cell(1)] == ResentPrompts(requests=3, resent=1, cached=1, cached_share=0.9)


def test_after_a_reset_a_pass_finds_nothing_sent_before_it_and_missing_counts_say_nothing():
    records = [sent("p0", 0, 1, "warmup"), sent("p0", 0, 1), sent("p0", 0, 2, "warmup"), sent("p0", 16, 2)]
    assert resent_prompts([at(1, reset=True), at(2, reset=True)], records) == {}
    unreported = [sent("p0", None, 1), sent("p0", None, 2)]
    got = resent_prompts([at(1, start=None), at(2, start=None)], unreported)  # a server at a URL: one start
    assert got[cell(2)] == ResentPrompts(requests=1, resent=1, cached=0, cached_share=None)
    rows = rows_from([{"run": "c", "dataset": "d", "concurrency": 2}])
    add_resent_notes(rows, [at(1, start=None), at(2, start=None)], unreported)
    assert rows[0].notes is None  # the server did not say: no guess


def test_the_note_goes_to_the_cell_whose_re_sent_prompts_were_cached():
    rows = rows_from([{"run": "c", "dataset": "d", "concurrency": c} for c in (1, 2)])
    records = [sent("p0", 0, 1), sent("p1", 0, 1), sent("p0", 96, 2), sent("p1", 20, 2), sent("p2", 0, 2)]
    add_resent_notes(rows, [at(1), at(2)], records)
    assert rows[0].notes is None
    [note] = rows[1].notes
    assert isinstance(note, Note) and note.code == NoteCode.RESENT_PROMPTS
    assert note.values == {"resent": 2, "requests": 3, "cached_share": pytest.approx((96 + 20) / 200)}
