"""Latency and throughput statistics on hand-built request records with known answers."""

from dataclasses import astuple

import numpy as np
import pytest

from specbench.measure.latency import (
    PERCENTILES,
    SharedReads,
    Spread,
    chunk_token_counts,
    latency_stats,
    shared_reads,
    stats_ms,
    throughput,
    token_itl,
    token_sources,
    tpot,
)
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_group import written


def rec(times, tokens=None, *, send=0.0, output=None, error=None, source="usage_continuous", prompt=None) -> RequestRecord:
    tokens = list(tokens) if tokens is not None else []
    return RequestRecord(prompt_id="p", dataset="d", config="c", send_time=send, chunk_times=list(times),
                         chunk_tokens=tokens, output_tokens=output if output is not None else (sum(tokens) or None),
                         error=error, token_source=source, prompt_tokens=prompt)


# ---------------------------------------------------------------- stats_ms


def test_stats_ms_numpy_linear_percentiles():
    out = stats_ms([1.0, 2.0, 3.0, 4.0])
    assert out.mean == pytest.approx(2500.0)
    assert out.p50 == pytest.approx(2500.0)
    assert out.p95 == pytest.approx(3850.0)  # 1 + 0.95 * 3 (linear interpolation)
    assert out.p99 == pytest.approx(3970.0)
    assert all(isinstance(v, float) for v in astuple(out))


def test_stats_ms_matches_numpy_on_random_sample():
    vals = np.random.default_rng(7).exponential(0.02, size=101)
    out = stats_ms(vals)
    assert out.mean == pytest.approx(vals.mean() * 1000)
    for p in PERCENTILES:
        assert getattr(out, f"p{p}") == pytest.approx(np.percentile(vals, p) * 1000)


def test_stats_ms_empty_is_none_not_zero():
    out = stats_ms([])
    assert out == Spread(None, None, None, None)
    assert stats_ms(np.empty(0)) == out


def test_stats_ms_single_sample():
    out = stats_ms([0.25])
    assert set(astuple(out)) == {250.0}


# ---------------------------------------------------------------- per-token ITL


def test_token_itl_chunk_of_n_tokens_gives_n_samples():
    r = rec([0.1, 0.3, 0.35, 0.65], [1, 4, 1, 3])
    itl = token_itl(r)
    # gaps 0.2 (4 tokens), 0.05 (1 token), 0.3 (3 tokens)
    assert itl == pytest.approx([0.05] * 4 + [0.05] + [0.1] * 3)
    # the per-token mean is decode time / decode tokens
    assert itl.mean() == pytest.approx((0.65 - 0.1) / 8)


def test_token_itl_one_token_chunks_equal_gaps():
    r = rec([0.0, 0.01, 0.03, 0.06], [1, 1, 1, 1])
    assert token_itl(r) == pytest.approx([0.01, 0.02, 0.03])


def test_token_itl_fewer_than_two_chunks_is_empty():
    assert token_itl(rec([0.1], [5])).size == 0
    assert token_itl(rec([], [])).size == 0


def test_token_itl_zero_token_chunk_keeps_its_time():
    # a chunk with text but no new token (usage delta 0) between two token-bearing chunks:
    # the 2 tokens of the last chunk arrived 0.2 s after the previous token, so 2 samples of 0.1
    r = rec([0.1, 0.2, 0.3], [1, 0, 2])
    itl = token_itl(r)
    assert itl == pytest.approx([0.1, 0.1])
    assert itl.mean() == pytest.approx(tpot(r))


def test_token_itl_spread_from_usage_total_keeps_the_mean_exact():
    # usage only at the end: 10 tokens over 4 chunks; the first chunk is the prefill token, the other 9 go 3/3/3
    r = rec([0.1, 0.3, 0.35, 0.65], [], output=10, source="usage_total_spread")
    assert chunk_token_counts(r).tolist() == [1, 3, 3, 3]
    itl = token_itl(r)
    assert set(np.round(itl, 12)) == {round(0.2 / 3, 12), round(0.05 / 3, 12), 0.1}  # each gap / 3
    assert itl.size == 9 and itl.mean() == pytest.approx((r.latency - r.ttft) / 9) == pytest.approx(tpot(r))
    # 11 tokens: the remainder goes to the first decode chunks, whole tokens only
    r.output_tokens = 11
    assert chunk_token_counts(r).tolist() == [1, 4, 3, 3] and token_itl(r).mean() == pytest.approx(0.55 / 10)


def test_chunk_token_counts_fallbacks():
    assert chunk_token_counts(rec([1, 2, 3], [1, 2, 3])).tolist() == [1, 2, 3]
    # counts that do not line up with the chunks are not trusted
    assert chunk_token_counts(rec([1, 2, 3], [1, 2], output=9)).tolist() == [1, 4, 4]
    r = rec([1, 2], [], output=None, source="none")
    r.output_tokens = None
    assert chunk_token_counts(r).tolist() == [1, 1]


# ---------------------------------------------------------------- TPOT


def test_tpot_known_answer():
    r = rec([0.1, 0.4, 1.0], [1, 5, 4], send=0.0)  # 10 tokens, ttft 0.1, latency 1.0
    assert tpot(r) == pytest.approx((1.0 - 0.1) / 9)


