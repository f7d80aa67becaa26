"""Stalls named (issue 39): the steps of a timed pass that took far longer than its others, each with the
events that overlapped it (a garbage collection, a compile, a graph capture, a Triton compile or autotune, the
allocator growing, a preemption, the recorder's own flush) or what else explains it (a step many times the
median's size, a step outside the pass's CUDA-graph mode), or ``unknown`` — counted, never hidden.

A step's time is from its start to the next step's start (the runner's clock at ``timing``, the scheduler's wall
clock at ``steps``), so the steps of a pass tile it and the time stalls cost adds up. A **stall** is a step of at
least ``STALL_FACTOR`` × the pass's median or ``STALL_MS``; what it cost is its excess over the median. The median
is that of the pass's decode-only steps (no prefill chunk) where it has at least ``BASIS_MIN`` of them, else of all
its steps (``PassStalls.basis`` says which): with long prompts most steps can carry a chunk, and a median over all
steps is then itself a prefill, which neither the threshold nor the excess would see as slow (the H200 run at 16k
tokens and C=64 put DSpark's stalls at 7 % of the pass and the baseline's at 81 % that way).

Pure functions over typed rows; reading the files is ``run.steplog``'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schemas.row_steplog import StallStats, SteadyWarmup
from ..schemas.steplog import EventRow
from .steplog import Step, step_times

STALL_FACTOR = 5.0  # × the pass's median step
STALL_MS = 50.0  # or this long, whatever the median
SIZE_FACTOR = 5.0  # a step that carried this many times a median decode-only step's tokens may take as much longer
EVENT_SHARE = 0.1  # a timed event explains a stall when it overlapped at least this share of the stall's excess
INSTANT_KINDS = ("alloc_growth", "preemption")  # no duration of their own: they count when they happened in the step
UNKNOWN = "unknown"
BASIS_MIN = 5  # decode-only steps (with a time) a pass needs for their median to be its stalls' basis
DECODE_ONLY = "decode-only"  # the basis: the median of the steps that carried no prefill chunk
ALL_STEPS = "all steps"  # the basis where fewer than BASIS_MIN steps were decode-only


@dataclass(frozen=True)
class Stall:
    """One slow step: when in the pass, how long, by how much over its pass's median (``PassStalls.median_ms``), in
    which part of the step (the longest of forward, lm_head, verify, drafter and the host gap after it, at
    ``timing``), and its causes."""

    step: int
    at_s: float
    ms: float
    excess_ms: float
    where: str | None
    causes: tuple[str, ...]


@dataclass(frozen=True)
class PassStalls:
    """One timed pass's stalls, what they cost (Σ excess ms, and its share of the pass's wall time), that cost by
    cause kind (a stall with two causes counts toward both), the part no cause explains, and the one-time events
    (warm-up left undone) seen anywhere in the pass; ``median_ms`` is the median step the stalls were judged
    against and ``basis`` whose median it is (``DECODE_ONLY`` or, with too few of those, ``ALL_STEPS``)."""

    repeat: int
    server_start: int | None
    stalls: tuple[Stall, ...]
    stall_ms: float
    share: float | None
    causes_ms: dict[str, float]
    unknown_ms: float
    one_time_events: int
    median_ms: float
    basis: str


def _window(step: Step) -> float:
    """A step's start on the wall clock: the runner's (execute_model) where recorded, else the scheduler's."""
    return step.gpu.wall if step.gpu is not None else step.sched.wall


def durations(steps: Sequence[Step]) -> list[float | None]:
    """Each step's time, from its start to the next one's (the last: its own end mark where recorded)."""
    times, _ = step_times(steps)
    out: list[float | None] = list(times[1:]) + [None]
    if steps and steps[-1].gpu is not None:
        out[-1] = steps[-1].gpu.t_end
    return out


