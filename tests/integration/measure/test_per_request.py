"""Acceptance per request, requests slower than the baseline's, and their scatter plot."""

import json
import re
from pathlib import Path

import pytest

from specbench.measure.per_request import (
    SOURCE_STATS,
    SOURCE_STREAM,
    SlowerShare,
    acceptance_summary,
    request_lengths,
    slower_share,
)
from specbench.report.html import render_html
from specbench.run.readback import read_requests, read_run
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_read import rows_from
from specbench.suite import read_suite
from tests.support import suites
from tests.support.runs import run_suite
from tests.support.suites import baseline_and_spec


def rec(pid: str, chunks: list[int], latency: float = 1.0, stats: dict | None = None, category: str | None = None,
        source: str = "usage_continuous") -> RequestRecord:
    n = len(chunks)
    return RequestRecord(prompt_id=pid, dataset="d", config="c", category=category, send_time=0.0,
                         chunk_times=[latency * (i + 1) / n for i in range(n)], chunk_tokens=chunks,
                         output_tokens=sum(chunks), token_source=source, spec_stats=stats)


def test_stream_lengths_leave_out_prefill_and_estimated_counts():
    lengths, source = request_lengths([rec("a", [1, 2, 4, 1]), rec("b", [1, 3, 3]),
                                       rec("c", [1, 5, 5], source="usage_total_spread")])
    assert source == SOURCE_STREAM
    assert [(r.prompt_id, a, t) for r, a, t in lengths] == [("a", pytest.approx(7 / 3), 7), ("b", 3.0, 6)]


def test_per_request_stats_win_only_when_every_request_has_them():
    stats = {"num_spec_steps": 4, "num_accepted_draft_tokens": 6, "num_draft_tokens": 12}
    lengths, source = request_lengths([rec("a", [1, 2, 2], stats=stats), rec("b", [1, 1, 1], stats=stats)])
    assert source == SOURCE_STATS and [a for _, a, _ in lengths] == [2.5, 2.5]  # 1 + 6/4, not the stream's 2 and 1
    lengths, source = request_lengths([rec("a", [1, 2, 2], stats=stats), rec("b", [1, 1, 1])])
    assert source == SOURCE_STREAM and [a for _, a, _ in lengths] == [2.0, 1.0]


def test_request_and_token_weighted_means_differ_when_long_answers_accept_better():
    short = rec("short", [1] + [1] * 10)  # 10 tokens in 10 steps: AL 1
    long = rec("long", [1] + [4] * 10)  # 40 tokens in 10 steps: AL 4
    out = acceptance_summary([short, long])
    assert out.request_acceptance_mean == pytest.approx(2.5)
    assert out.request_acceptance_token_weighted_mean == pytest.approx((10 * 1 + 40 * 4) / 50)
    assert out.request_acceptance_requests == 2


def test_token_weight_is_the_answers_decode_tokens_whichever_the_source():
    """n-gram drafts only where the text matches: vLLM's per-request stats count drafted steps only. The
    weight is still each request's decode tokens (20 and 15), not its drafted-step tokens (10 and 15)."""
    a = rec("a", [1] + [1] * 20, stats={"num_spec_steps": 4, "num_accepted_draft_tokens": 6, "num_draft_tokens": 12})
    b = rec("b", [1] + [1] * 15, stats={"num_spec_steps": 10, "num_accepted_draft_tokens": 5, "num_draft_tokens": 30})
    out = acceptance_summary([a, b])
    assert out.request_acceptance_source == SOURCE_STATS
    assert out.request_acceptance_token_weighted_mean == pytest.approx((2.5 * 20 + 1.5 * 15) / 35)
    spread = rec("c", [1, 10, 10], source="usage_total_spread", stats={"num_spec_steps": 4, "num_accepted_draft_tokens": 4,
                                                                       "num_draft_tokens": 12})
    assert request_lengths([spread])[0][0][2] == 20  # no per-chunk counts: output tokens − the prefill token


def test_percentiles_over_requests():
    recs = [rec(str(i), [1] + [i] * 3) for i in range(1, 12)]  # AL 1..11
    out = acceptance_summary(recs)
    assert (out.request_acceptance_p10, out.request_acceptance_p50, out.request_acceptance_p90) == (2.0, 6.0, 10.0)


def test_nothing_measured_is_null_not_zero():
    failed = RequestRecord(prompt_id="x", dataset="d", config="c", error="HTTP 500")
    out = acceptance_summary([failed])
    assert out.request_acceptance_p50 is None and out.request_acceptance_mean is None
    assert out.request_acceptance_source is None


def test_slower_share_is_per_output_token_and_paired():
    pairs = [(rec("a", [1, 4], latency=1.0), rec("a", [1, 4], latency=2.0)),  # faster
             (rec("b", [1, 9], latency=3.0), rec("b", [1, 4], latency=2.0)),  # slower in time, faster per token
             (rec("c", [1, 4], latency=3.0), rec("c", [1, 4], latency=2.0))]  # slower
    assert slower_share(pairs) == SlowerShare(pytest.approx(1 / 3), 3)
    assert slower_share([]) == SlowerShare(None, None)


# ---- end to end on scripted servers ----------------------------------------------------------

def write_suite(tmp_path: Path, prompts_file: Path, urls: dict[str, str]) -> Path:
    configs = [*baseline_and_spec(urls["baseline"], urls["fast"], "fast"),
               {"name": "slow", "url": urls["slow"], "method": "ngram", "num_speculative_tokens": 3}]
    return suites.write_suite(tmp_path, configs, name="pr", prompts=prompts_file, requests=6,
                              load={"concurrency": 2, "max_tokens": 22, "warmup": 0})


