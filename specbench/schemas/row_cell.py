"""The results row's groups about the cell itself: which cell, its throughput, its load point, whether it
stands, the server it ran on and its spread over repeats (``measure.summarize.summarize_cell``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .notes import Notes
from .record_values import key
from .row_group import MetricGroup, Numbers

__all__ = ["Categories", "CellIdentity", "CellLoad", "CellServer", "CellStatus", "CellThroughput", "RepeatStats"]


@dataclass
class CellIdentity(MetricGroup):
    """Which cell the row measures: data set × config (its load point is ``CellLoad``'s)."""

    dataset: str = key("the data set's name in the suite", required=True)
    run: str = key("the config's name in the suite (the key predates the word config; the baseline has a row of its "
                   "own)", required=True)
    method: str | None = key("the config's speculative method as the suite names it (ngram, dspark, …); baseline for "
                             "the baseline")
    num_speculative_tokens: int | None = key("K: draft tokens the config proposes per step; null for the baseline",
                                             unit="tokens", low=0)


@dataclass
class CellThroughput(MetricGroup):
    """What the cell's timed passes delivered, and its speed against the baseline's."""

    requests: int | None = key("successful requests in the cell's timed passes (each turn of a conversation counts; "
                               "failed ones do not, see failed_requests)", unit="requests", low=0)
    output_tokens: int | None = key("Σ output tokens of those successful requests (the server's usage counts)",
                                    unit="tokens", low=0)
    request_throughput_rps: float | None = key("successful requests ÷ wall time of the timed pass, mean over repeats",
                                               unit="req/s", low=0)
    output_throughput_tps: float | None = key(
        "Σ output tokens of the successful requests (the server's usage counts) ÷ wall time of the timed pass, mean "
        "over repeats; failed requests add 0", unit="tokens/s", low=0)
    speedup_vs_baseline: float | None = key(
        "this config's output_throughput_tps ÷ the baseline's on the same data set and load point (1.0 on the "
        "baseline's own row; null without a baseline)", unit="×", low=0)


@dataclass
class CellLoad(MetricGroup):
    """The cell's load point and how long it was measured."""

    concurrency: int | None = key("the closed-loop cell's concurrent streams (null for an open-loop cell, whose "
                                  "in-flight cap is max_concurrency)", unit="streams", low=0)
    request_rate: float | None = key("the open-loop cell's Poisson request rate (null for a closed-loop cell)",
                                     unit="req/s", low=0)
    max_concurrency: int | None = key("the open-loop cell's cap on requests in flight (null: none); written only for "
                                      "an open-loop cell", unit="requests", low=0)
    repeats: int | None = key("timed passes the cell ran (load.repeats, or as many as load.target_ci planned)",
                              unit="passes", low=1)
    duration_s: float | None = key("Σ wall time of the cell's timed passes", unit="s", low=0)
    prompt_tokens: int | None = key("Σ prompt tokens of the successful requests (the server's usage counts); null "
                                    "when one of them has none", unit="tokens", low=0)


@dataclass
class CellStatus(MetricGroup):
    """Whether the cell's numbers stand: failures, which count each token number came from, and the lines
    printed under the tables."""

    failed_requests: int | None = key("requests of the timed passes that failed (by reason in errors)",
                                      unit="requests", low=0)
    errors: dict[str, Any] | None = key("why requests failed: reason (the error up to its first colon, at most 80 "
                                        "characters) → requests")
    status: str | None = key("ok; failed when more than half of the cell's requests failed, none was sent or its "
                             "server died; interrupted when the run was stopped during the cell")
    server_died: bool | None = key("true when the cell's server died during a timed pass (written only then)")
    token_count_source: dict[str, Any] | None = key(
        "where each successful request's token counts came from → requests: usage_continuous (the usage of every "
        "chunk), token_ids (per-chunk token ids), usage_total_spread (only a final usage total, spread over the "
        "decode chunks)")
    token_count_warnings: dict[str, Any] | None = key(
        "why a successful request's token count was replaced or doubted → requests (requests.jsonl token_warning)")
    itl_percentiles_estimated: bool | None = key(
        "true when some request had only a final usage total, spread over its decode chunks: the ITL percentiles are "
        "estimates (TTFT, latency, TPOT and the ITL mean stay exact)")
    notes: Notes | None = key("what the report says under the tables for this cell: notes (a code and its values, "
                              "worded by the report), or the sentences an earlier specbench stored")


@dataclass
class CellServer(MetricGroup):
    """The server the cell ran on."""

    engine: str | None = key("the server's engine as its launcher names it (vllm, sglang, …)")
    server_version: str | None = key("the server's version, as it answered")
    server_url: str | None = key("the URL the requests were sent to")
    weights: str | None = key("dummy: the config was served with random weights (suite load_format: dummy); absent: "
                              "the model's")


@dataclass
class RepeatStats(MetricGroup):
    """The cell's spread over its repeats, and its confidence intervals."""

    output_throughput_tps_repeats: Numbers | None = key(
        "output_throughput_tps of each timed pass, in repeat order (written for two repeats or more)", unit="tokens/s")
    std: dict[str, Any] | None = key("sample standard deviation over the repeats, by key (output_throughput_tps)")
    ci95: dict[str, Any] | None = key(
        "95% confidence intervals [low, high] by key: output_throughput_tps (Student-t over repeats), "
        "speedup_vs_baseline (speedup_ci_method), paired_speedup, speedup_decomposed")
    speedup_ci_method: str | None = key(
        "how ci95.speedup_vs_baseline, the 95% confidence interval of speedup_vs_baseline, was computed: Student-t on "
        "log speedups over paired repeats where the cell ran repeats, else a bootstrap over paired prompts (2000 "
        "resamples) of Σ tokens ÷ Σ latency, scaled onto the speedup")


@dataclass
class Categories(MetricGroup):
    """The cell split by prompt category (a data set whose prompts carry one)."""

    categories: dict[str, Any] | None = key(
        "category → its requests, output_tokens, tpot_mean_ms, latency_mean_ms and the stream's acceptance "
        "(stream_mean_acceptance_length, stream_acceptance_rate, _joint, _conditional) over its successful requests")