def _where(step: Step, ms: float) -> str | None:
    g = step.gpu
    if g is None:
        return None

    def span(a: float | None, b: float | None) -> float:
        return b - a if a is not None and b is not None else 0.0

    parts = {"forward": span(g.t_fwd, g.t_fwd_end), "lm_head": span(g.t_lg0, g.t_lg1),
             "verify": span(g.t_samp, g.t_d0 if g.t_d0 is not None else g.t_end), "drafter": span(g.t_d0, g.t_d1),
             "host gap": ms - g.t_end if g.t_end is not None else 0.0}
    part, longest = max(parts.items(), key=lambda kv: kv[1])
    return part if longest > 0 else None


def _event_causes(events: Sequence[EventRow], step: int, start: float, end: float, excess_ms: float) -> list[str]:
    """The events that overlapped the step (tagged with it, or on the wall clock), one cause per kind, longest
    first: ``gc: generation 2, 12 collected (231 ms)``, or for several ``gc: 3 events, 412 ms (longest: …)``."""
    by_kind: dict[str, list[tuple[float, EventRow]]] = {}
    for e in events:
        e_end = e.wall + e.ms / 1000.0
        overlap = max(0.0, min(end, e_end) - max(start, e.wall)) * 1000.0
        if e.step != step and overlap <= 0 and not (e.kind in INSTANT_KINDS and start <= e.wall <= end):
            continue
        ms = e.ms if e.step == step else overlap
        if e.kind in INSTANT_KINDS or ms >= EVENT_SHARE * excess_ms:
            by_kind.setdefault(e.kind, []).append((ms, e))
    causes = []
    for kind, found in sorted(by_kind.items(), key=lambda kv: -sum(ms for ms, _ in kv[1])):
        ms, longest = max(found, key=lambda f: f[0])
        what = f"{longest.detail}" if longest.detail else ""
        if len(found) == 1:
            causes.append(f"{kind}: {what} ({ms:.0f} ms)" if kind not in INSTANT_KINDS else f"{kind}: {what}".rstrip(": "))
        else:
            total = sum(m for m, _ in found)
            causes.append(f"{kind}: {len(found)} events, {total:.0f} ms (longest: {what}, {ms:.0f} ms)"
                          if kind not in INSTANT_KINDS else f"{kind}: {len(found)} events (first: {what})")
    return causes


def _basis(steps: Sequence[Step], ms: Sequence[float | None]) -> tuple[float, str]:
    """The median step time stalls are judged against, and whose: the decode-only steps' where at least
    ``BASIS_MIN`` have a time, else all steps' (0 where none has one)."""
    decode = [m for s, m in zip(steps, ms) if m is not None and not s.sched.prefill_tokens]
    if len(decode) >= BASIS_MIN:
        return float(np.median(decode)), DECODE_ONLY
    known = [m for m in ms if m is not None]
    return (float(np.median(known)) if known else 0.0), ALL_STEPS


