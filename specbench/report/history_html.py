"""The HTML page of a directory of runs: per suite, the shown runs (table and plots, as the one-run
page draws them), the trend across its complete runs, optionally the latest-vs-previous comparison,
and a line for every run left out and why. One self-contained file, like ``html.py``'s page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..gate.render import fmt_measure
from ..gate.runs import RUN_METRICS
from ..run.history import RunEntry, SuiteHistory
from ..run.readback import read_requests
from ..util.diskio import write_output
from .history_compare import comparability, comparison_of, rule_text, verdict_text
from .history_report import other_runs, run_line, status_line
from .html import CSS, table_html
from .model import Model
from .notes import sentence
from .plots import TrendRun, acceptance_plot, category_plot, latency_plot, load_plot, speedup_plot, trend_plot
from .svg import esc

EXTRA_CSS = """
.run{margin:22px 0 8px;font-size:14px;font-weight:normal}
ul.runs{font-size:14px;padding-left:20px}
td.worse{background:#fdecea;font-weight:600}
td.better{background:#e8f5e9}
"""


def _md_inline(text: str) -> str:
    """The few markdown bits of our one-line summaries (`code`, **bold**, a leading "- ") as HTML."""
    html = esc(text.removeprefix("- "))
    html = re.sub(r"`([^`]*)`", r"<code>\1</code>", html)
    return re.sub(r"\*\*([^*]*)\*\*", r"<b>\1</b>", html)


def _run_body(run: RunEntry, prefix: str) -> str:
    m = Model(run.rows or [], run.meta)
    parts = [table_html(m)]
    notes = (run.meta.notes if run.meta else None) or []
    if notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{esc(sentence(n))}</li>" for n in notes) + "</ul>")
    if m.rows:
        parts += [speedup_plot(m), load_plot(m) or "", acceptance_plot(m), category_plot(m),
                  latency_plot(m, read_requests(run.path))]
    return "".join(parts).replace(' id="fig-', f' id="{prefix}-fig-')


def _comparison_html(old: RunEntry, new: RunEntry, tolerance: float) -> str:
    comp = comparison_of(old, new, tolerance)
    labels = dict(RUN_METRICS)
    head = "".join(f'<th scope="col">{h}</th>' for h in
                   ("Config", "Data set", "Load", "Metric", "Old", "New", "Change", "Verdict"))
    rows = []
    for cell in comp.cells:
        for m in cell.metrics:
            if m.vacuous:
                continue
            change = "—" if m.change is None else f"{m.change * 100:+.1f}%"
            verdict = verdict_text(m)
            cls = f' class="{m.verdict}"' if m.verdict in ("better", "worse") else ""
            rows.append("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in (
                cell.cell.config, cell.cell.dataset, cell.cell.point.label, labels[m.metric], fmt_measure(m.old),
                fmt_measure(m.new), change)) + f"<td{cls}>{esc(verdict)}</td></tr>")
    out = [f'<p class="run">Old: {_md_inline(run_line(old))}<br>New: {_md_inline(run_line(new))}</p>']
    problems = comparability(old.meta, new.meta)
    if problems:
        out.append(f'<p class="warn">not comparable (new vs old): {esc("; ".join(problems))}</p>')
    out.append(f'<p class="notes">{_md_inline(rule_text(tolerance))}</p>')
    out.append(f'<div class="table-wrap"><table class="results compare"><thead><tr>{head}</tr></thead>'
               f'<tbody>{"".join(rows)}</tbody></table></div>')
    for side, cells in (("old", comp.only_old), ("new", comp.only_new)):
        if cells:
            out.append(f'<p class="notes">Only in the {side} run: {esc("; ".join(str(c) for c in cells))}</p>')
    return "".join(out)


def render_history_html(histories: Sequence[SuiteHistory], roots: Sequence[Path], show_all: bool,
                        compare: bool, tolerance: float = 0.0) -> str:
    where = ", ".join(str(r) for r in roots)
    n_runs = sum(len(h.runs) for h in histories)
    what = "every complete run of each suite" if show_all else "the latest complete run of each suite"
    sections = []
    for i, h in enumerate(histories):
        sid = f"suite-{i}"
        latest_meta = h.complete[-1].meta if h.complete else None
        trend = trend_plot(h.name, [TrendRun(r.started, r.path.name, r.rows or []) for r in h.complete], latest_meta)
        body = [trend.replace(' id="fig-', f' id="{sid}-fig-')]
        if compare:
            body.append("<h3>Latest complete run vs the one before</h3>")
            pair = h.latest_pair
            body.append(_comparison_html(*pair, tolerance) if pair else
                        f"<p>{len(h.complete)} complete run(s): nothing to compare.</p>")
        if not h.shown:
            body.append("<p>No complete run of this suite.</p>")
        for j, run in enumerate(h.shown):
            label = "Run" if show_all else "Latest complete run"
            body.append(f'<h3 class="run">{label}: {_md_inline(run_line(run))}</h3>' + _run_body(run, f"{sid}-{j}"))
        others = other_runs(h) if not compare else [status_line(r) for r in h.runs if not r.complete]
        if others:
            body.append("<h3>Other runs of this suite</h3><ul class=\"runs\">"
                        + "".join(f"<li>{_md_inline(line)}</li>" for line in others) + "</ul>")
        sections.append((sid, h.name, "".join(body)))
    nav = "<nav>" + "".join(f'<a href="#{sid}">{esc(name)}</a>' for sid, name, _ in sections) + "</nav>"
    content = "".join(f'<section id="{sid}"><h2>{esc(name)}</h2>{body}</section>' for sid, name, body in sections)
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(where)} — specbench history</title><style>{CSS}{EXTRA_CSS}</style></head>"
            f"<body><main><header><h1>specbench results under {esc(where)}</h1>"
            f'<p class="meta">{n_runs} run(s) of {len(histories)} suite(s); showing {what}.</p>{nav}</header>'
            f"{content}<footer>Generated by specbench · one self-contained file: inline SVG, no scripts, no network."
            "</footer></main></body></html>\n")


def write_history_html(histories: Sequence[SuiteHistory], roots: Sequence[Path], out: Path, show_all: bool,
                       compare: bool, tolerance: float = 0.0) -> Path:
    out = Path(out)
    if out.is_dir():
        out = out / "report.html"
    write_output(out, render_history_html(histories, roots, show_all, compare, tolerance))
    return out
