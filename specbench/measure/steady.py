"""The steady window of a timed pass: the span in which the load was what the cell names, and the headline
numbers over it.

Closed loop at C: in flight = sent and not ended (a request ends at ``end_time``, else its last chunk). The
window opens the first moment C requests are in flight (ramp-up cut) and closes the last moment C were: the
first end after the pass's last send, from which on no request replaces one that ends (drain cut). Between
them the count dips below C only for the client's turnaround from one request's end to the next send, which
does not close it. At C=1 the window is the whole pass (a note says so); a pass whose requests never filled C
slots (fewer prompts than C) has none, nor has a pass at C > 1 with fewer than C replacements inside its window
(one wave, C prompts at C: none), for the span is then the first wave's front, not a steady load
(``closed_window`` says why). Open loop: the sends' first and last ``OPEN_LOOP_CUT`` are cut (the window runs
from the send after the first 10 % to the send before the last 10 %), for a pass of at least 10 sends; the
in-flight count of an open loop is the server's to set, so no count is asked of it.

Over the window: output tokens whose chunks arrived inside it ÷ its length (a request cut by an end adds the
part it streamed inside); latency, TTFT, ITL and TPOT over the successful requests wholly inside it (sent at
or after its start, last chunk at or before its end); tokens per step over the decode chunks inside it.
Throughput is the mean over repeats, as the whole pass's; the latencies pool the repeats' requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schemas.phase import PhaseInfo
from ..schemas.request import RequestRecord
from ..schemas.row_steady import OPEN_LOOP_CUT, SteadyWindow
from .acceptance import decode_steps
from .latency import chunk_token_counts, latency_stats

MIN_OPEN_SENDS = 10


@dataclass(frozen=True)
class Window:
    """One pass's steady window on the records' clock (``send_time``'s), or why it has none."""

    start: float | None = None
    end: float | None = None
    why_none: str | None = None

    @property
    def length(self) -> float:
        return (self.end or 0.0) - (self.start or 0.0)


def ended(rec: RequestRecord) -> float:
    """When a request stopped being in flight: the end of its stream, else its last chunk, else its send."""
    if rec.end_time is not None:
        return rec.end_time
    return rec.chunk_times[-1] if rec.chunk_times else rec.send_time


def closed_window(records: Sequence[RequestRecord], concurrency: int) -> Window:
    """A closed-loop pass's window: from the first moment ``concurrency`` requests are in flight to the last.

    At C > 1 it also needs C replacements inside it (sends after it opened, each into a slot an end freed): one
    wave (C prompts at C) has none, and its window, from the wave's last send to its first end, is the wave's
    prefill and first tokens (the H200's 16k/32k-token prompts at C=16 read a 0.62–0.78× steady speedup there
    against 1.04–1.07× over the pass, docs/gpu.md §9). With r < C replacements the window closes at its (r + 1)-th
    end, while (requests of like length) part of the first wave still decodes, so it leans to that wave's prefill;
    with C it holds at least C + 1 ends, the whole first wave's life and the next wave's start, prefill and decode in the
    pass's own proportions. Counted inside the window rather than as 2×C requests in the pass: a send made before
    C were in flight (a request that failed at once, replaced) refills no slot of the window. At C=1 there is no
    batch for a wave to crowd, and the window is the whole pass.
    """
    if concurrency <= 0:
        return Window(why_none="no concurrency recorded for the pass")
    if len(records) < concurrency:
        return Window(why_none=f"{len(records)} requests per pass < C={concurrency}: in flight never reached C")
    # at one instant an end goes before a send: a replacement sent as its lane frees does not count twice
    events = sorted([(r.send_time, 1) for r in records] + [(ended(r), -1) for r in records], key=lambda e: (e[0], e[1]))
    inflight, start, end, sent, replaced = 0, None, None, 0, 0
    for t, step in events:
        if step < 0 and inflight == concurrency:
            end, replaced = t, sent  # the sends made inside the window so far
        elif step > 0 and start is not None:
            sent += 1
        inflight += step
        if inflight == concurrency and start is None:
            start = t
    if start is None or end is None or end <= start:
        return Window(why_none=f"in flight never held C={concurrency} for any time")
    if concurrency > 1 and replaced < concurrency:
        return Window(why_none=_one_wave(len(records), concurrency, replaced))
    return Window(start, end)


def _one_wave(requests: int, concurrency: int, replaced: int) -> str:
    """Why a closed-loop pass at C > 1 with fewer than C replacements inside its window has no steady state."""
    if replaced == 0 and requests == concurrency:
        return (f"one wave: {requests} requests at C={concurrency}; no request was sent as a replacement, so there is "
                "no steady state")
    return (f"{requests} requests at C={concurrency}, {replaced} sent as replacements inside the window: fewer than "
            "one wave (C), so the window is the first wave's, not a steady state")


def open_window(records: Sequence[RequestRecord]) -> Window:
    """An open-loop pass's window: its sends' first and last ``OPEN_LOOP_CUT`` cut."""
    sends = sorted(r.send_time for r in records)
    if len(sends) < MIN_OPEN_SENDS:
        return Window(why_none=f"{len(sends)} sends per pass < {MIN_OPEN_SENDS}: no {OPEN_LOOP_CUT:.0%} to cut at each end")
    cut = math.floor(len(sends) * OPEN_LOOP_CUT)
    start, end = sends[cut], sends[len(sends) - 1 - cut]
    return Window(start, end) if end > start else Window(why_none="the pass's middle sends all left at one instant")


def window_tokens(records: Sequence[RequestRecord], w: Window) -> tuple[float, int, float]:
    """(output tokens, decode chunks, decode tokens) of the successful requests' chunks that arrived inside ``w``."""
    assert w.start is not None and w.end is not None
    tokens, chunks, decode = 0.0, 0, 0.0
    for r in records:
        if not r.ok:
            continue
        counts = chunk_token_counts(r)
        times = np.asarray(r.chunk_times)
        inside = (times >= w.start) & (times <= w.end)
        tokens += float(counts[inside].sum())
        steps = decode_steps(r)
        if steps:  # per-chunk counts known: the decode chunks (the first is prefill) that carried tokens
            decode_inside = [n for t, n in zip(r.chunk_times[1:], r.chunk_tokens[1:]) if n > 0 and w.start <= t <= w.end]
            chunks += len(decode_inside)
            decode += sum(decode_inside)
    return tokens, chunks, decode


def inside(records: Sequence[RequestRecord], w: Window) -> list[RequestRecord]:
    """The successful requests wholly inside ``w``: sent at or after its start, last chunk at or before its end."""
    assert w.start is not None and w.end is not None
    return [r for r in records if r.ok and r.send_time >= w.start and r.chunk_times[-1] <= w.end]


def pass_window(phase: PhaseInfo, records: Sequence[RequestRecord]) -> Window:
    if phase.request_rate is not None:
        return open_window(records)
    return closed_window(records, phase.concurrency)


def steady_window(phases: Sequence[PhaseInfo], records: Sequence[RequestRecord]) -> SteadyWindow:
    """The cell's steady-window group from its phases (repeats) and measured records; every key null, with
    ``steady_note`` saying why, where a repeat has no window."""
    windows, rates, samples = [], [], []
    chunks, decode = 0, 0.0
    for p in phases:
        reps = [r for r in records if r.repeat == p.repeat]
        w = pass_window(p, reps)
        if w.why_none is not None:
            where = f"repeat {p.repeat}: " if len(phases) > 1 else ""
            return SteadyWindow(steady_note=f"no steady window: {where}{w.why_none}")
        tokens, c, d = window_tokens(reps, w)
        windows.append(w.length)
        rates.append(tokens / w.length)
        samples += inside(reps, w)
        chunks, decode = chunks + c, decode + d
    if not windows:
        return SteadyWindow(steady_note="no steady window: no timed pass")
    wall = sum(p.wall_s for p in phases)
    lat = latency_stats(samples)
    one = all(p.request_rate is None and p.concurrency == 1 for p in phases)
    return SteadyWindow(
        steady_window_s=sum(windows), steady_share=min(1.0, sum(windows) / wall) if wall > 0 else None,
        steady_output_throughput_tps=float(np.mean(rates)), steady_requests=len(samples),
        steady_latency_mean_ms=lat.latency_mean_ms, steady_latency_p95_ms=lat.latency_p95_ms,
        steady_ttft_mean_ms=lat.ttft_mean_ms, steady_ttft_p95_ms=lat.ttft_p95_ms,
        steady_itl_mean_ms=lat.itl_mean_ms, steady_itl_p95_ms=lat.itl_p95_ms,
        steady_tpot_mean_ms=lat.tpot_mean_ms, steady_tpot_p95_ms=lat.tpot_p95_ms,
        steady_tokens_per_step=decode / chunks if chunks else None,
        steady_note="C=1: the steady window is the whole pass" if one else None)