def test_tpot_undefined_cases():
    assert tpot(rec([0.1], [1])) is None  # one token
    assert tpot(rec([0.1, 0.2], [1, 1], error="HTTP 500")) is None
    assert tpot(rec([], [])) is None
    r = rec([0.1, 0.2], [1, 1])
    r.output_tokens = None
    assert tpot(r) is None


# ---------------------------------------------------------------- latency_stats


def test_latency_stats_hand_built():
    a = rec([1.1, 1.3, 1.5, 2.0], [1, 2, 2, 5], send=1.0)   # ttft 0.1, latency 1.0, 10 tokens
    b = rec([5.2, 5.3, 5.5], [1, 1, 2], send=5.0)          # ttft 0.2, latency 0.5, 4 tokens
    failed = rec([9.9, 10.0], [1, 1], send=9.0, error="timeout after 1 s")  # ignored everywhere
    out = latency_stats([a, b, failed])
    assert out.latency_mean_ms == pytest.approx(750.0)
    assert out.latency_p50_ms == pytest.approx(750.0)
    assert out.latency_p95_ms == pytest.approx(500 + 0.95 * 500)
    assert out.ttft_mean_ms == pytest.approx(150.0)
    # TPOT per request: a (1.0-0.1)/9 = 0.1, b (0.5-0.2)/3 = 0.1
    assert out.tpot_mean_ms == pytest.approx(100.0) and out.tpot_p99_ms == pytest.approx(100.0)
    # per-token ITL pooled over requests: a: 0.2/2 x2, 0.2/2 x2, 0.5/5 x5; b: 0.1/1, 0.2/2 x2
    assert out.itl_mean_ms == pytest.approx(100.0) and out.itl_p95_ms == pytest.approx(100.0)
    # step = raw chunk gaps: 0.2, 0.2, 0.5, 0.1, 0.2
    assert out.step_mean_ms == pytest.approx(1000 * (0.2 + 0.2 + 0.5 + 0.1 + 0.2) / 5)
    assert out.step_p50_ms == pytest.approx(200.0)
    assert set(written(out)) == {f"{m}_{s}_ms" for m in ("latency", "ttft", "itl", "tpot", "step")
                                  for s in ("mean", "p50", "p95", "p99")}


def test_latency_stats_pools_itl_samples_not_request_means():
    short = rec([0.0, 1.0], [1, 1])                # one ITL sample of 1.0
    long = rec([0.0] + [0.1 * i for i in range(1, 10)], [1] * 10)  # nine samples of 0.1
    out = latency_stats([short, long])
    assert out.itl_mean_ms == pytest.approx((1.0 + 9 * 0.1) / 10 * 1000)  # 190, not (1000+100)/2


def test_latency_stats_all_failed_is_none():
    out = latency_stats([rec([0.1, 0.2], [1, 1], error="HTTP 500"), rec([], [], error="no content chunk received")])
    assert all(v is None for v in astuple(out))
    assert latency_stats([]) == out


def test_shared_reads_counts_chunks_stamped_like_the_one_before():
    a = rec([0.1, 0.2, 0.2, 0.3], [1, 2, 2, 2])  # chunk 2 came in chunk 1's read
    b = rec([0.1, 0.15], [1, 3])
    failed = rec([0.1, 0.1], [1, 1], error="HTTP 500")
    out = shared_reads([a, b, failed])
    assert out == SharedReads(1, pytest.approx(1 / 4))
    assert shared_reads([rec([0.1], [1])]) == SharedReads(0, None)


# ---------------------------------------------------------------- throughput


def test_throughput_failed_requests_add_nothing():
    ok1 = rec([0.1, 0.2], [1, 9], prompt=30)
    ok2 = rec([0.1, 0.2], [1, 19], prompt=12)
    failed = rec([0.1, 0.2], [1, 4], error="server error in stream: boom", prompt=99)
    out = throughput([ok1, ok2, failed], wall_s=4.0)
    assert out.requests == 2
    assert out.output_tokens == 30
    assert out.prompt_tokens == 42
    assert out.output_throughput_tps == pytest.approx(30 / 4.0)
    assert out.request_throughput_rps == pytest.approx(2 / 4.0)
    assert out.duration_s == 4.0


def test_throughput_prompt_tokens_only_when_all_known():
    out = throughput([rec([0.1], [3], prompt=5), rec([0.1], [3])], wall_s=1.0)
    assert out.prompt_tokens is None and out.output_tokens == 6


def test_throughput_nothing_measured():
    out = throughput([rec([], [], error="HTTP 500")], wall_s=2.0)
    assert out.requests == 0 and out.output_tokens == 0
    assert out.output_throughput_tps is None and out.request_throughput_rps is None
    zero_wall = throughput([rec([0.1], [3])], wall_s=0.0)
    assert zero_wall.output_throughput_tps is None


def test_token_sources_counts_ok_records():
    recs = [rec([0.1], [1]), rec([0.1], [1]), rec([0.1], [], output=4, source="usage_total_spread"),
            rec([0.1], [1], error="x", source="token_ids")]
    assert token_sources(recs) == {"usage_continuous": 2, "usage_total_spread": 1}
