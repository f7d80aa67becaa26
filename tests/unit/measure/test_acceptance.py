"""Acceptance math with known answers: /metrics counter windows (vLLM, SGLang), stream chunk sizes,
per-request stats, agreement, and pooling of repeats.

The recorded /metrics texts under tests/data/metrics/ are in prometheus_client's exposition format,
as vLLM 0.32 and SGLang serve it: ``# HELP``/``# TYPE`` lines, ``_total`` counters with ``_created``
twins (values ~1.796e9 that would swamp any sum they leaked into), gauges and histograms.

vLLM window (two engines, engine="0" and engine="1", K=3):
    engine 0: drafts 6→106, draft tokens 18→318, accepted 18→218, per pos (6,6,6)→(86,72,60)
    engine 1: drafts 2→52,  draft tokens 6→156,  accepted 3→53,   per pos (2,1,0)→(27,16,10)
    Δ summed: drafts 150, draft tokens 450, accepted 250, per pos (105, 81, 64)
SGLang window: generation tokens 1000→3800, finished requests 8→24, verify calls 400→1200 →
(2800 − 16)/800 = 3.48 tokens/step (each request's first token is from prefill, not a verify step;
the raw ratio would be 3.5); the ``sglang:spec_accept_length`` gauge (3.9 → 2.1) is a snapshot and
must not be used.
"""

from dataclasses import replace

import pytest

from specbench.client.metrics import parse_metrics
from specbench.launch import read_engine
from specbench.measure.acceptance import (
    CounterNames,
    StreamAcceptance,
    agreement,
    counter_acceptance,
    decode_steps,
    empty_acceptance,
    ratio_acceptance,
    request_stats_acceptance,
    stream_acceptance,
    stream_summary,
)
from specbench.measure.engine_counters import read_acceptance
from specbench.measure.summarize import combine_acceptance
from specbench.schemas.metrics import MetricsSnapshot
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_group import written
from tests.support import paths

DATA = paths.DATA / "metrics"
VLLM = CounterNames(
    drafts="vllm:spec_decode_num_drafts_total",
    draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    accepted="vllm:spec_decode_num_accepted_tokens_total",
    accepted_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos_total",
)


def snap(name: str) -> MetricsSnapshot:
    return parse_metrics((DATA / name).read_text())


# ---------------------------------------------------------------- parse_metrics on recorded texts


def test_parse_vllm_sums_engines_and_skips_created():
    s = snap("vllm_after.txt")
    assert s.ok and s.error is None
    assert s.get("vllm:spec_decode_num_drafts_total") == 106 + 52
    assert s.get("vllm:spec_decode_num_draft_tokens_total") == 318 + 156
    assert s.get("vllm:spec_decode_num_accepted_tokens_total") == 218 + 53
    assert s.by_label["vllm:spec_decode_num_accepted_tokens_per_pos_total"] == {"0": 113.0, "1": 88.0, "2": 70.0}
    assert not any(name.endswith("_created") for name in s.totals)
    # histogram series are parsed as their own samples and do not disturb the counters
    assert s.get("vllm:time_to_first_token_seconds_count") == 6  # 3 observations on each engine
    assert s.get("vllm:request_success_total") == 2 * (42 + 1)  # finished_reason label sets summed too
    assert s.get("vllm:spec_decode_num_drafts") is None  # the family name is not a sample name


def test_parse_sglang_counters_and_gauges():
    s = snap("sglang_before.txt")
    assert s.get("sglang:generation_tokens_total") == 1000
    assert s.get("sglang:spec_verify_calls_total") == 400
    assert s.get("sglang:spec_accept_length") == pytest.approx(2 * 3.9)  # two tp ranks, summed like any sample
    assert "sglang:spec_verify_calls_created" not in s.totals


# ---------------------------------------------------------------- counter_acceptance (vLLM)


def test_counter_acceptance_vllm_window():
    out = counter_acceptance(snap("vllm_before.txt"), snap("vllm_after.txt"), VLLM, k=3).to_dict()
    assert out["spec_drafts"] == 150 and out["spec_draft_tokens"] == 450 and out["spec_accepted_tokens"] == 250
    assert out["acceptance_rate"] == pytest.approx(250 / 450)
    assert out["mean_acceptance_length"] == pytest.approx(1 + 250 / 150)
    assert out["acceptance_per_position"] == pytest.approx([105 / 150, 81 / 150, 64 / 150])
    assert [out[f"acceptance_pos_{i}"] for i in (1, 2, 3)] == pytest.approx([0.7, 0.54, 64 / 150])
    # Σ per-position = mean length − 1 (the identity vLLM's counters obey)
    assert sum(out["acceptance_per_position"]) == pytest.approx(out["mean_acceptance_length"] - 1)


