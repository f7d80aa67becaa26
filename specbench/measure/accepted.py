"""The distribution of draft tokens accepted per target step, per cell and per prompt category.

AIPerf shows how accepted tokens spread over steps; specbench's p10/p50/p90 keys summarise per-request lengths
only. Here element a of the list counts the steps (per request) that accepted a draft tokens. Its source: the
step log's commit histogram where the cell ran with one (a request committing j tokens in a step accepted
j − 1: the engine's own steps, each request's prefill step among them as one accepting 0, as
``steplog_tokens_per_step`` counts them), else the stream's decode chunks (a chunk of n tokens = n − 1 accepted, the
first, prefill chunk left out; a chunk that merged steps reads as one step accepting more). Categories come
from the chunks only: the step log knows no prompt.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ..schemas.request import RequestRecord
from ..schemas.row_acceptance import AcceptedPerStep
from .acceptance import decode_steps

SOURCE_STEPLOG = ("step log (steplog_hist: a request committing j tokens in a step accepted j − 1; each request's "
                  "prefill step, which samples its first token, counts as a step accepting 0)")
SOURCE_CHUNKS = ("stream chunk sizes (a decode chunk of n tokens = one step accepting n − 1; the first, prefill chunk "
                 "left out)")


def counts(accepted: Iterable[int]) -> list[int] | None:
    """Steps by accepted tokens, index = accepted; None for no step."""
    seen = Counter(accepted)
    if not seen:
        return None
    return [seen.get(a, 0) for a in range(max(seen) + 1)]


def from_chunks(records: Iterable[RequestRecord]) -> list[int] | None:
    return counts(n - 1 for r in records for n in decode_steps(r))


def accepted_per_step(records: Sequence[RequestRecord], spec: bool) -> AcceptedPerStep:
    """From the stream's chunks: the cell's, and each category's; every key null for a config that does not
    speculate (each of its steps accepts nothing)."""
    if not spec:
        return AcceptedPerStep()
    ok = [r for r in records if r.ok]
    cell = from_chunks(ok)
    cats = {c: v for c in sorted({r.category for r in ok if r.category is not None})
            if (v := from_chunks(r for r in ok if r.category == c)) is not None}
    return AcceptedPerStep(accepted_per_step=cell, accepted_per_step_source=SOURCE_CHUNKS if cell else None,
                           accepted_per_step_categories=cats or None)


def from_steplog(hist: Sequence[int] | None, categories: dict[str, list[int]] | None) -> AcceptedPerStep | None:
    """The step log's commit histogram (``steplog_hist``: hist[j] requests committed j tokens) as accepted per step,
    the chunks' categories kept; None where the log counted no committing step."""
    seen = {j - 1: n for j, n in enumerate(hist or ()) if j >= 1 and n > 0}
    if not seen:
        return None
    accepted = [seen.get(a, 0) for a in range(max(seen) + 1)]
    return AcceptedPerStep(accepted_per_step=accepted, accepted_per_step_source=SOURCE_STEPLOG,
                           accepted_per_step_categories=categories)
