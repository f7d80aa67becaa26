"""One self-contained HTML report: the comparison table and inline-SVG plots, no network needed.

Everything is SVG markup (no plotting library, no script, no external font or stylesheet), so the
file can be mailed, attached to a PR or opened offline. This module is the table and the page;
the plots are ``plots/`` (one module per plot), drawn with ``svg.py``, over the run's model in ``model.py``. Every plot carries a
caption saying how its numbers were computed; a value that is null in ``results.json`` is written
"not measured" on the plot, never drawn as 0.

Plots:

- speed-up per data set (and load point) with 95% confidence intervals
- speed-up vs concurrency (or request rate) with the crossover below 1.0 marked, for sweeps
- acceptance by draft position per config (server counters, and the stream-derived estimate)
- per-category acceptance length (from each row's ``categories``)
- accepted draft tokens per step, per cell and per category (``accepted_per_step``)
- latency CDFs (TTFT, per-token ITL, TPOT) of baseline vs spec configs, from ``requests.jsonl``

Last, the Notes: the same lines the markdown prints under its tables (``notes.py``), so a cell's ⚠ and the
reason a value is — travel with the page too.
"""

from __future__ import annotations

from pathlib import Path

from ..measure.explained import Explained
from ..run.readback import RunResults, read_requests, read_run
from ..schemas.cell import load_of, unique
from ..schemas.meta import Comparability, Host, RunMeta
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..util.diskio import write_output
from .colspec import DASH, DECOMPOSITION_NOTE, Column, Group, is_missing
from .columns import grouped, has_decomposition
from .model import PALETTE, Model
from .notes import lines
from .plots import (
    acceptance_plot,
    accepted_plot,
    category_plot,
    cdf_points,
    crossings,
    decomposition_plot,
    latency_plot,
    load_plot,
    nm_html,
    request_scatter,
    speedup_plot,
    tune_section,
    whatif_section,
)
from .svg import NOT_MEASURED, esc, nice_ticks
from .workload_columns import headline_note

__all__ = ["NOT_MEASURED", "PALETTE", "cdf_points", "crossings", "nice_ticks", "render_html", "write_html"]


# --------------------------------------------------------------------------------------------
# comparison table
# --------------------------------------------------------------------------------------------

def _cell_html(text: str) -> str:
    if is_missing(text):
        return f'<td class="na" title="{NOT_MEASURED}">{DASH}</td>'
    shown = esc(text).replace(DASH, f'<span class="na" title="{NOT_MEASURED}">{DASH}</span>')
    return f"<td>{shown}</td>"


def _head(groups: list[tuple[Group, list[Column]]]) -> str:
    """One header row of every column (its definition as the tooltip), under a row naming the tables
    they are grouped into, as the markdown report prints them, where there is more than one."""
    cols = [c for _, mine in groups for c in mine]
    head = "".join(f'<th scope="col" title="{esc(c.definition)}">{esc(c.header)}</th>' for c in cols)
    if len(groups) < 2:
        return f"<tr>{head}</tr>"
    spans = "".join(f'<th scope="colgroup" colspan="{len(mine)}">{esc(g.title)}</th>' for g, mine in groups)
    return f'<tr class="groups">{spans}</tr><tr>{head}</tr>'