def test_counter_acceptance_via_vllm_engine_adapter():
    out = read_acceptance(read_engine("vllm"), snap("vllm_before.txt"), snap("vllm_after.txt"), 3)
    assert out.mean_acceptance_length == pytest.approx(8 / 3)
    assert out.acceptance_source.startswith("/metrics counters vllm:spec_decode_")
    same = read_acceptance(read_engine("vllm"), snap("vllm_before.txt"), snap("vllm_before.txt"), 3)
    assert same.mean_acceptance_length is None and same.acceptance_source is None


def test_counter_acceptance_real_vllm_032_excerpt():
    """The counters a real vLLM 0.32 CPU server showed after one ngram request (K=3)."""
    labels = 'engine="0",model_name="smol"'
    text = "\n".join([
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{labels}}} 6.0",
        "# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_created gauge",
        f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.796e+09",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} 18.0",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} 18.0",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        *[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{p}"}} 6.0' for p in range(3)],
        "",
    ])
    zero = parse_metrics(text.replace(" 6.0", " 0.0").replace(" 18.0", " 0.0"))
    out = counter_acceptance(zero, parse_metrics(text), VLLM, k=3).to_dict()
    assert out["mean_acceptance_length"] == 4.0 and out["acceptance_rate"] == 1.0
    assert out["acceptance_per_position"] == [1.0, 1.0, 1.0]


def test_counter_acceptance_null_without_counters_or_drafts():
    no_spec = parse_metrics('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 0.0\n')
    out = counter_acceptance(no_spec, no_spec, VLLM, k=3).to_dict()
    assert out["mean_acceptance_length"] is None and out["acceptance_rate"] is None
    assert out["acceptance_pos_1"] is None and out["spec_drafts"] is None
    # counters present but nothing drafted in the window: null, never 0
    b = snap("vllm_before.txt")
    flat = counter_acceptance(b, b, VLLM, k=3).to_dict()
    assert flat["acceptance_rate"] is None and flat["mean_acceptance_length"] is None
    assert flat["acceptance_per_position"] is None
    # a counter missing from one snapshot (scrape failed, server restarted) also gives null
    assert counter_acceptance(MetricsSnapshot(), snap("vllm_after.txt"), VLLM, 3).to_dict()["mean_acceptance_length"] is None


def test_counter_acceptance_k7_has_seven_position_keys_and_no_per_pos_counter():
    out = empty_acceptance(7).to_dict()
    assert [k for k in out if k.startswith("acceptance_pos_")] == [f"acceptance_pos_{i}" for i in range(1, 8)]
    no_pos = CounterNames(VLLM.drafts, VLLM.draft_tokens, VLLM.accepted, None)
    res = counter_acceptance(snap("vllm_before.txt"), snap("vllm_after.txt"), no_pos, k=7).to_dict()
    assert res["mean_acceptance_length"] == pytest.approx(8 / 3)
    assert res["acceptance_per_position"] is None
    assert all(res[f"acceptance_pos_{i}"] is None for i in range(1, 8))


def test_readers_write_the_layouts_phases_jsonl_has_always_held():
    """The typed window writes each family's keys in the order the dict readers wrote them."""
    vllm = read_acceptance(read_engine("vllm"), snap("vllm_before.txt"), snap("vllm_after.txt"), 3).to_dict()
    assert list(vllm) == ["acceptance_rate", "acceptance_pos_1", "acceptance_pos_2", "acceptance_pos_3",
                          "mean_acceptance_length", "acceptance_per_position", "spec_drafts", "spec_draft_tokens",
                          "spec_accepted_tokens", "acceptance_error", "acceptance_source"]
    assert vllm["acceptance_per_position"] == pytest.approx([105 / 150, 81 / 150, 64 / 150])
    sglang = read_acceptance(read_engine("sglang"), snap("sglang_before.txt"), snap("sglang_after.txt"), 7).to_dict()
    assert list(sglang) == ["acceptance_rate", *(f"acceptance_pos_{i}" for i in range(1, 8)), "mean_acceptance_length",
                            "acceptance_per_position", "acceptance_source", "acceptance_error",
                            "sglang_generation_tokens", "sglang_verify_calls", "sglang_finished_requests"]
    assert sglang["sglang_verify_calls"] == 800


# ---------------------------------------------------------------- SGLang


