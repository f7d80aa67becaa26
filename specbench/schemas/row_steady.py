"""The results row's steady-state group: the headline numbers again over the span of each timed pass in which the
load was what the cell names (``measure.steady``), beside the whole pass's.

A closed-loop pass at C=64 starts with a ramp-up and ends with a drain in which fewer and fewer requests run;
speculative decoding wins most at small batches, so the whole-pass speedup leans toward the drain. The steady
window cuts both (docs/measurement.md, "The steady window"): closed loop, from the moment C requests are in flight
to the last moment C were (the first end after the last send), none at C > 1 for a pass of one wave (fewer than C
replacements inside it); open loop, the sends' first and last 10 % cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from .record_values import key
from .row_group import MetricGroup, percentile_ms

__all__ = ["OPEN_LOOP_CUT", "SteadyWindow"]

#: open loop: the share of the pass's sends cut at each end (its ramp-up and its drain)
OPEN_LOOP_CUT = 0.10

_INSIDE = ("per successful request wholly inside the steady window (sent at or after its start, last chunk at or "
           "before its end), pooled over the repeats")


@dataclass
class SteadyWindow(MetricGroup):
    """The steady window of each timed pass and the headline numbers over it (``measure.steady.steady_window``):
    written for every cell, null with ``steady_note`` saying why where a pass has no such window."""

    steady_window_s: float | None = key(
        "the steady window's length, summed over the repeats: closed loop, from the moment the cell's C requests "
        "are in flight (ramp-up cut) to the last moment they were, the first end after the pass's last send (drain "
        "cut; the client's turnaround between one request's end and the next send does not end it); open loop, "
        f"from the send after the first {OPEN_LOOP_CUT:.0%} of sends to the send before the last {OPEN_LOOP_CUT:.0%} "
        "(at least 10 sends)", unit="s", low=0)
    steady_share: float | None = key("steady_window_s ÷ the timed passes' wall time: how much of the pass ran at "
                                     "the cell's load", unit="share", low=0, high=1)
    steady_output_throughput_tps: float | None = key(
        "output tokens whose chunks arrived inside the steady window ÷ its length, the mean over the repeats (as "
        "output_throughput_tps is over whole passes); a chunk's tokens count where it arrived, so requests cut by "
        "the window's ends add the part they streamed inside it", unit="tokens/s", low=0)
    steady_speedup_vs_baseline: float | None = key(
        "steady_output_throughput_tps ÷ the baseline's on the same data set and load point (the whole pass's is "
        "speedup_vs_baseline); no interval", unit="×", low=0)
    steady_requests: int | None = key("successful requests wholly inside the steady window (the latency keys' "
                                      "samples), over the repeats", unit="requests", low=0)
    steady_latency_mean_ms: float | None = key(f"latency {_INSIDE}; their mean", unit="ms", low=0)
    steady_latency_p95_ms: float | None = percentile_ms("steady_latency_mean_ms", 95)
    steady_ttft_mean_ms: float | None = key(f"TTFT {_INSIDE}; their mean", unit="ms", low=0)
    steady_ttft_p95_ms: float | None = percentile_ms("steady_ttft_mean_ms", 95)
    steady_itl_mean_ms: float | None = key(f"ITL per token (as itl_mean_ms) {_INSIDE}; their mean", unit="ms", low=0)
    steady_itl_p95_ms: float | None = percentile_ms("steady_itl_mean_ms", 95)
    steady_tpot_mean_ms: float | None = key(f"TPOT {_INSIDE}; their mean", unit="ms", low=0)
    steady_tpot_p95_ms: float | None = percentile_ms("steady_tpot_mean_ms", 95)
    steady_tokens_per_step: float | None = key(
        "decode tokens ÷ decode chunks that arrived inside the steady window (a request's first, prefill chunk left "
        "out): the stream's tokens per target step over it (the engine's counters cannot be cut to the window)",
        unit="tokens/step", low=1)
    steady_note: str | None = key("why a cell has no steady window (a pass whose requests never filled C "
                                  "slots; one wave: a closed-loop pass at C > 1 with fewer than C requests sent as "
                                  "replacements inside its window; an open-loop pass of fewer than 10 sends), or "
                                  "that at C=1 it is the whole pass")