def pass_stalls(steps: Sequence[Step], events: Sequence[EventRow], wall_s: float | None, repeat: int = 0,
                server_start: int | None = None, window: tuple[float, float] | None = None) -> PassStalls:
    """The stalls of one timed pass (``steps`` in step order) and their causes among ``events`` (the launch's),
    judged against its decode-only median step (``_basis``); ``window`` (the pass's two /metrics scrapes) bounds
    the one-time events counted for the pass."""
    ms = durations(steps)
    median, basis = _basis(steps, ms)
    # a prefill is judged against the steps that carry none: where most steps carry a chunk (long prompts at
    # C=16), the median step is itself a prefill and no step would stand out from it
    decode_only = [s.sched.num_tokens for s in steps if not s.sched.prefill_tokens]
    tokens = float(np.median(decode_only or [s.sched.num_tokens for s in steps])) if steps else 0.0
    modes = Counter(s.sched.graph_mode for s in steps if s.sched.graph_mode is not None)
    common = modes.most_common(1)[0][0] if modes else None
    t0 = _window(steps[0]) if steps else 0.0
    stalls = []
    for i, (s, m) in enumerate(zip(steps, ms)):
        if m is None or not (m >= STALL_FACTOR * median or m >= STALL_MS):
            continue
        excess = max(m - median, 0.0)
        start = _window(s)
        end = _window(steps[i + 1]) if i + 1 < len(steps) else start + m / 1000.0
        causes = _event_causes(events, s.sched.step, start, end, excess)
        if s.sched.num_tokens >= SIZE_FACTOR * max(tokens, 1.0):
            what = "prefill" if s.sched.prefill_tokens else "batch"
            causes.append(f"{what}: {s.sched.num_tokens} tokens ({s.sched.num_tokens / max(tokens, 1.0):.0f}× a median step's)")
        if common is not None and s.sched.graph_mode is not None and s.sched.graph_mode != common:
            causes.append(f"graph mode: {s.sched.graph_mode} (the pass ran {common})")
        stalls.append(Stall(s.sched.step, round(start - t0, 3), round(m, 3), round(excess, 3), _where(s, m),
                            tuple(causes) or (UNKNOWN,)))
    by_kind: dict[str, float] = {}
    for st in stalls:
        for kind in dict.fromkeys(c.split(":")[0].split(" (")[0] for c in st.causes):
            by_kind[kind] = by_kind.get(kind, 0.0) + st.excess_ms
    lo, hi = window if window is not None else (t0, _window(steps[-1]) if steps else t0)
    one_time = sum(1 for e in events if e.one_time and lo <= e.wall <= hi)
    total = sum(st.excess_ms for st in stalls)
    return PassStalls(repeat, server_start, tuple(stalls), round(total, 3),
                      round(total / (wall_s * 1000.0), 6) if wall_s else None, by_kind,
                      round(by_kind.get(UNKNOWN, 0.0), 3), one_time, round(median, 3), basis)


TOP = 5  # stalls kept per pass in results.json (the longest)


def stall_stats(passes: Sequence[PassStalls], wall_s: Sequence[float | None]) -> StallStats:
    """The results keys of a cell's stalls: counts and ms summed over its passes, the share of their Σ wall time,
    and per pass its numbers with its longest ``TOP`` stalls."""
    causes: dict[str, float] = {}
    for p in passes:
        for k, v in p.causes_ms.items():
            causes[k] = round(causes.get(k, 0.0) + v, 3)
    total = sum(p.stall_ms for p in passes)
    walls = [w for w in wall_s if w]
    return StallStats(
        steplog_stalls=sum(len(p.stalls) for p in passes),
        steplog_stall_ms=round(total, 3),
        steplog_stall_share=round(total / (sum(walls) * 1000.0), 6) if walls and len(walls) == len(wall_s) else None,
        steplog_stall_causes=causes or None,
        steplog_stall_unknown_ms=round(sum(p.unknown_ms for p in passes), 3),
        steplog_one_time_events=sum(p.one_time_events for p in passes),
        steplog_stall_passes=[{"repeat": p.repeat, "server_start": p.server_start, "stalls": len(p.stalls),
                               "stall_ms": p.stall_ms, "share": p.share, "one_time_events": p.one_time_events,
                               "median_ms": p.median_ms, "basis": p.basis,
                               "longest": [{"step": s.step, "at_s": s.at_s, "ms": s.ms, "excess_ms": s.excess_ms,
                                            "where": s.where, "causes": list(s.causes)}
                                           for s in sorted(p.stalls, key=lambda s: -s.excess_ms)[:TOP]]}
                              for p in passes],
    )


def steady_warmup(seen: Sequence[list[int] | None]) -> SteadyWarmup | None:
    """From each timed pass's ``warmup_one_time`` (one-time events per warm-up pass); None: no steady warm-up ran."""
    runs = [s for s in seen if s is not None]
    if not runs:
        return None
    return SteadyWarmup([len(s) for s in runs], all(bool(s) and s[-1] == 0 for s in runs), [list(s) for s in runs])