def test_sglang_counters_window():
    eng = read_engine("sglang")
    out = read_acceptance(eng, snap("sglang_before.txt"), snap("sglang_after.txt"), 3, None)
    assert out.mean_acceptance_length == pytest.approx(3.48)  # (2800 tokens − 16 prefill tokens) / 800 verify calls
    assert out.acceptance_rate == pytest.approx((3.48 - 1) / 3)
    assert out.acceptance_source.startswith("(Δsglang:generation_tokens_total − Δsglang:num_requests_total)")
    assert (out.sglang_generation_tokens, out.sglang_verify_calls, out.sglang_finished_requests) == (2800, 800, 16)
    # counters win over the cumulative server-info average
    info = {"internal_states": [{"avg_spec_accept_length": 2.0}]}
    assert read_acceptance(eng, snap("sglang_before.txt"), snap("sglang_after.txt"), 3, info).mean_acceptance_length == pytest.approx(3.48)


def test_sglang_ratio_acceptance_direct():
    assert ratio_acceptance(snap("sglang_before.txt"), snap("sglang_after.txt"),
                            "sglang:generation_tokens_total", "sglang:spec_verify_calls_total") == pytest.approx(3.5)
    b = snap("sglang_before.txt")
    assert ratio_acceptance(b, b, "sglang:generation_tokens_total", "sglang:spec_verify_calls_total") is None


def _without_verify(name: str) -> MetricsSnapshot:
    text = "\n".join(l for l in (DATA / name).read_text().splitlines() if "spec_verify_calls" not in l) + "\n"
    return parse_metrics(text)


def test_sglang_fallback_to_server_info():
    eng = read_engine("sglang")
    before, after = _without_verify("sglang_before.txt"), _without_verify("sglang_after.txt")
    info = {"version": "0.5.16", "internal_states": [{"avg_spec_accept_length": 2.75, "last_gen_throughput": 10.0},
                                                     {"avg_spec_accept_length": 9.0}]}
    out = read_acceptance(eng, before, after, 7, info)
    assert out.mean_acceptance_length == 2.75  # DP rank 0 only
    assert out.acceptance_rate == pytest.approx(1.75 / 7)
    assert "cumulative" in out.acceptance_source and "avg_spec_accept_length" in out.acceptance_source
    # older servers put the value at the top level
    assert read_acceptance(eng, before, after, 3, {"avg_spec_accept_length": 2.5}).mean_acceptance_length == 2.5
    # nothing to go on: null, not 0, and not the snapshot gauge
    none = read_acceptance(eng, before, after, 3, {"internal_states": [{}]})
    assert none.mean_acceptance_length is None and none.acceptance_rate is None and none.acceptance_source is None
    assert read_acceptance(eng, before, after, 3, None).mean_acceptance_length is None


def test_sglang_zero_verify_calls_is_null():
    b = snap("sglang_after.txt")
    out = read_acceptance(read_engine("sglang"), b, b, 3, None)
    assert out.mean_acceptance_length is None and out.acceptance_rate is None


# ---------------------------------------------------------------- stream acceptance


def rec(chunks, *, source="usage_continuous", error=None, spec_stats=None, pid="p") -> RequestRecord:
    r = RequestRecord(prompt_id=pid, dataset="d", config="c", send_time=0.0,
                      chunk_times=[0.1 * (i + 1) for i in range(len(chunks))], chunk_tokens=list(chunks),
                      token_source=source, output_tokens=sum(chunks), error=error, spec_stats=spec_stats)
    return r


def test_decode_steps_skip_prefill_failures_and_spread_counts():
    assert decode_steps(rec([1, 2, 4, 1])) == [2, 4, 1]
    assert decode_steps(rec([1, 2, 0, 3])) == [2, 3]  # empty chunks are not steps
    assert decode_steps(rec([1, 2], error="HTTP 500")) == []
    assert decode_steps(rec([1, 2], source="usage_total_spread")) == []


def test_stream_acceptance_known_answer():
    # decode chunks: 1, 2, 4, 4 and one merged chunk of 5 (> k+1 = 4); the failed request is ignored
    records = [rec([1, 1, 2, 4]), rec([3, 4, 5]), rec([1, 4, 4, 4], error="timeout after 1 s")]
    sa = stream_acceptance(records, k=3)
    assert sa.histogram == {1: 1, 2: 1, 4: 2, 5: 1}
    assert sa.steps == 5 and sa.tokens == 16
    assert sa.mean_acceptance_length == pytest.approx(16 / 5)
    assert sa.merged_steps == 1
    # joint: share of steps with >= j accepted (n - 1 >= j)
    assert sa.joint() == pytest.approx([4 / 5, 3 / 5, 3 / 5])
    # conditional: P(j accepted | j-1 accepted)
    assert sa.conditional() == pytest.approx([4 / 5, 3 / 4, 3 / 3])
    assert sa.acceptance_rate() == pytest.approx((16 - 5) / (5 * 3))


