"""Cached vs cold: a request is cached when the server reported at least half its prompt tokens from the cache;
TTFT, ITL and acceptance split by it, paired on the same question (prompt and turn across repeats, or a
shared-prefix group), and the engine's prefix-cache counters as the fallback hit rate."""

import pytest

from specbench.measure.cache import cache_split, counter_hit_rate, is_cached
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord


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