async def test_end_to_end_columns_and_plot(tmp_path, prompts_file, scripted):
    _, base = await scripted(pattern=[1], ttft_s=0.01, gap_s=0.005)
    _, fast = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.01, gap_s=0.005, spec_stats=True)
    _, slow = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.01, gap_s=0.03)  # 9 steps of 30 ms vs 21 of 5 ms
    await run_suite(read_suite(write_suite(tmp_path, prompts_file, {"baseline": base, "fast": fast, "slow": slow})),
                    tmp_path / "out")
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert rows["fast"]["request_acceptance_source"] == SOURCE_STATS
    assert rows["slow"]["request_acceptance_source"] == SOURCE_STREAM
    for name in ("fast", "slow"):  # every request: 21 decode tokens in 9 steps
        assert rows[name]["request_acceptance_p50"] == pytest.approx(21 / 9)
        assert rows[name]["request_acceptance_token_weighted_mean"] == pytest.approx(21 / 9)
    assert rows["fast"]["slower_than_baseline_share"] == 0.0 and rows["slow"]["slower_than_baseline_share"] == 1.0
    assert rows["slow"]["slower_than_baseline_compared"] == 6
    assert "request_acceptance_p50" not in rows["baseline"] and "slower_than_baseline_share" not in rows["baseline"]
    assert "request_acceptance_warning" not in rows["slow"]  # one chunk per step: nothing to flag
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| Req accept len p10/p50/p90 |" in md and "| Slower than base |" in md
    assert "| 2.33/2.33/2.33 |" in md and "| 100.0% |" in md

    loaded = read_run(tmp_path / "out")
    page = render_html(loaded.rows, read_requests(tmp_path / "out"), loaded.meta)
    fig = re.search(r'<figure class="plot" id="fig-request-acceptance".*?</figure>', page, re.S).group(0)
    panels = re.findall(r'<svg [^>]*data-plot="request-acceptance".*?</svg>', fig, re.S)
    assert len(panels) == 2  # one per speculative config
    for panel in panels:
        dots = re.findall(r'<circle [^>]*fill="(#[0-9A-Fa-f]{6})"', panel)
        assert len(dots) == 6 and len(set(dots)) == 2  # six requests, two categories, two colours
    assert "baseline median TPOT" in fig
    assert '<th scope="col" title="per-request acceptance length (tokens per target step)' in page
    assert ">Req accept len p10/p50/p90</th>" in page and "tᵢ = the request&#x27;s decode tokens" in page


async def test_plot_says_not_measured_without_requests(tmp_path):
    from specbench.report.model import Model
    from specbench.report.plots import request_scatter

    html = request_scatter(Model(rows_from([{"run": "s", "dataset": "d", "method": "ngram", "num_speculative_tokens": 3}]), {}), None)
    assert "not measured" in html and "requests.jsonl not available" in html


async def test_per_request_lengths_from_merged_chunks_are_flagged_beside_the_numbers(tmp_path, prompts_file, scripted):
    """An engine that writes two steps as one chunk for ~15 % of its writes: the counters stay exact (1.5 tokens
    per step) but chunk sizes say 21 tokens in 12 steps, 17 % high. No chunk exceeds k+1 tokens here: only the
    counters show the merging."""
    _, base = await scripted(pattern=[1])
    _, spec = await scripted(pattern=[1, 2], k=3, merge_every=6)
    out = tmp_path / "out"
    await run_suite(read_suite(suites.write_suite(tmp_path, baseline_and_spec(base, spec), name="merged", prompts=prompts_file,
                                                  requests=6, load={"concurrency": 2, "max_tokens": 22, "warmup": 0})), out)
    row = {r["run"]: r for r in json.loads((out / "results.json").read_text())}["spec"]
    assert row["mean_acceptance_length"] == pytest.approx(1.5) and row["stream_merged_chunks"] == 0
    assert row["request_acceptance_source"] == SOURCE_STREAM and row["request_acceptance_p50"] == pytest.approx(21 / 12)
    assert "merged steps" in row["request_acceptance_warning"] and "fewer steps than the server's counters" in row["request_acceptance_warning"]
    md = (out / "results.md").read_text()
    assert "| 1.75/1.75/1.75 ⚠ | 1.75/1.75 ⚠ |" in md
    assert "⚠ spec / prompts / C=2: Req accept len: from chunk sizes while the engine merged steps into one chunk: the stream" in md


def test_a_chunk_beyond_k_plus_one_tokens_is_merging_too():
    from specbench.measure.per_request import merged_steps_warning

    row = rows_from([{"run": "s", "dataset": "d", "request_acceptance_source": SOURCE_STREAM, "stream_merged_chunks": 3,
                      "stream_steps": 100, "acceptance_tokens_diff": -4}])[0]
    assert merged_steps_warning(row).startswith("from chunk sizes while the engine merged steps into one chunk: 3 chunks")
    row.acceptance_tokens_diff, row.stream_merged_chunks = 1, 0  # 1 % of the steps: within the allowance
    assert merged_steps_warning(row) is None
    row.request_acceptance_source, row.stream_merged_chunks = SOURCE_STATS, 3  # not from chunk sizes: unaffected
    assert merged_steps_warning(row) is None
