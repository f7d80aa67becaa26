"""Every sentence under the tables, worded here only: the stored notes (``schemas/notes.py``: a code and its values,
in a results row's ``notes`` and meta.json's ``notes`` / ``run_dir_notes``) through ``WORDING``, one entry per code,
and the warnings the report reads off a row's own fields (disagreeing sources, stalls, a client behind its
schedule, failed cells). A note an earlier specbench stored as its sentence is printed as given.

``tests/unit/report/test_notes.py`` fails on a code without wording and on wording without a code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..grade import DIFF_METHOD
from ..schemas.cell import Cell
from ..schemas.meta import RunMeta
from ..schemas.notes import Note, NoteCode
from ..schemas.row import ResultRow
from ..schemas.row_latency import BEHIND_LIMIT_MS, LAG_LIMIT_MS
from ..util.numbers import is_number
from .colspec import num

__all__ = ["STALL_NOTE_SHARE", "WORDING", "cell_notes", "lines", "schedule_warnings", "sentence", "stall_warnings",
           "warnings"]

Values = Mapping[str, Any]
WARN = "⚠ "


def _repeats_on(fresh: bool) -> str:
    return "server starts" if fresh else "passes on one server"


def _repeats_target(v: Values) -> str:
    half = v.get("half_width")
    got = "unknown" if half is None else f"{'met' if half <= v['target'] else 'not met'} (±{half:.1%})"
    return f"{v['repeats']} repeats on {_repeats_on(v['fresh'])}; target ±{v['target']:.1%}: {got}"


def _merged(v: Values) -> str:
    found = []
    if v.get("merged_chunks"):
        found.append(f"{v['merged_chunks']} chunks carried more than k+1 tokens")
    if v.get("fewer_steps") is not None and v.get("steps"):
        found.append(f"the stream saw at least {v['fewer_steps']:g} fewer steps than the server's counters imply "
                     f"({100 * v['fewer_steps'] / v['steps']:.1f} % of its {v['steps']} steps)")
    return ("Req accept len: from chunk sizes while the engine merged steps into one chunk: " + "; ".join(found)
            + "; a merged chunk counts as one step, so these lengths are too high")


def _dummy(v: Values) -> str:
    which = "every config" if v["every"] else ", ".join(v["configs"])
    return (f"dummy weights ({which}: load_format dummy, the target's weights at random from its config.json): speed "
            "is the model shape's; acceptance is set (synthetic) or meaningless, not measured; same output and accuracy "
            "do not apply (—).")


def _itl(v: Values) -> str:
    clocks = v.get("clocks") or []
    return ("ITL is per token (a chunk of n tokens after a gap g gives n samples of g/n); TPOT = (latency − TTFT)/(output "
            "tokens − 1)." + (f" Chunk times: {' / '.join(clocks)}; TTFT counts from just before the request is written "
                              "to the socket." if clocks else ""))


def _sampling(v: Values) -> str:
    warmup = "a full matching pass" if v["warmup"] == "pass" else f"{v['warmup']} request(s)"
    return (f"temperature {v['temperature']:g}, max_tokens {v['max_tokens']}, warm-up {warmup} before each timed "
            "pass.")


def _gamma(v: Values) -> str:
    b = v["burstiness"]
    than = "burstier than" if b < 1 else "more even than" if b > 1 else "as"
    return f"Arrivals: gamma gaps, burstiness {b:g} ({than} Poisson at the same mean rate; load.seed + the repeat number)"


def _ramp(v: Values) -> str:
    duration = v.get("duration_s")
    over = f"over {duration:g} s, then {v['end']:g}" if duration else "over each pass's requests"
    bursty = f", burstiness {v['burstiness']:g}" if v["burstiness"] != 1 else ""
    return (f"Arrivals: {v['shape']} ramp from {v['start']:g} to {v['end']:g} req/s {over}{bursty} (load.seed + the "
            "repeat number); a cell's Rate/s is the ramp's end rate")


def _trace(v: Values) -> str:
    return (f"Arrivals: trace {v['file']} ({v['format']}, {v['requests']} requests over {v['span_s']:g} s, time scale "
            f"{v['time_scale']:g}); a cell's Rate/s is the trace's mean rate")


def _slo(v: Values) -> str:
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}
    bounds = ", ".join(f"{name} ≤ {v[k]:g} ms" for k, name in names.items() if v.get(k) is not None)
    return (f"SLO: {bounds}; SLO met = share of requests (failed ones count as misses) within every bound; goodput = "
            "those per second of the timed pass.")


def _quarantined(v: Values) -> str:
    shown = ", ".join(f"line {n} ({why})" for n, why in zip(v["line_numbers"], v["reasons"]))
    return (f"{v['file']}: {v['lines']} unreadable line(s) moved to {v['target']}: {shown}"
            + (" …" if v["lines"] > len(v["line_numbers"]) else ""))


def _steplog(v: Values) -> str:
    return (f"step log {v['folder']} of config {v['config']} was not copied back from Ray node "
            f"{v['host']}: {v['why']}" + (f"; it stays there: {v['stays']}" if v.get("stays") else ""))


def _server_batch(v: Values) -> str:
    kv = f", KV cache peak {v['kv_peak']:.0%}" if v.get("kv_peak") is not None else ""
    return (f"the server ran a median {v['running_p50']:g} (max {v['running_max']}) of the {v['concurrency']} requests "
            f"in flight at once; requests waited on {v['waiting_share']:.0%} of steps{kv} — the batch was the server's, "
            f"not C={v['concurrency']}, and TTFT includes the wait")


#: each code's sentence from its values (the ⚠ of a warning is ``sentence``'s)
WORDING: dict[NoteCode, Callable[[Values], str]] = {
    NoteCode.ACCEPTANCE_NOT_MEASURED: lambda v: f"acceptance not measured: {v['error']}",
    NoteCode.ACCEPTANCE_SOURCE: lambda v: f"acceptance = {v['source']}",
    NoteCode.TOKEN_COUNTS_DOUBTED: lambda v: (
        f"{v['requests']} request{'s' if v['requests'] > 1 else ''}: {v['reason']} (requests.jsonl token_warning and "
        "token_count_source say which count was used)"),
    NoteCode.ITL_ESTIMATED: lambda v: (
        f"ITL percentiles are estimates: {v['estimated']} of {v.get('requests')} requests had only a final usage total, "
        "spread over their decode chunks (TTFT, latency, TPOT and the ITL mean are exact)"),
    NoteCode.SPEEDUP_VARIES: lambda v: (
        f"speedup varies between {'servers' if v['fresh'] else 'passes'}: {v['low']:.2f}–{v['high']:.2f}× (Cochran's Q "
        f"over {v['repeats']} {_repeats_on(v['fresh'])}, p = {v['p']:.2g}); the CI is the between-repeat t-interval"),
    NoteCode.REPEATS_TARGET: _repeats_target,
    NoteCode.REQUEST_LENGTHS_MERGED: _merged,
    NoteCode.GRADED_TRUNCATED: lambda v: (
        f"{v['answers']} graded answers were cut by max_tokens (graded as they are; usually wrong)"),
    NoteCode.SYNTHETIC_ACCEPTANCE: lambda v: (
        "synthetic acceptance: drafts are committed whether or not they match the target's tokens, so Same output and "
        "accuracy do not apply (—)"),
    NoteCode.DUMMY_WEIGHTS: _dummy,
    NoteCode.DUMMY_WEIGHTS_EOS: lambda v: (
        "dummy weights without load.ignore_eos: a random model stops at a random end-of-sequence token, so output "
        "lengths (and tok/s) follow chance; set ignore_eos: true."),
    NoteCode.SPEEDUP_DEFINED: lambda v: (
        "Speedup = output tok/s of the run ÷ baseline's on the same data set and load point; its 95% CI is "
        "bootstrapped over paired prompts, or Student-t on log speedups over repeats (speedup_ci_method in "
        "results.json)."),
    NoteCode.ITL_DEFINED: _itl,
    NoteCode.ACCEPTANCE_DEFINED: lambda v: (
        "Acceptance: deltas of the engine's spec-decode counters over each measured phase (see acceptance_source in "
        "results.json); — = not measured."),
    NoteCode.SAMPLING: _sampling,
    NoteCode.ARRIVALS_GAMMA: _gamma,
    NoteCode.ARRIVALS_RAMP: _ramp,
    NoteCode.ARRIVALS_TRACE: _trace,
    NoteCode.SLO_DEFINED: _slo,
    NoteCode.RATE_SEARCH_DEFINED: lambda v: (
        f"Max rate @SLO: highest Poisson rate (no cap in flight, the cell's prompts) whose p{v['percentile']:g} of each "
        f"bounded metric met the SLO (at least {v['percentile']:g}% of requests within it), doubling then bisecting, at "
        f"most {v['max_steps']} probes, shown with the lowest rate that failed; capacity speedup = its ratio to the "
        "baseline's, with the range the two brackets allow."),
    NoteCode.ACCURACY_DEFINED: lambda v: (
        f"Accuracy ({', '.join(v['datasets'])}): correct ÷ graded first-turn answers; Δ vs baseline on the prompts both "
        f"answered: {DIFF_METHOD}."),
    NoteCode.MBPP_PLAIN: lambda v: (
        "mbpp with recipe plain: the prompt does not name the function the tests call; use recipe: with_tests for "
        "pass@1."),
    NoteCode.COST_DEFINED: lambda v: (
        f"$/M tok = {v['gpu_hour_usd']:g} USD per GPU-hour × GPUs per server ÷ (output tok/s × 3600) × 10⁶."),
    NoteCode.CONFIG_FAILED: lambda v: f"config {v['config']} failed: {v['error']}",
    NoteCode.PHASE_REMEASURED: lambda v: (
        f"{v['cell']} (repeat {v['repeat']}): {v['unreadable']} of its {v['requests']} measured request records are "
        "unreadable; measured again"),
    NoteCode.LINES_QUARANTINED: _quarantined,
    NoteCode.READ_REPAIRED: lambda v: str(v["said"]),
    NoteCode.PROMPTS_UNCHECKED: lambda v: (
        "resumed without checking the prompts: this run's meta.json, written by an earlier specbench, holds no prompt "
        "hashes, so a prompt file edited since the run began cannot be told apart"),
    NoteCode.STEPLOG_NOT_COPIED: _steplog,
    NoteCode.SERVER_BATCH: _server_batch,
    NoteCode.PREFIX_CACHE_RESET: lambda v: (
        "prefix cache emptied after each warm-up, right before each timed pass (load.prefix_cache reset; per pass: "
        "phases.jsonl prefix_cache_reset): no prompt is served from a cache an earlier pass or the warm-up filled, only "
        "what a pass shares within itself (a shared prefix, a conversation's earlier turns)."),
    NoteCode.RESENT_PROMPTS: lambda v: (
        f"{v['resent']} of the {v['requests']} timed requests re-sent a prompt an earlier pass or warm-up on the same "
        f"server start had sent, and the server served {v['cached_share']:.0%} of their prompt tokens from its prefix "
        "cache (load.prefix_cache keep): their TTFT is a cached prompt's; load.prefix_cache: reset for cold prompts"),
}


def sentence(note: Note | str) -> str:
    """A note's sentence, ``⚠ `` first for a warning; a stored sentence as given. A note this version cannot word
    (a newer code, values not its code's) is its code and values: read from a file, never trusted to fit."""
    if isinstance(note, str):
        return note
    kind = note.kind
    if kind is not None:
        try:
            return (WARN if kind.warning else "") + WORDING[NoteCode(str(note.code))](note.values or {})
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            pass
    return f"{note.code or 'note'}: {json.dumps(note.values or {}, ensure_ascii=False)}"


def lines(rows: Sequence[ResultRow], meta: RunMeta | None) -> list[str]:
    """Everything under the tables, in order: the run's notes (meta.json), then each row's warnings and notes."""
    return [sentence(n) for n in (meta.notes if meta else None) or []] + warnings(rows)


def warnings(rows: Sequence[ResultRow]) -> list[str]:
    """Lines that must travel with the table: disagreeing sources, failed or cut cells."""
    out = []
    for r in rows:
        where = str(Cell.of_row(r))
        if r.acceptance_sources_agree is False:
            out.append(f"⚠ {where}: accepted tokens seen in the stream differ from the server counters by "
                       f"{r.acceptance_tokens_diff} (other traffic in the window, or steps merged into one chunk)")
        if r.stream_merged_chunks and r.step_source == "step log":
            out.append(f"⚠ {where}: {r.stream_merged_chunks} chunks carried more than k+1 tokens (merged steps): stream "
                       "acceptance is overstated; the Why table's Tok/step and Step cost come from the step log, unaffected")
        elif r.stream_merged_chunks:
            out.append(f"⚠ {where}: {r.stream_merged_chunks} chunks carried more than k+1 tokens (merged steps): stream acceptance"
                       " (Tok/step) and Step cost are overstated by the same factor; their ratio, Decomposed speedup, holds")
        if r.steplog_accepted_agree is False:
            out.append(f"⚠ {where}: the step log's accepted tokens ({r.steplog_accepted}) differ from the /metrics counter "
                       f"delta ({r.steplog_counter_accepted}) over the same passes (a lost or mis-cut row, or other traffic)")
        if r.steplog_hist_agree is False:
            out.append(f"⚠ {where}: the step log's histogram counts {r.steplog_hist_accepted} accepted tokens, its "
                       f"spec-decode stats {r.steplog_accepted}")
        if r.steplog_token_agree is False or r.steplog_token_unplaced:
            unplaced = "; ".join(f"{n} {why}" for why, n in (r.steplog_token_unplaced or {}).items())
            out.append(f"⚠ {where}: the token log's accepted guesses ({r.steplog_token_accepted}) "
                       f"{'differ from' if r.steplog_token_agree is False else 'match'} the step log's ({r.steplog_accepted})"
                       + (f"; not placed: {unplaced}" if unplaced else ""))
        out += stall_warnings(r, where)
        if r.warmup_steady_passes:
            passes = "/".join(str(n) for n in r.warmup_steady_passes)
            if r.warmup_steady:
                out.append(f"{where}: steady warm-up: {passes} warm-up pass(es) per repeat; the last held no one-time event")
            else:
                left = "/".join(str(e[-1]) if isinstance(e, list) and e else "—" for e in r.warmup_steady_events or [])
                out.append(f"⚠ {where}: steady warm-up stopped at its cap ({passes} passes per repeat) with one-time events "
                           f"still in the last ({left}): the timed passes may hold warm-up left undone")
        if r.shared_read_share is not None and r.shared_read_share > 0.01:
            out.append(f"⚠ {where}: {100 * r.shared_read_share:.1f}% of chunks came in the same read as the one before "
                       "(client or network a whole step behind, or steps flushed together): ITL/step percentiles are coarser than the server's steps")
        if r.client_server_tokens_agree is False:
            seen = "—" if r.client_server_token_ratio is None else f"{100 * r.client_server_token_ratio:.1f}%"
            out.append(f"⚠ {where}: the client counted {seen} of the {r.server_generation_tokens} tokens the server's generation "
                       "counter added over the measured window (off by more than 1% in a repeat: the client missed tokens, "
                       "or other traffic reached the server)" + (f": {r.client_server_token_error}" if r.client_server_token_error else ""))
        if r.client_limited:
            shared = "—" if r.shared_read_share is None else f"{100 * r.shared_read_share:.1f}%"
            out.append(f"⚠ {where}: client-limited: the openai SDK yielded chunks {num(r.client_lag_p99_ms, 1)} ms (p99) after "
                       f"their socket read (limit {LAG_LIMIT_MS:g} ms), and read {shared} of them together with the one before "
                       "(limit 1%: it read them a step or more late): TTFT and ITL include the client's own time; "
                       "use load.client_processes or the default client")
        out += schedule_warnings(r)
        if r.status in ("failed", "interrupted"):
            out.append(f"⚠ {where}: cell {r.status} ({r.failed_requests or 0} failed requests: {r.errors or {}})")
    return out + cell_notes(rows)


def cell_notes(rows: Sequence[ResultRow]) -> list[str]:
    """Each cell's own ``notes`` (``measure/summarize.py``), and why a grading it asked for gave no accuracy (the
    column, all —, is left out of the tables), one line per distinct note naming every cell it applies to."""
    cells: dict[str, list[str]] = {}
    for r in rows:
        notes = [sentence(n) for n in r.notes] if isinstance(r.notes, list) else []
        if r.accuracy is None and r.accuracy_error:
            notes.append(f"⚠ Accuracy (graded) not measured: {r.accuracy_error}")
        for note in notes:
            where = str(Cell.of_row(r))
            cells.setdefault(str(note), []).append(where)
    return [("⚠ " if note.startswith("⚠ ") else "") + f"{', '.join(where)}: {note.removeprefix('⚠ ')}"
            for note, where in cells.items()]


def schedule_warnings(r: ResultRow) -> list[str]:
    """The line under the tables for a cell whose client fell behind its schedule."""
    if not r.client_behind_schedule:
        return []
    return [f"⚠ {Cell.of_row(r)}: the client fell behind its arrival schedule: it sent requests "
            f"{num(r.client_behind_ms_p99, 1)} ms (p99) after they were due (limit {BEHIND_LIMIT_MS:g} ms; its event loop "
            "or load.concurrency's in-flight cap held them): Latency and TTFT from schedule "
            f"({num(r.latency_from_schedule_mean_ms, 2)} / {num(r.ttft_from_schedule_mean_ms, 2)} ms mean) include that "
            "wait, the plain ones do not"]


STALL_NOTE_SHARE = 0.02  # a timed pass that lost at least this share of its wall time to stalls is named under the table


def stall_warnings(r: ResultRow, where: str) -> list[str]:
    """A line per timed pass that lost ≥ 2 % to stalls, naming them (issue 39), and, where the speedup varies
    between repeats, whether the repeats that disagree are the ones with stalls."""
    out, stalled = [], []
    for p in r.steplog_stall_passes or []:
        if not isinstance(p, dict):  # results.json is input: a pass that is not an object says nothing
            continue
        share = p.get("share")
        if not is_number(share) or share < STALL_NOTE_SHARE:
            continue
        stalled.append(p.get("repeat"))
        found = p.get("longest")
        longest = [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []
        parts = sorted({str(s.get("where"))[:40] for s in longest if s.get("where")})
        ms = " and ".join(f"{s['ms']:.0f}" for s in longest[:3] if is_number(s.get("ms")))
        lists = [s["causes"] for s in longest[:3] if isinstance(s.get("causes"), list)]
        causes = "; ".join(dict.fromkeys(str(c)[:300] for cs in lists for c in cs))
        start = f", server start {p['server_start']}" if p.get("server_start") is not None else ""
        out.append(f"⚠ {where} (repeat {p.get('repeat')}{start}): stalls took {100 * share:.1f}% of the timed pass — "
                   f"{p.get('stalls')} step(s), the longest {ms} ms" + (f" ({', '.join(parts)})" if parts else "")
                   + f": {causes}")
    speedups = r.speedup_repeats or []
    if r.speedup_varies and stalled and len(speedups) > max((i for i in stalled if isinstance(i, int)), default=len(speedups)):
        with_ = [speedups[i] for i in stalled if isinstance(i, int) and speedups[i] is not None]
        without = [v for i, v in enumerate(speedups) if i not in stalled and v is not None]
        if with_ and without:
            rng = f"{min(without):.2f}–{max(without):.2f}×" if len(without) > 1 else f"{without[0]:.2f}×"
            out.append(f"⚠ {where}: the speedup varies between repeats, and the repeats with stalls are "
                       f"{', '.join(str(i) for i in stalled)} ({', '.join(f'{v:.2f}×' for v in with_)}; without stalls {rng})")
    return out
