"""The markdown report: the comparison table teams paste into PRs (``../shared/reference/results_example.md``)
and the small tables below it (``tables.py``), the sweep, what-if and tune tables, and the notes and
warnings that must travel with them.

Missing values print as ``—`` (or ``-`` inside the per-position cell), never as 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..measure.explained import Explained, Sweep
from ..schemas.cell import Cell, load_label
from ..schemas.meta import RunMeta
from ..schemas.row import ResultRow
from ..schemas.row_latency import LAG_LIMIT_MS
from ..util.numbers import is_number
from .arrival_columns import schedule_warnings
from .colspec import DASH, DECOMPOSITION_NOTE
from .columns import COLUMNS, has_decomposition, num
from .explain_tables import explain_markdown
from .tables import md_row, tables_markdown

__all__ = ["COLUMNS", "DASH", "DECOMPOSITION_NOTE", "has_decomposition", "markdown", "render"]


def markdown(rows: Sequence[ResultRow], meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    """The comparison table and the small tables (``tables.py``), the sweep table, the what-if and
    tune tables, and last the notes and warnings. The sweep, what-if and tune tables format the run's
    analyses, made once by the run stage (``explained``: ``RunResults.explained``, or what the run
    made when it wrote results.md); without them those tables are left out."""
    parts = tables_markdown(rows)
    explained = explained or Explained()
    sweep = sweep_table(explained.sweep)
    if sweep:
        parts.append(sweep)
    parts += explain_markdown(explained)
    notes = list((meta.notes if meta else None) or []) + warnings(rows)
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes))
    return "\n\n".join(parts)


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
        notes = list(r.notes) if isinstance(r.notes, list) else []
        if r.accuracy is None and r.accuracy_error:
            notes.append(f"⚠ Accuracy (graded) not measured: {r.accuracy_error}")
        for note in notes:
            where = str(Cell.of_row(r))
            cells.setdefault(str(note), []).append(where)
    return [("⚠ " if note.startswith("⚠ ") else "") + f"{', '.join(where)}: {note.removeprefix('⚠ ')}"
            for note, where in cells.items()]


def sweep_table(sweep: Sweep | None) -> str | None:
    """Speedup vs concurrency per data set and config, with the crossover where it drops below 1."""
    if sweep is None:
        return None
    header = ["Dataset", "Run", *[load_label("concurrency", c) for c in sweep.loads], "Crossover"]
    lines = [md_row(header), md_row(["---"] * len(header))]
    for line in sweep.lines:
        cross = line.crossover
        lines.append(md_row([line.dataset, line.run, *[num(line.speedups.get(c), 3, "x") for c in sweep.loads],
                              load_label("concurrency", cross) if cross is not None else "none (pays off at every load)"]))
    return "Speedup vs concurrency\n\n" + "\n".join(lines)


def render(rows: Sequence[ResultRow], meta: RunMeta | None = None, explained: Explained | None = None) -> str:
    """The ``markdown`` report format."""
    return markdown(rows, meta, explained)


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