def test_stream_acceptance_joint_is_product_of_conditionals():
    sa = stream_acceptance([rec([1, 1, 2, 2, 3, 4, 4, 4, 1])], k=3)
    joint, cond = sa.joint(), sa.conditional()
    running = 1.0
    for j, c in zip(joint, cond):
        running *= c
        assert j == pytest.approx(running)


def test_stream_acceptance_empty_and_no_k():
    sa = stream_acceptance([], k=3)
    assert sa.steps == 0 and sa.mean_acceptance_length is None and sa.joint() == [] and sa.acceptance_rate() is None
    base = stream_acceptance([rec([1, 1, 1, 1])], k=None)
    assert base.mean_acceptance_length == 1.0 and base.joint() == [] and base.merged_steps == 0
    summary = stream_summary([rec([1, 1, 1])], None)
    assert summary.stream_merged_chunks is None and summary.stream_acceptance_joint is None
    assert summary.stream_tokens_per_step_histogram == {"1": 2}
    assert StreamAcceptance(steps=0, tokens=0, histogram={}, k=3).conditional() == []


def test_stream_summary_keys():
    s = stream_summary([rec([1, 2, 4]), rec([1, 1, 5])], k=3)
    assert s.stream_steps == 4
    assert s.stream_mean_acceptance_length == pytest.approx(12 / 4)
    assert s.stream_tokens_per_step_histogram == {"1": 1, "2": 1, "4": 1, "5": 1}
    assert s.stream_merged_chunks == 1
    assert s.stream_acceptance_rate == pytest.approx((12 - 4) / 12)


# ---------------------------------------------------------------- agreement


@pytest.mark.parametrize("counter, stream, requests, agree", [
    (100, 108, 3, True),    # allowed gap: 3 requests + 5 % of 100 = 8
    (100, 109, 3, False),
    (100, 92, 3, True),
    (100, 91, 3, False),
    (0, 2, 2, True),        # one cut last step per request
    (0, 3, 2, False),
    (250, 250, 0, True),
])
def test_agreement(counter, stream, requests, agree):
    out = agreement(counter, stream, requests)
    assert out.acceptance_sources_agree is agree
    assert out.acceptance_tokens_diff == stream - counter


def test_agreement_missing_side_is_null():
    assert written(agreement(None, 20, 4)) == {"acceptance_tokens_diff": None, "acceptance_sources_agree": None}
    assert written(agreement(20, None, 4)) == {"acceptance_tokens_diff": None, "acceptance_sources_agree": None}


def test_stream_accepted_tokens_agree_with_counter_window():
    """The stream of a request whose steps match the counters: same accepted-token count."""
    records = [rec([1, 2, 4, 1, 3]), rec([1, 4, 4, 2])]  # accepted per step: 1+3+0+2 and 3+3+1
    summary = stream_summary(records, k=3)
    assert summary.stream_accepted_tokens == 13
    assert agreement(13, summary.stream_accepted_tokens, 2).acceptance_sources_agree is True


# ---------------------------------------------------------------- vLLM per-request stats


def test_request_stats_acceptance_sums_requests():
    a = {"mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.5, "num_spec_steps": 10,
         "num_accepted_draft_tokens": 15, "num_draft_tokens": 30, "num_spec_tokens": 3}
    b = {"mean_acceptance_length": 1.5, "draft_acceptance_rate": 0.1667, "num_spec_steps": 30,
         "num_accepted_draft_tokens": 15, "num_draft_tokens": 90, "num_spec_tokens": 3}
    failed = {"num_spec_steps": 1000, "num_accepted_draft_tokens": 3000, "num_draft_tokens": 3000}
    out = request_stats_acceptance([rec([1, 2], spec_stats=a), rec([1, 1], spec_stats=b),
                                    rec([1], spec_stats=failed, error="HTTP 500"), rec([1, 1])])
    # pooled, not the mean of the per-request lengths (which would be 2.0)
    assert out.mean_acceptance_length == pytest.approx(1 + 30 / 40)
    assert out.acceptance_rate == pytest.approx(30 / 120)
    assert (out.spec_steps, out.accepted, out.drafted, out.requests) == (40, 30, 120, 2)


