"""Pure assembly of result records: phases and request records → one row per cell.

A cell is config × data set × load point; each repeat of it is a phase with its own wall time and
its own /metrics window. Rows keep every key of the reference results (same meaning) and add
extras that say how each number was obtained.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TypeGuard

import numpy as np

from ..client import SOURCE_USAGE_TOTAL
from ..schemas.acceptance import POSITION, AcceptanceWindow
from ..schemas.cell import Cell
from ..schemas.notes import Note, NoteCode, Notes
from ..schemas.phase import PhaseInfo, by_cell
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from . import acceptance as acc
from .accepted import accepted_per_step
from .arrivals import from_schedule
from .cache import cache_split
from .compare import decomposition, fidelity, mean_ci95, paired_requests, paired_speedup, ratio
from .keepup import client_lag, client_tokens, token_agreement
from .latency import Throughput, latency_stats, shared_reads, throughput, token_sources
from .o200k import O200k, o200k_summary
from .spread import ratio_ci95
from .steady import steady_window

ACCEPTANCE_WINDOW = "from a /metrics snapshot after warm-up to one after the phase's last request"


def _complete(values: Sequence[float | None]) -> TypeGuard[Sequence[float]]:
    """Every repeat has the value: a null is never averaged as if it were a number."""
    return None not in values


@dataclass(frozen=True)
class PooledAcceptance:
    """A cell's acceptance pooled over its repeats' windows, and the line the table carries about it."""

    window: AcceptanceWindow
    note: Note | None = None


def combine_acceptance(windows: Sequence[AcceptanceWindow], k: int | None,
                       completed: Sequence[int] | None = None) -> PooledAcceptance:
    """Pool counter windows of several repeats by summing their raw deltas.

    A window whose counters could not be trusted nulls the cell's acceptance, with its reason.
    ``completed`` (requests that finished, per window) stands in for SGLang's request counter
    when the server has none."""
    errors = [w.acceptance_error for w in windows if w.acceptance_error]
    if errors:
        error = errors[0] if len(windows) == 1 else f"{len(errors)} of {len(windows)} repeats: {errors[0]}"
        return PooledAcceptance(acc.empty_acceptance(k).with_error(error))
    verified = [c for w in windows if (c := w.verify_counts()) is not None]
    if windows and len(verified) == len(windows):
        return _combine_verify_steps(windows, verified, k, completed)
    measured = [(w, d) for w in windows if (d := w.draft_counts()) is not None]
    if not measured:
        sources = [w.acceptance_source for w in windows if w.mean_acceptance_length is not None]
        if len(windows) == 1 and windows[0].mean_acceptance_length is not None:
            return PooledAcceptance(windows[0])  # engines without draft counters (SGLang length only)
        if not sources:
            return PooledAcceptance(acc.empty_acceptance(k))
        lengths = [w.mean_acceptance_length for w in windows if w.mean_acceptance_length is not None]
        rates = [w.acceptance_rate for w in windows if w.mean_acceptance_length is not None]
        return PooledAcceptance(replace(acc.empty_acceptance(k, "acceptance_source"),
                                        mean_acceptance_length=float(np.mean(lengths)),
                                        acceptance_rate=float(np.mean(rates)) if _complete(rates) else None,
                                        acceptance_source=f"{sources[0]} (mean of {len(lengths)} repeats)"))
    drafts = sum(c[0] for _, c in measured)
    tokens = sum(c[1] for _, c in measured)
    accepted = sum(c[2] for _, c in measured)
    out = replace(acc.empty_acceptance(k, "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens", "acceptance_source"),
                  spec_drafts=drafts, spec_draft_tokens=tokens, spec_accepted_tokens=accepted,
                  acceptance_rate=accepted / tokens, mean_acceptance_length=1 + accepted / drafts,
                  acceptance_source=measured[0][0].acceptance_source)
    npos = max(len(w.acceptance_per_position or ()) for w, _ in measured)
    if npos:
        per: list[float | None] = []
        for i in range(npos):
            parts = [((w.acceptance_per_position or (0.0,) * npos)[i], c[0]) for w, c in measured]
            # a position stored as null (a NaN counter) stays null: never pooled as 0
            known = [(p, n) for p, n in parts if p is not None]
            per.append(None if len(known) < len(parts) else sum(p * n for p, n in known) / drafts)
        out = acc.with_positions(out, per)
    return PooledAcceptance(out)


def _combine_verify_steps(windows: Sequence[AcceptanceWindow], verified: Sequence[tuple[int, int]], k: int | None,
                          completed: Sequence[int] | None) -> PooledAcceptance:
    """SGLang counter windows: Σ(generation tokens − finished requests) ÷ Σ verify calls."""
    counted = [w.sglang_finished_requests for w in windows]
    if None in counted and completed is None:
        return PooledAcceptance(acc.empty_acceptance(k))
    requests = [n if n is not None else completed[i] for i, n in enumerate(counted)]  # type: ignore[index]  # not None: returned above
    tokens, steps = sum(t for t, _ in verified), sum(s for _, s in verified)
    out = acc.verify_step_acceptance(acc.empty_acceptance(k, "sglang_generation_tokens", "sglang_verify_calls",
                                                          "sglang_finished_requests", "acceptance_source"),
                                     tokens, steps, sum(requests), k)
    source: str | None
    if None in counted:
        source = ("(Δsglang:generation_tokens_total − the phase's completed requests) ÷ "
                  "Δsglang:spec_verify_calls_total over the measured phase (the server has no "
                  "sglang:num_requests_total): one prefill token per finished request is not a verify step")
    else:
        source = windows[0].acceptance_source
    out = replace(out, sglang_generation_tokens=tokens, sglang_verify_calls=steps, sglang_finished_requests=sum(requests),
                  acceptance_source=source)
    return PooledAcceptance(out, note=Note.of(NoteCode.ACCEPTANCE_SOURCE, source=source))


def _errors(records: Sequence[RequestRecord]) -> dict[str, int]:
    return dict(Counter(_reason(r.error) for r in records if r.error))


def _reason(error: str) -> str:
    return error.split(":")[0][:80]


@dataclass(frozen=True)
class CategoryStats:
    """One prompt category's numbers within a cell (the row's ``categories``)."""

    requests: int
    output_tokens: int
    tpot_mean_ms: float | None
    latency_mean_ms: float | None
    stream_mean_acceptance_length: float | None
    stream_acceptance_rate: float | None
    stream_acceptance_joint: list[float | None] | None
    stream_acceptance_conditional: list[float | None] | None


def category_breakdown(records: Sequence[RequestRecord], k: int | None) -> dict[str, CategoryStats] | None:
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.category is not None:
            by[r.category].append(r)
    if not by:
        return None
    out = {}
    for cat, recs in sorted(by.items()):
        ok = [r for r in recs if r.ok]
        sa = acc.stream_acceptance(ok, k)
        lat = latency_stats(ok)
        out[cat] = CategoryStats(
            requests=len(ok), output_tokens=sum(r.output_tokens or 0 for r in ok), tpot_mean_ms=lat.tpot_mean_ms,
            latency_mean_ms=lat.latency_mean_ms, stream_mean_acceptance_length=sa.mean_acceptance_length,
            stream_acceptance_rate=sa.acceptance_rate(), stream_acceptance_joint=sa.joint() or None,
            stream_acceptance_conditional=sa.conditional() or None)
    return out


def summarize_cell(phases: Sequence[PhaseInfo], records: Sequence[RequestRecord], *, method: str,
                   k: int | None, failure_threshold: float = 0.5) -> ResultRow:
    """One results row from a cell's phases (repeats) and their measured request records."""
    first = phases[0]
    measured = [r for r in records if r.phase == "measure"]
    row = ResultRow.start(first.dataset, first.config)
    row.method, row.num_speculative_tokens = method, k
    walls = [p.wall_s for p in phases]
    tp_per_repeat = []
    for p in phases:
        reps = [r for r in measured if r.repeat == p.repeat]
        tp_per_repeat.append(throughput(reps, p.wall_s))
    total = throughput(measured, sum(walls))
    row.requests, row.output_tokens = total.requests, total.output_tokens
    rps = [t.request_throughput_rps for t in tp_per_repeat]
    tps = [t.output_throughput_tps for t in tp_per_repeat]
    row.request_throughput_rps = float(np.mean(rps)) if _complete(rps) and rps else None
    row.output_throughput_tps = float(np.mean(tps)) if _complete(tps) and tps else None
    row.speedup_vs_baseline = None
    row.add(latency_stats(measured))
    row.add(shared_reads(measured))
    completed = [sum(1 for r in measured if r.repeat == p.repeat and (r.ok or r.finish_reason)) for p in phases]
    pooled = combine_acceptance([p.acceptance for p in phases], k, completed)
    window = pooled.window
    row.acceptance_rate = window.acceptance_rate
    row.acceptance_pos_1, row.acceptance_pos_2, row.acceptance_pos_3 = (window.position(i) for i in (1, 2, 3))
    row.mean_acceptance_length = window.mean_acceptance_length
    _extras(row, phases, window, total)
    row.add(acc.stream_summary(measured, k))
    row.add(acc.agreement(row.spec_accepted_tokens, row.stream_accepted_tokens, row.requests or 0))
    row.draft_step_share = row.spec_drafts / row.stream_steps if row.spec_drafts and row.stream_steps else None
    req_stats = acc.request_stats_acceptance(measured)
    row.request_stats_mean_acceptance_length = req_stats.mean_acceptance_length if req_stats else None
    _status(row, phases, measured, failure_threshold)
    row.token_count_source = token_sources(measured) or None
    row.token_count_warnings = dict(Counter(_reason(r.token_warning) for r in measured if r.ok and r.token_warning)) or None
    estimated = sum(1 for r in measured if r.ok and r.token_source == SOURCE_USAGE_TOTAL)
    row.itl_percentiles_estimated = bool(estimated)
    row.notes = _cell_notes(row, pooled.note, estimated, spec=k is not None or method != "baseline") or None
    row.output_throughput_tps_repeats = tps if len(phases) > 1 else None
    categories = category_breakdown(measured, k)
    row.categories = {cat: asdict(stats) for cat, stats in categories.items()} if categories else None
    server = first.server or {}
    row.engine, row.server_version, row.server_url = server.get("engine"), server.get("version"), server.get("url")
    std, ci = {}, {}
    if len(phases) > 1:
        mc = mean_ci95(tps)
        if mc:
            std["output_throughput_tps"] = float(np.std([t for t in tps if t is not None], ddof=1))
            ci["output_throughput_tps"] = [mc[1], mc[2]]
    row.std = std or None
    row.ci95 = ci or None
    agreement = token_agreement([p.generation for p in phases],
                                [client_tokens([r for r in measured if r.repeat == p.repeat]) for p in phases])
    if agreement is not None:
        row.add(agreement)
    lag = client_lag(measured)
    if lag is not None:
        row.add(lag)
    scheduled = from_schedule(measured)
    if scheduled is not None:
        row.add(scheduled)
    steady = steady_window(phases, measured)
    row.add(steady)
    if steady.steady_note:  # why there is no window, or that at C=1 it is the pass: a line under the tables
        row.notes = [*(row.notes or []), steady.steady_note]
    spec = k is not None or method != "baseline"
    cache = cache_split(phases, measured, spec)
    if cache is not None:
        row.add(cache)
    row.add(accepted_per_step(measured, spec))
    return row


