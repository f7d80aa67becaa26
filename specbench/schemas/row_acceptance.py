"""The results row's acceptance groups: from the engine's spec-decode counters, from the stream's chunk sizes,
the two against each other, and per request (``measure.acceptance``, ``measure.per_request``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .record_values import key
from .row_group import MetricGroup, Numbers

__all__ = ["AcceptanceChecks", "AcceptedPerStep", "Agreement", "CounterAcceptance", "RequestAcceptance", "StreamSummary"]

_POSITION = ("drafts whose first {i} draft token{s} accepted ÷ drafts (joint), from the per-position counter; null = "
             "not measured (an engine without that counter)")


@dataclass
class CounterAcceptance(MetricGroup):
    """Acceptance from deltas of the engine's spec-decode counters over the timed passes, pooled over repeats.
    Positions beyond the third (K > 3) are written as acceptance_pos_4 … acceptance_pos_K, next to the first three."""

    acceptance_rate: float | None = key(
        "accepted draft tokens ÷ proposed draft tokens: deltas of the engine's spec-decode counters over the measured "
        "phases (acceptance_source); null = no drafting, or counters missing or untrusted (acceptance_error)",
        unit="share", low=0, high=1)
    acceptance_pos_1: float | None = key(
        "drafts whose i-th token was accepted ÷ drafts, i = 1 here, 2 and 3 in acceptance_pos_2/_3 (joint: the first i "
        "tokens were all accepted), from the per-position counter; null = not measured (an engine without that "
        "counter)", unit="share", low=0, high=1)
    acceptance_pos_2: float | None = key(_POSITION.format(i=2, s="s were all"), unit="share", low=0, high=1)
    acceptance_pos_3: float | None = key(_POSITION.format(i=3, s="s were all"), unit="share", low=0, high=1)
    mean_acceptance_length: float | None = key(
        "1 + accepted ÷ drafts (counters): tokens per *drafted* target step, bonus token included; a drafter that "
        "proposes only where the context matches (n-gram) drafts fewer steps, so this can exceed the stream's tokens "
        "per step", unit="tokens/step", low=1)
    acceptance_per_position: Numbers | None = key("acceptance_pos_i for every position the counter reports, i = 1 …",
                                                  unit="share")
    acceptance_source: str | None = key("which counters gave acceptance, and how it was computed from them")
    acceptance_window: str | None = key("the window the counter deltas cover: from a /metrics snapshot after warm-up "
                                        "to one after the phase's last request")
    acceptance_error: str | None = key("why acceptance is null: a counter missing, NaN, infinite, negative or lower "
                                       "after the phase than before (with how many repeats had it)")
    spec_drafts: int | None = key("Σ Δ of the drafts counter: target steps that carried a draft", unit="drafts",
                                  low=0)
    spec_draft_tokens: int | None = key("Σ Δ of the draft-tokens counter: draft tokens proposed", unit="tokens",
                                        low=0)
    spec_accepted_tokens: int | None = key("Σ Δ of the accepted-tokens counter: draft tokens accepted", unit="tokens",
                                           low=0)


@dataclass
class StreamSummary(MetricGroup):
    """Acceptance as the client saw it in the stream's chunk sizes: each decode chunk of n tokens = n − 1 accepted
    + 1 from the target (the first, prefill chunk left out; not computed from a final usage total)."""

    stream_steps: int | None = key("decode chunks of the successful requests: target steps as the client saw them",
                                   unit="steps", low=0)
    stream_accepted_tokens: int | None = key("decode tokens − decode chunks: draft tokens accepted, as the stream "
                                             "shows them", unit="tokens", low=0)
    stream_mean_acceptance_length: float | None = key(
        "decode tokens ÷ decode chunks of the stream: tokens per target step as the client saw them, over every decode "
        "step, drafted or not; overstated where the engine merged steps into one chunk (stream_merged_chunks)",
        unit="tokens/step", low=1)
    stream_acceptance_rate: float | None = key(
        "stream_accepted_tokens ÷ (decode chunks × K); above 1 where chunks merged steps", unit="share", low=0)
    stream_acceptance_joint: Numbers | None = key(
        "P(draft token j accepted), j = 1 … K: the share of decode chunks with at least j accepted tokens",
        unit="share")
    stream_acceptance_conditional: Numbers | None = key(
        "P(draft token j accepted | tokens 1 … j − 1 accepted), j = 1 … K", unit="share")
    stream_tokens_per_step_histogram: dict[str, Any] | None = key("tokens in a decode chunk → decode chunks")
    stream_merged_chunks: int | None = key("decode chunks carrying more than K + 1 tokens: engine steps merged into "
                                           "one chunk", unit="chunks", low=0)


@dataclass
class Agreement(MetricGroup):
    """Accepted tokens as the server's counters and the stream saw them: tokens, not acceptance length, since an
    engine such as n-gram skips the draft on steps with no match (fewer drafts than steps)."""

    acceptance_tokens_diff: float | None = key("stream_accepted_tokens − spec_accepted_tokens", unit="tokens")
    acceptance_sources_agree: bool | None = key(
        "the difference is within one token per request (max_tokens or EOS can cut a request's last step) plus 5 % "
        "of the counters' accepted tokens; false: other traffic in the window, or an engine that merges steps into "
        "one chunk")


@dataclass
class AcceptanceChecks(MetricGroup):
    """How many target steps drafted, and vLLM's own per-request acceptance length beside the counters'."""

    draft_step_share: float | None = key("spec_drafts ÷ stream_steps: the share of target steps that carried a draft "
                                         "(can pass 1 where chunks merged steps)", unit="share", low=0)
    request_stats_mean_acceptance_length: float | None = key(
        "1 + Σ accepted ÷ Σ spec steps of vLLM's per-request speculative_decoding stats (when the server returned "
        "them)", unit="tokens/step", low=1)


@dataclass
class RequestAcceptance(MetricGroup):
    """A cell's acceptance length per request (a speculative config's row): one source per cell."""

    request_acceptance_p10: float | None = key(
        "per-request acceptance length (tokens per target step): vLLM's per-request stats (1 + accepted ÷ drafted "
        "steps) when every request has them, else the stream's decode tokens ÷ decode chunks "
        "(request_acceptance_source); 10th percentile over the requests (p50, p90 beside it)", unit="tokens/step",
        low=1)
    request_acceptance_p50: float | None = key("50th percentile of the per-request acceptance lengths",
                                               unit="tokens/step", low=1)
    request_acceptance_p90: float | None = key("90th percentile of the per-request acceptance lengths",
                                               unit="tokens/step", low=1)
    request_acceptance_mean: float | None = key(
        "request-weighted mean of the per-request acceptance lengths (request_acceptance_token_weighted_mean beside "
        "it: Σ tᵢ·ALᵢ ÷ Σ tᵢ, tᵢ = the request's decode tokens, its output tokens after the first, prefill chunk, "
        "whichever source gave ALᵢ)", unit="tokens/step", low=1)
    request_acceptance_token_weighted_mean: float | None = key(
        "token-weighted mean Σ tᵢ·ALᵢ ÷ Σ tᵢ of the per-request acceptance lengths, tᵢ = the request's decode tokens: "
        "the acceptance the average token saw", unit="tokens/step", low=1)
    request_acceptance_requests: int | None = key("requests with a per-request acceptance length", unit="requests",
                                                  low=0)
    request_acceptance_source: str | None = key("where the lengths came from: vLLM's per-request stats or the "
                                                "stream's chunk sizes")
    request_acceptance_warning: str | None = key(
        "why the lengths are too high: from chunk sizes while the engine merged steps into one chunk (a chunk of more "
        "than K + 1 tokens, or the stream saw fewer steps than the counters imply); written only then", omit_none=True)


@dataclass
class AcceptedPerStep(MetricGroup):
    """The distribution of draft tokens accepted per target step (``measure.accepted``): AIPerf shows it per request,
    the p10/p50/p90 keys only summarise it. Written for a speculative config's cell."""

    accepted_per_step: list[int] | None = key(
        "target steps by the draft tokens each accepted: element a = steps (per request) that accepted a draft "
        "tokens, a = 0, 1, …; from the step log's commit histogram (steplog_hist[a + 1], each request's prefill step "
        "among the steps accepting 0) where the cell ran with one, else from the stream's decode chunks (a chunk of n "
        "tokens = n − 1 accepted; a chunk that merged steps reads as one step accepting more): "
        "accepted_per_step_source", unit="steps", low=0)
    accepted_per_step_source: str | None = key("where accepted_per_step came from: the step log, or the stream's "
                                               "chunk sizes")
    accepted_per_step_categories: dict[str, list[int]] | None = key(
        "accepted_per_step per prompt category, from the stream's chunk sizes (the step log knows no categories); "
        "null where the prompts carry none", unit="steps")
