"""Pure acceptance math: server counter deltas, and per-request acceptance from stream chunk sizes.

Conventions (the same as vLLM's ``vllm bench serve``):
- acceptance_rate = accepted draft tokens / proposed draft tokens
- acceptance_pos_i = drafts whose i-th token was accepted / drafts (joint: it counts only drafts
  whose first i tokens were all accepted)
- mean_acceptance_length = 1 + accepted / drafts: tokens committed per target step, bonus included

Counters are server values: one that is NaN, infinite, negative or lower after the phase than
before makes the window's acceptance null, with the reason in ``acceptance_error``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..schemas.acceptance import POSITION, AcceptanceWindow
from ..schemas.metrics import MetricsSnapshot
from ..schemas.request import RequestRecord
from ..schemas.row_acceptance import Agreement, StreamSummary

REPORTED_POSITIONS = 3  # results always carry acceptance_pos_1..3 (null when not measured)


@dataclass(frozen=True)
class CounterNames:
    """Sample names of an engine's cumulative spec-decode counters (from its launcher YAML)."""

    drafts: str
    draft_tokens: str
    accepted: str
    accepted_per_pos: str | None = None


def reported_positions(k: int | None) -> int:
    """acceptance_pos_1..n every window and row carries (null when not measured): n = max(3, k)."""
    return max(REPORTED_POSITIONS, k or 0)


def layout(k: int | None, *tail: str) -> tuple[str, ...]:
    """A window's keys in the order phases.jsonl has always held them: rate, positions, length, per position, ``tail``."""
    return ("acceptance_rate", *(f"{POSITION}{i}" for i in range(1, reported_positions(k) + 1)),
            "mean_acceptance_length", "acceptance_per_position", *tail)


def empty_acceptance(k: int | None = None, *tail: str) -> AcceptanceWindow:
    """A window that measured nothing: every value null, the keys of ``layout(k, *tail)``."""
    return AcceptanceWindow(positions=(None,) * reported_positions(k), keys=layout(k, *tail))


def with_positions(window: AcceptanceWindow, per_pos: Sequence[float | None]) -> AcceptanceWindow:
    """``window`` with its acceptance per position (acceptance_pos_i and ``acceptance_per_position``); a
    position beyond the reported ones joins the layout at its end."""
    n = len(window.positions)
    more = tuple(f"{POSITION}{i}" for i in range(n + 1, len(per_pos) + 1))
    return replace(window, positions=(*per_pos, *window.positions[len(per_pos):]), acceptance_per_position=tuple(per_pos),
                   keys=(*window.keys, *more))


def counter_deltas(before: MetricsSnapshot, after: MetricsSnapshot,
                   names: dict[str, str | None]) -> tuple[dict[str, float | None], str | None]:
    """Each named counter's increase over the window (None where a snapshot lacks it), or the
    reason the window cannot be trusted: a value the scrape found invalid, or a counter that went down."""
    out: dict[str, float | None] = {}
    for key, name in names.items():
        if name is None:
            out[key] = None
            continue
        for snap, when in ((before, "before"), (after, "after")):
            if name in snap.invalid:
                return out, f"/metrics {name} is {snap.invalid[name]} {when} the phase"
        a, b = after.get(name), before.get(name)
        if any(v is not None and not math.isfinite(v) for v in (a, b)):
            return out, f"/metrics {name} overflows when its series are summed"
        if a is not None and b is not None and a < b:
            return out, (f"/metrics {name} went down during the phase ({b:g} → {a:g}): "
                         "the server restarted or reset its counters")
        out[key] = None if a is None or b is None else a - b
    return out, None


def counter_acceptance(before: MetricsSnapshot, after: MetricsSnapshot, names: CounterNames, k: int | None) -> AcceptanceWindow:
    """Acceptance over one window from two snapshots; null (never 0) when nothing was drafted."""
    out = empty_acceptance(k, "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens", "acceptance_error")
    d, error = counter_deltas(before, after, {"drafts": names.drafts, "tokens": names.draft_tokens,
                                              "accepted": names.accepted, "per_pos": names.accepted_per_pos})
    if error:
        return replace(out, acceptance_error=error)
    drafts, tokens, accepted = d["drafts"], d["tokens"], d["accepted"]
    if drafts is None or tokens is None or accepted is None or drafts <= 0 or tokens <= 0:
        return out
    if accepted > tokens or drafts > tokens:
        return replace(out, acceptance_error=(f"/metrics counters contradict each other: {accepted:g} accepted of {tokens:g} "
                                              f"drafted tokens in {drafts:g} drafts"))
    per_pos: list[float] = []
    if names.accepted_per_pos:
        after_pos = after.by_label.get(names.accepted_per_pos, {})
        before_pos = before.by_label.get(names.accepted_per_pos, {})
        for pos in sorted(after_pos, key=_position):
            per_pos.append((after_pos[pos] - before_pos.get(pos, 0.0)) / drafts)
        if any(not 0 <= p <= 1 for p in per_pos):
            return replace(out, acceptance_error=f"/metrics {names.accepted_per_pos}: a position was accepted more "
                                                 "often than drafted, or went down")
    out = replace(out, spec_drafts=int(drafts), spec_draft_tokens=int(tokens), spec_accepted_tokens=int(accepted),
                  acceptance_rate=accepted / tokens, mean_acceptance_length=1 + accepted / drafts)
    return with_positions(out, per_pos) if per_pos else out


def _position(label: str) -> tuple[int, str]:
    return (int(label), "") if label.isdigit() else (1 << 30, label)