def _extras(row: ResultRow, phases: Sequence[PhaseInfo], acceptance: AcceptanceWindow, total: Throughput) -> None:
    """How each number was obtained: the load point, repeats, time, and where acceptance came from."""
    first = phases[0]
    row.concurrency = first.concurrency if first.request_rate is None else None
    row.request_rate = first.request_rate
    if first.request_rate is not None:
        row.max_concurrency = first.concurrency or None
    row.repeats = len(phases)
    row.duration_s = sum(p.wall_s for p in phases)
    row.prompt_tokens = total.prompt_tokens
    for i in range(1, len(acceptance.positions) + 1):
        if not row.has(f"{POSITION}{i}"):
            row.set(f"{POSITION}{i}", acceptance.position(i))
    per = acceptance.acceptance_per_position
    row.acceptance_per_position = None if per is None else list(per)
    row.acceptance_source = acceptance.acceptance_source
    row.acceptance_window = ACCEPTANCE_WINDOW if acceptance.acceptance_source else None
    row.acceptance_error = acceptance.acceptance_error
    row.spec_drafts = acceptance.spec_drafts
    row.spec_draft_tokens = acceptance.spec_draft_tokens
    row.spec_accepted_tokens = acceptance.spec_accepted_tokens


def _status(row: ResultRow, phases: Sequence[PhaseInfo], measured: Sequence[RequestRecord], failure_threshold: float) -> None:
    failed = [r for r in measured if not r.ok]
    row.failed_requests = len(failed)
    row.errors = _errors(failed) or None
    attempted = len(measured)
    row.status = "failed" if attempted == 0 or len(failed) / attempted > failure_threshold else "ok"
    if any(p.interrupted for p in phases):
        row.status = "interrupted"
    if any(p.server_died for p in phases):
        row.status = "failed"
        row.server_died = True