def table_html(m: Model) -> str:
    groups = grouped(m.rows)
    cols = [c for _, mine in groups for c in mine]
    order = {c: i for i, c in enumerate(m.configs)}
    dorder = {d: i for i, d in enumerate(m.datasets)}
    rows = sorted(m.rows, key=lambda r: (dorder[r.dataset], load_of(r).sort_key(), order[r.run]))
    body = []
    for r in rows:
        cls = []
        if r.run == m.baseline:
            cls.append("baseline")
        if r.status not in (None, "ok"):
            cls.append("bad")
        c = f' class="{" ".join(cls)}"' if cls else ""
        body.append(f"<tr{c}>" + "".join(_cell_html(col.cell(r)) for col in cols) + "</tr>")
    return (f'<div class="table-wrap"><table class="results"><thead>{_head(groups)}</thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------

CSS = """
:root{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:#1a1a1a;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",Arial,sans-serif}
main{max-width:1400px;margin:0 auto;padding:20px 16px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:32px 0 10px;padding-bottom:4px;border-bottom:2px solid #e3e3e3}
h3{font-size:16px;margin:0 0 8px}
h4{font-size:14px;margin:12px 0 4px}
code{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.92em;background:#f3f3f3;padding:0 3px;border-radius:3px}
.meta{color:#444;margin:0 0 4px}
.meta span{margin-right:14px;white-space:nowrap;display:inline-block}
nav{margin:12px 0 0;font-size:14px}
nav a{color:#0b5cad;margin-right:14px}
.table-wrap{overflow-x:auto;border:1px solid #dcdcdc;border-radius:4px}
table.results{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums;width:100%}
table.results th,table.results td{padding:5px 6px;border-bottom:1px solid #e8e8e8;text-align:right;white-space:nowrap}
table.results th{white-space:normal;vertical-align:bottom;min-width:3.5em}
table.results th:nth-child(-n+2),table.results td:nth-child(-n+2){text-align:left}
table.results thead th{background:#f2f2f2;position:sticky;top:0;font-weight:600}
table.results thead tr.groups th{position:static;text-align:left;border-left:2px solid #fff;background:#e6e6e6}
table.results tr.baseline td{background:#f7f7f7}
table.results tr.bad td{background:#fdecea}
td.na,.na{color:#666;font-style:italic}
figure.plot{margin:0 0 22px;padding:14px 16px 10px;border:1px solid #dcdcdc;border-radius:4px;background:#fff}
figcaption{font-size:14px;color:#333;margin-top:8px;max-width:1150px}
.svg-wrap{overflow-x:auto}
svg.chart{display:block;max-width:100%;height:auto;font-family:inherit}
.panels{display:flex;flex-wrap:wrap;gap:8px 18px}
ul.legend{list-style:none;padding:0;margin:2px 0 8px;display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px}
ul.legend li{display:flex;align-items:center;gap:6px}
ul.crossovers{font-size:14px;margin:8px 0 0;padding-left:20px}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;vertical-align:-1px;margin-right:3px}
.notes{font-size:14px;color:#333}
ul.notes li.warning{background:#fff4e0;border-left:4px solid #E69F00;padding:2px 8px;margin:2px 0}
.warn{font-size:14px;background:#fff4e0;border-left:4px solid #E69F00;padding:6px 10px;margin:8px 0 0}
footer{margin-top:28px;color:#666;font-size:13px}
"""


def _notes_html(notes: list[str]) -> str:
    """The lines the markdown prints under its tables (``notes.lines``: the run's notes, then each cell's warnings
    and notes, identical ones grouped over their cells), in its order and words, escaped; a warning (⚠) is
    marked ``class="warning"`` so it stands out, not only by its sign."""
    items = "".join(f'<li class="warning">{esc(n)}</li>' if n.startswith("⚠") else f"<li>{esc(n)}</li>" for n in notes)
    return f'<ul class="notes">{items}</ul>'


def _meta_html(m: Model, meta: RunMeta) -> tuple[str, str]:
    raw, comp, host = meta.raw, meta.comparability or Comparability(), meta.host or Host()
    name = meta.suite_name or raw.name or "specbench results"
    spans = []
    model = raw.model or comp.model
    if model:
        spans.append(f"model <b>{esc(model)}</b>")
    engines = unique(f"{r.engine} {r.server_version or ''}".strip() for r in m.rows if r.engine)
    if engines:
        spans.append("engine " + ", ".join(f"<b>{esc(e)}</b>" for e in engines))
    if host.cpus:
        spans.append(f"host {esc(host.platform or '')} · {esc(host.cpus)} CPUs")
    if meta.started_at:
        spans.append(f"started {esc(meta.started_at)}")
    if meta.finished_at:
        spans.append(f"finished {esc(meta.finished_at)}")
    if comp.max_tokens is not None:
        spans.append(f"max_tokens {esc(comp.max_tokens)}, temperature {esc(comp.temperature)}")
    if meta.merged_from:
        spans.append("merged from " + ", ".join(f"<code>{esc(p)}</code>" for p in meta.merged_from))
    desc = raw.description
    head = (f"<h1>{esc(name)}</h1>" + (f'<p class="meta">{esc(desc)}</p>' if desc else "")
            + f'<p class="meta">{" ".join(f"<span>{s}</span>" for s in spans)}</p>')
    return str(name), head


def render_html(rows: list[ResultRow], requests: list[RequestRecord] | None, meta: RunMeta | None,
                explained: Explained | None = None) -> str:
    """The whole report as one HTML document (inline CSS and SVG only)."""
    meta = meta or RunMeta()
    m = Model(rows, meta)
    name, head = _meta_html(m, meta)
    sections: list[tuple[str, str, str]] = []
    sections.append(("table", "Comparison table", table_html(m) + (
        '<p class="notes">— (and - inside Accept p1/p2/p3) = not measured (null in results.json), never 0. Speedup = output tok/s ÷ the baseline\'s '
        "on the same data set and load point (the paired per-prompt speed-up is drawn in the next plot); "
        "Accept p1/p2/p3 = joint acceptance of draft positions 1–3 from server counters."
        + (" " + esc(DECOMPOSITION_NOTE) if has_decomposition(m.rows) else "")
        + (" " + esc(headline) if (headline := headline_note(m.rows)) else "") + "</p>")))
    if m.rows:
        sections.append(("speedup", "Speed-up per data set", speedup_plot(m)))
        lp = load_plot(m)
        if lp:
            sections.append(("speedup-load", "Speed-up vs load", lp))
        if has_decomposition(m.rows):
            sections.append(("decomposition", "Why: tokens per step vs step cost", decomposition_plot(m)))
        explained = explained or Explained()  # the run's analyses, made by the run stage: the sections only draw them
        whatif_title = ("Predicted speed-up at a profile's acceptance (what-if)" if explained.replay
                        else "Break-even acceptance (what-if)")
        for sid, title, content in (("whatif", whatif_title, whatif_section(explained)),
                                    ("tune", "Best K per load", tune_section(explained.tune))):
            if content:
                sections.append((sid, title, content))
        sections.append(("acceptance-position", "Acceptance by position", acceptance_plot(m)))
        sections.append(("category-acceptance", "Acceptance per category", category_plot(m)))
        if any(r.accepted_per_step for r in m.rows):
            sections.append(("accepted-per-step", "Accepted tokens per step", accepted_plot(m)))
        sections.append(("latency-cdf", "Latency CDFs", latency_plot(m, requests)))
        if any(r.request_acceptance_p50 is not None for r in m.rows):
            sections.append(("request-acceptance", "Acceptance vs TPOT per request", request_scatter(m, requests)))
    notes = lines(m.rows, meta)
    notes_part = f'<section id="sec-notes"><h2>Notes</h2>{_notes_html(notes)}</section>' if notes else ""
    nav = "<nav>" + "".join(f'<a href="#sec-{sid}">{esc(t)}</a>' for sid, t, _ in sections) + (
        '<a href="#sec-notes">Notes</a>' if notes else "") + "</nav>"
    body = "".join(f'<section id="sec-{sid}"><h2>{esc(t)}</h2>{content}</section>' for sid, t, content in sections)
    if not m.rows:
        body += f"<p>{nm_html('no result records')}</p>"
    version = meta.specbench_version or ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(name)} — specbench report</title><style>{CSS}</style></head>"
        f"<body><main><header>{head}{nav}</header>{body}{notes_part}"
        f"<footer>Generated by specbench {esc(version)} · one self-contained file: inline SVG, no scripts, no network."
        "</footer></main></body></html>\n")


def write_html(run_paths: list[Path], out: Path) -> Path:
    """Render the runs (directories or results.json files) into one HTML file; returns its path.

    ``out`` may be a file or an existing directory (then ``report.html`` inside it).
    """
    runs = [read_run(p) for p in run_paths]
    rows = [r for run in runs for r in run.rows]
    requests: list[RequestRecord] | None = None
    for run in runs:
        reqs = read_requests(run.path.parent) if run.path else None
        if reqs is not None:
            requests = (requests or []) + reqs
    meta = (runs[0].meta or RunMeta()).copy()
    if len(runs) > 1:
        meta.notes = None
        meta.merged_from = [str(run.path) for run in runs]
    out = Path(out)
    if out.is_dir():
        out = out / "report.html"
    write_output(out, render_html(rows, requests, meta, RunResults(rows, meta).explained))
    return out


def write(paths: list[Path], output: Path | None) -> str:
    """The ``html`` report format."""
    return f"wrote {write_html(paths, output or Path('report.html'))}"