def verify_step_acceptance(window: AcceptanceWindow, tokens: float, steps: float, requests: float,
                           k: int | None) -> AcceptanceWindow:
    """SGLang: ``window`` with tokens per verify step = (Δgeneration tokens − one prefill token per finished
    request) ÷ Δverify calls; each request's first token comes from prefill, not from a verify step."""
    length = (tokens - requests) / steps
    return replace(window, mean_acceptance_length=length, acceptance_rate=(length - 1) / k if k else None)


def ratio_acceptance(before: MetricsSnapshot, after: MetricsSnapshot, tokens_name: str, steps_name: str) -> float | None:
    """Tokens per verify step from two cumulative counters (SGLang: generation tokens / verify calls)."""
    t_a, t_b, s_a, s_b = after.get(tokens_name), before.get(tokens_name), after.get(steps_name), before.get(steps_name)
    if t_a is None or t_b is None or s_a is None or s_b is None or s_a - s_b <= 0:
        return None
    return (t_a - t_b) / (s_a - s_b)


def decode_steps(record: RequestRecord) -> list[int]:
    """Tokens committed per target step, from chunk sizes; the first chunk is prefill and left out."""
    if not record.ok or not record.chunk_tokens or record.token_source == "usage_total_spread":
        return []
    return [n for n in record.chunk_tokens[1:] if n > 0]


@dataclass(frozen=True)
class StreamAcceptance:
    """Acceptance seen from the client: each decode chunk of n tokens = n−1 accepted + 1 from the target."""

    steps: int
    tokens: int
    histogram: dict[int, int]
    k: int | None

    @property
    def mean_acceptance_length(self) -> float | None:
        return self.tokens / self.steps if self.steps else None

    @property
    def merged_steps(self) -> int:
        """Chunks carrying more than k+1 tokens: several engine steps merged into one chunk."""
        return sum(c for n, c in self.histogram.items() if self.k is not None and n > self.k + 1)

    def joint(self) -> list[float | None]:
        """P(draft token j accepted) = share of steps with at least j accepted, j = 1..k."""
        if not self.steps or not self.k:
            return []
        return [sum(c for n, c in self.histogram.items() if n - 1 >= j) / self.steps for j in range(1, self.k + 1)]

    def conditional(self) -> list[float | None]:
        """P(token j accepted | tokens 1..j−1 accepted)."""
        if not self.steps or not self.k:
            return []
        out: list[float | None] = []
        for j in range(1, self.k + 1):
            reached = sum(c for n, c in self.histogram.items() if n - 1 >= j - 1)
            out.append(sum(c for n, c in self.histogram.items() if n - 1 >= j) / reached if reached else None)
        return out

    def acceptance_rate(self) -> float | None:
        if not self.steps or not self.k:
            return None
        return (self.tokens - self.steps) / (self.steps * self.k)


def stream_acceptance(records: Iterable[RequestRecord], k: int | None) -> StreamAcceptance:
    hist: Counter[int] = Counter()
    for rec in records:
        hist.update(decode_steps(rec))
    steps = sum(hist.values())
    return StreamAcceptance(steps=steps, tokens=sum(n * c for n, c in hist.items()), histogram=dict(sorted(hist.items())), k=k)


@dataclass(frozen=True)
class RequestStatsAcceptance:
    """vLLM's per-request ``speculative_decoding_stats`` summed over a cell's requests."""

    mean_acceptance_length: float
    acceptance_rate: float | None
    spec_steps: int
    accepted: int
    drafted: int
    requests: int


def request_stats_acceptance(records: Sequence[RequestRecord]) -> RequestStatsAcceptance | None:
    """Sum vLLM's per-request ``speculative_decoding_stats`` (when the server was asked for them)."""
    stats = [r.spec_stats for r in records if r.ok and isinstance(r.spec_stats, dict)]
    keys = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens")
    stats = [s for s in stats if all(type(s.get(key, 0)) in (int, float) for key in keys)]  # runs stored before the client checked them
    if not stats:
        return None
    steps = sum(s.get("num_spec_steps", 0) for s in stats)
    accepted = sum(s.get("num_accepted_draft_tokens", 0) for s in stats)
    drafted = sum(s.get("num_draft_tokens", 0) for s in stats)
    if not steps:
        return None
    return RequestStatsAcceptance(1 + accepted / steps, accepted / drafted if drafted else None,
                                  steps, accepted, drafted, len(stats))


def stream_summary(records: Sequence[RequestRecord], k: int | None) -> StreamSummary:
    """A cell's acceptance as its stream's chunk sizes show it."""
    sa = stream_acceptance(records, k)
    return StreamSummary(
        stream_steps=sa.steps or None,
        stream_accepted_tokens=(sa.tokens - sa.steps) if sa.steps else None,
        stream_mean_acceptance_length=sa.mean_acceptance_length,
        stream_acceptance_rate=sa.acceptance_rate(),
        stream_acceptance_joint=sa.joint() or None,
        stream_acceptance_conditional=sa.conditional() or None,
        stream_tokens_per_step_histogram={str(n): c for n, c in sa.histogram.items()} or None,
        stream_merged_chunks=sa.merged_steps if sa.k else None,
    )


def agreement(counter_accepted: int | None, stream_accepted: int | None, requests: int) -> Agreement:
    """Compare accepted draft tokens seen by the server's counters and in the stream's chunk sizes.

    Accepted tokens (not acceptance length) are compared because engines such as n-gram skip the
    draft on steps with no match: the counters then see fewer drafts than the stream sees steps.
    Allowed gap: one token per request (max_tokens or EOS can cut a request's last step) plus 5%.
    A larger gap means other traffic in the window, or an engine that merges steps into one chunk.
    """
    if counter_accepted is None or stream_accepted is None:
        return Agreement(None, None)
    diff = stream_accepted - counter_accepted
    return Agreement(diff, abs(diff) <= requests + 0.05 * counter_accepted)