def _cell_notes(row: ResultRow, acceptance_note: Note | None, estimated: int, spec: bool) -> Notes:
    """What the table must say for this cell (the report words it under the tables: ``report/notes.py``)."""
    notes: Notes = []
    if spec and row.acceptance_error:
        notes.append(Note.of(NoteCode.ACCEPTANCE_NOT_MEASURED, error=row.acceptance_error))
    if acceptance_note:
        notes.append(acceptance_note)
    for reason, n in (row.token_count_warnings or {}).items():
        notes.append(Note.of(NoteCode.TOKEN_COUNTS_DOUBTED, requests=n, reason=reason))
    if estimated:
        notes.append(Note.of(NoteCode.ITL_ESTIMATED, estimated=estimated, requests=row.requests))
    return notes


def add_comparisons(rows: list[ResultRow], records: Sequence[RequestRecord], baseline: str | None) -> None:
    """Fill speedup_vs_baseline (+ per-repeat CI), paired speedup with bootstrap CI, and fidelity."""
    if baseline is None:
        return
    by_cell: dict[Cell, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.phase == "measure":
            by_cell[Cell.of_record(r)].append(r)
    base_rows = {Cell.of_row(r): r for r in rows if r.run == baseline}
    for row in rows:
        cell = Cell.of_row(row)
        base = base_rows.get(cell.with_config(baseline))
        if base is None:
            continue
        row.speedup_vs_baseline = ratio(row.output_throughput_tps, base.output_throughput_tps)
        if row.has("steady_output_throughput_tps"):
            row.steady_speedup_vs_baseline = ratio(row.steady_output_throughput_tps, base.steady_output_throughput_tps)
        pairs = paired_requests(by_cell[cell], by_cell[cell.with_config(baseline)])
        row.add(paired_speedup(pairs))
        if row.run != baseline:
            row.add(fidelity(pairs))
        row.add(decomposition(row, base, pairs))
        row.speedup_ci_method = None
        row.ci95 = _speedup_ci(row, base) if row.run != baseline else (row.ci95 or None)


def _speedup_ci(row: ResultRow, base: ResultRow) -> dict[str, list[float | None]] | None:
    """The row's ci95 with the speed-up's intervals added; sets ``speedup_ci_method``."""
    ci = dict(row.ci95 or {})
    reps_c, reps_b = row.output_throughput_tps_repeats, base.output_throughput_tps_repeats
    if row.paired_speedup_ci_low is not None:
        ci["paired_speedup"] = [row.paired_speedup_ci_low, row.paired_speedup_ci_high]
    mc = ratio_ci95([ratio(a, b) for a, b in zip(reps_c, reps_b)]) if reps_c and reps_b and len(reps_c) == len(reps_b) else None
    if mc and reps_c:
        ci["speedup_vs_baseline"] = [mc[1], mc[2]]
        row.speedup_ci_method = f"Student-t on the log scale over {len(reps_c)} paired repeats"
    elif (row.paired_speedup_ci_low is not None and row.paired_speedup_ci_high is not None
          and row.speedup_vs_baseline and row.paired_speedup):
        # Closed loop keeps every slot busy, so wall time ∝ Σ latency and the throughput ratio
        # equals the paired Σtok/Σlatency ratio up to a factor resampling prompts leaves alone:
        # scale the bootstrap interval of the paired ratio onto the throughput ratio.
        scale = row.speedup_vs_baseline / row.paired_speedup
        ci["speedup_vs_baseline"] = [row.paired_speedup_ci_low * scale, row.paired_speedup_ci_high * scale]
        row.speedup_ci_method = f"bootstrap over {row.paired_prompts} paired prompts (2000 resamples)"
    if row.speedup_decomposed_ci_low is not None:
        ci["speedup_decomposed"] = [row.speedup_decomposed_ci_low, row.speedup_decomposed_ci_high]
    return ci or None


def add_o200k(rows: list[ResultRow], phases: Sequence[PhaseInfo], records: Sequence[RequestRecord], o200k: O200k) -> None:
    """Each row's o200k_base lengths (``o200k.o200k_summary``)."""
    measured_by, walls = by_cell(phases, records)
    for row in rows:
        cell = Cell.of_row(row)
        measured = measured_by[cell]
        repeats = [([r for r in measured if r.repeat == p.repeat], p.wall_s) for p in walls[cell]]
        row.add(o200k_summary(measured, repeats, o200k))