def test_request_stats_acceptance_absent():
    assert request_stats_acceptance([rec([1, 2])]) is None
    assert request_stats_acceptance([rec([1], spec_stats={"num_spec_steps": 0})]) is None
    only_steps = request_stats_acceptance([rec([1], spec_stats={"num_spec_steps": 4, "num_accepted_draft_tokens": 2})])
    assert only_steps.mean_acceptance_length == 1.5 and only_steps.acceptance_rate is None


# ---------------------------------------------------------------- pooling repeats (measure.combine_acceptance)


def window(drafts, tokens, accepted, per_pos):
    before = MetricsSnapshot(totals={VLLM.drafts: 0, VLLM.draft_tokens: 0, VLLM.accepted: 0},
                             by_label={VLLM.accepted_per_pos: {str(i): 0 for i in range(len(per_pos))}})
    after = MetricsSnapshot(totals={VLLM.drafts: drafts, VLLM.draft_tokens: tokens, VLLM.accepted: accepted},
                            by_label={VLLM.accepted_per_pos: {str(i): v for i, v in enumerate(per_pos)}})
    return read_acceptance(read_engine("vllm"), before, after, 3)


def test_combine_acceptance_pools_raw_counts():
    w1 = window(10, 30, 20, [8, 7, 5])
    w2 = window(30, 90, 30, [20, 7, 3])
    out = combine_acceptance([w1, w2], 3).window.to_dict()
    assert (out["spec_drafts"], out["spec_draft_tokens"], out["spec_accepted_tokens"]) == (40, 120, 50)
    assert out["acceptance_rate"] == pytest.approx(50 / 120)  # not the mean of 2/3 and 1/3
    assert out["mean_acceptance_length"] == pytest.approx(1 + 50 / 40)
    assert out["acceptance_per_position"] == pytest.approx([28 / 40, 14 / 40, 8 / 40])
    assert out["acceptance_pos_2"] == pytest.approx(14 / 40)
    assert out["acceptance_source"] == w1.acceptance_source


def test_combine_acceptance_ignores_windows_without_drafts():
    empty = window(0, 0, 0, [0, 0, 0])
    assert empty.spec_drafts is None
    out = combine_acceptance([window(10, 30, 20, [8, 7, 5]), empty], 3).window.to_dict()
    assert out["mean_acceptance_length"] == pytest.approx(3.0)
    assert combine_acceptance([empty, empty], 3).window.to_dict()["mean_acceptance_length"] is None


def test_combine_acceptance_sglang_counters_pool_raw_deltas():
    eng = read_engine("sglang")
    w = read_acceptance(eng, snap("sglang_before.txt"), snap("sglang_after.txt"), 3, None)
    single = combine_acceptance([w], 3).window.to_dict()
    assert single["mean_acceptance_length"] == pytest.approx(3.48)
    assert single["acceptance_source"] == w.acceptance_source
    w2 = replace(w, sglang_generation_tokens=1016, sglang_verify_calls=500, sglang_finished_requests=16)
    two = combine_acceptance([w, w2], 3).window.to_dict()
    assert two["mean_acceptance_length"] == pytest.approx((2800 - 16 + 1016 - 16) / (800 + 500))


def test_combine_acceptance_sglang_length_only():
    before, after = _without_verify("sglang_before.txt"), _without_verify("sglang_after.txt")
    eng = read_engine("sglang")
    w = read_acceptance(eng, before, after, 3, {"avg_spec_accept_length": 3.5})
    single = combine_acceptance([w], 3).window.to_dict()
    assert single["mean_acceptance_length"] == pytest.approx(3.5)
    assert single["acceptance_source"] == w.acceptance_source
    w2 = read_acceptance(eng, before, after, 3, {"avg_spec_accept_length": 2.5})
    two = combine_acceptance([w, w2], 3).window.to_dict()
    assert two["mean_acceptance_length"] == pytest.approx(3.0)
    assert two["acceptance_source"].endswith("(mean of 2 repeats)")


def test_combine_acceptance_sglang_rate_kept_over_repeats():
    eng = read_engine("sglang")
    w = read_acceptance(eng, snap("sglang_before.txt"), snap("sglang_after.txt"), 3, None)
    assert combine_acceptance([w], 3).window.to_dict()["acceptance_rate"] == pytest.approx(2.48 / 3)
    two = combine_acceptance([w, w], 3).window.to_dict()
    assert two["acceptance_rate"] == pytest.approx(2.48 / 3)
