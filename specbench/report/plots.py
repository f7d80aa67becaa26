"""The report's plots, each a captioned ``<figure>`` of inline SVG saying how its numbers were
computed; a null value is written "not measured" on the plot, never drawn as 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..metrics import token_itl, tpot
from ..records import RequestRecord
from .model import Load, Model, Record, load_of, load_of_request, unique
from .svg import (
    AXIS,
    FONT,
    GRID,
    INK,
    MUTED,
    NOT_MEASURED,
    Scale,
    Svg,
    coord,
    empty_plot,
    esc,
    figure,
    legend,
    linear_axis,
    log_ticks,
    text_width,
    tick_label,
    x_axis,
    y_axis,
)


def nm_html(detail: str = "") -> str:
    return f'<span class="na">{NOT_MEASURED}{" (" + esc(detail) + ")" if detail else ""}</span>'


# --------------------------------------------------------------------------------------------
# speed-up per data set
# --------------------------------------------------------------------------------------------

def ci_of(r: Record, key: str) -> tuple[float, float] | None:
    ci = (r.ci95 or {}).get(key)
    if ci and len(ci) == 2 and None not in ci:
        return float(ci[0]), float(ci[1])
    if key == "paired_speedup" and r.paired_speedup_ci_low is not None and r.paired_speedup_ci_high is not None:
        return float(r.paired_speedup_ci_low), float(r.paired_speedup_ci_high)
    return None


def _why_missing(r: Record | None, what: str = "") -> str:
    if r is None:
        return "no such cell"
    if r.status == "failed":
        return "cell failed"
    if r.status == "interrupted":
        return "interrupted"
    return what


def speedup_plot(m: Model) -> str:
    plot = "speedup"
    title = "Speed-up over the baseline, per data set"
    methods = unique(r.speedup_ci_method for r in m.rows if r.speedup_ci_method)
    how = ("; here: " + "; ".join(esc(x) for x in methods)) if methods else (
        "; Student-t over per-repeat ratios when the run has repeats")
    caption = (
        f"Bar: <b>speedup_vs_baseline</b> = output tokens/s of the config ÷ the baseline's "
        f"(<code>{esc(m.baseline)}</code>) on the same data set and load point; the black error bar is its 95% "
        f"confidence interval <code>ci95.speedup_vs_baseline</code>, computed as each row's "
        f"<code>speedup_ci_method</code> says{how}. “no CI” = the row has none. "
        "Diamond: <b>paired speed-up</b> = Σtokens/Σlatency of the config ÷ the same "
        "for the baseline over the prompts both answered, with a 95% bootstrap interval over prompts "
        "(<code>paired_speedup_ci_low/high</code>). The dashed line at 1.0 is the baseline; a null value is "
        "written “not measured”, never drawn as 0.")
    if not m.baseline:
        return figure(plot, title, empty_plot(plot, "no baseline config in these results"), caption)
    if not m.spec_configs:
        return figure(plot, title, empty_plot(plot, "no speculative config in these results"), caption)
    multi_load = len(m.loads) > 1
    rows: list[tuple[str, Any]] = []  # ("dataset", name) | ("load", label) | ("bar", (config, record))
    for d in m.datasets:
        rows.append(("dataset", d))
        for ld in m.loads_of(d):
            if multi_load:
                rows.append(("load", ld.label))
            for c in m.spec_configs:
                rows.append(("bar", (c, m.row(c, d, ld))))
    has_paired = any(r.paired_speedup is not None for r in m.rows)
    values: list[float] = [1.0]
    for kind, item in rows:
        if kind == "bar" and item[1] is not None:
            r = item[1]
            for v in (r.speedup_vs_baseline, r.paired_speedup):
                if v is not None:
                    values.append(v)
            for key in ("speedup_vs_baseline", "paired_speedup"):
                iv = ci_of(r, key)
                if iv:
                    values.append(iv[1])
    label_w = max(120.0, min(300.0, max(text_width(c) for c in m.spec_configs) + 48))
    plot_w, note_w = 560.0, 250.0
    width = label_w + plot_w + note_w
    row_h = {"dataset": 30, "load": 22, "bar": 34 if has_paired else 24}
    top, bottom = 26, 50
    height = top + sum(row_h[k] for k, _ in rows) + bottom
    hi = max(values) * 1.05
    _, hi_, ticks = linear_axis(0.0, hi, 6)
    sx = Scale(0.0, hi_, label_w, label_w + plot_w)
    svg = Svg(width, height, title, plot)
    y_end = top + sum(row_h[k] for k, _ in rows)
    for t in ticks:  # grid under the bars
        svg.line(sx(t), top, sx(t), y_end, GRID)
    y = top
    for kind, item in rows:
        h = row_h[kind]
        if kind == "dataset":
            svg.rect(0, y + 2, width, h - 4, "#f2f2f2")
            svg.text(8, y + h / 2 + 5, item, size=14, weight="bold")
        elif kind == "load":
            svg.text(16, y + h / 2 + 5, item, size=FONT, fill=MUTED, weight="bold")
        else:
            config, r = item
            svg.text(label_w - 10, y + 15, config, anchor="end")
            sp = None if r is None else r.speedup_vs_baseline
            note_x = label_w + plot_w + 10
            if sp is None:
                svg.not_measured(label_w + 6, y + 15, _why_missing(r))
            else:
                colour = m.colour[config]
                svg.rect(sx(0), y + 6, sx(sp) - sx(0), 14, colour, extra=' class="bar"')
                iv = ci_of(r, "speedup_vs_baseline")
                if iv:
                    svg.whisker(sx(iv[0]), sx(iv[1]), y + 13, INK, cap=5)
                svg.text(note_x, y + 17, f"{sp:.3f}×" + (f"  [{iv[0]:.2f}–{iv[1]:.2f}]" if iv else "  (no CI)"),
                         size=12)
            ps = None if r is None else r.paired_speedup
            piv = None if r is None else ci_of(r, "paired_speedup")
            if ps is not None:
                if piv:
                    svg.whisker(sx(piv[0]), sx(piv[1]), y + 27, MUTED, cap=3)
                svg.marker(sx(ps), y + 27, m.colour[config], "diamond", r=4)
                svg.text(note_x, y + 31, f"paired {ps:.3f}×" + (f"  [{piv[0]:.2f}–{piv[1]:.2f}]" if piv else ""),
                         size=12, fill=MUTED)
            elif sp is not None and has_paired:
                svg.not_measured(note_x, y + 31, "paired", size=12)
        y += h
    # axis + reference line, drawn last so they sit on top of the bars
    for t in ticks:
        svg.line(sx(t), y, sx(t), y + 4, AXIS)
        svg.text(sx(t), y + 17, tick_label(t), anchor="middle", size=12, fill=MUTED)
    svg.line(sx(0), y, sx(hi_), y, AXIS)
    svg.line(sx(1.0), top, sx(1.0), y, INK, 1.5, "5 4")
    svg.text(sx(1.0), top - 8, "baseline = 1.0", anchor="middle", size=12, fill=INK)
    svg.text(label_w + plot_w / 2, y + 38, "speed-up (×, higher is faster)", anchor="middle")
    items = [("bar: throughput speed-up, black bar = its 95% CI", "#888888", "bar", "")]
    if has_paired:
        items.append(("diamond: paired per-prompt speed-up, grey bar = 95% bootstrap CI", "#888888", "marker", ""))
    else:
        items.append((f"paired per-prompt speed-up: {nm_html('no requests paired in these results')}", "", "none", ""))
    return figure(plot, title, legend(items) + f'<div class="svg-wrap">{svg.render()}</div>', caption)


# --------------------------------------------------------------------------------------------
# speed-up vs load (crossover)
# --------------------------------------------------------------------------------------------

@dataclass
class Crossing:
    dataset: str
    config: str
    x_before: float
    s_before: float
    x_after: float
    s_after: float
    x_cross: float


def crossings(points: Sequence[tuple[float, float]], log: bool) -> list[tuple[int, float]]:
    """Where a speed-up series drops from ≥1.0 to <1.0: (index of the point before, interpolated x)."""
    out = []
    for i in range(len(points) - 1):
        (x0, s0), (x1, s1) = points[i], points[i + 1]
        if s0 >= 1.0 > s1:
            t = (s0 - 1.0) / (s0 - s1)
            if log and x0 > 0 and x1 > 0:
                xc = 10 ** (math.log10(x0) + t * (math.log10(x1) - math.log10(x0)))
            else:
                xc = x0 + t * (x1 - x0)
            out.append((i, xc))
    return out


def _ci_caveat(pts: Sequence[tuple[float, float, tuple[float, float] | None]], a: tuple[float, float],
               b: tuple[float, float]) -> str:
    """Say so when the 95% CI of either end point still straddles 1.0: the crossing is then not established."""
    straddle = [(x, iv) for x, _, iv in pts if x in (a[0], b[0]) and iv and iv[0] <= 1.0 <= iv[1]]
    if not straddle:
        return ""
    parts = ", ".join(f"at {x:g}: {iv[0]:.2f}–{iv[1]:.2f}" for x, iv in straddle)
    return f" — but the 95% CI includes 1.0 ({parts}), so the drop is within noise"


def load_plot(m: Model) -> str | None:
    kind = m.sweep_kind()
    if kind is None or not m.baseline or not m.spec_configs:
        return None
    plot = "speedup-load"
    what = "concurrency" if kind == "concurrency" else "request rate (req/s)"
    word, unit = ("concurrency", "") if kind == "concurrency" else ("request rate", " req/s")
    title = f"Speed-up vs {what.split(' (')[0]}, per data set"
    panels, summary = [], []
    pw, ph = 560.0, 330.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 74.0
    for d in m.datasets:
        loads = [ld for ld in m.loads_of(d) if ld.kind == kind and ld.value is not None]
        if len(loads) < 2:
            continue
        xs = [ld.value for ld in loads if ld.value is not None]
        log = min(xs) > 0 and max(xs) / min(xs) >= 4
        sx = Scale(min(xs), max(xs), left + 24, pw - right - 24, log=log)
        vals = [1.0]
        series: dict[str, list[tuple[float, float, tuple[float, float] | None]]] = {}
        missing: list[str] = []
        for c in m.spec_configs:
            pts = []
            for ld, x in zip(loads, xs):
                r = m.row(c, d, ld)
                v = None if r is None else r.speedup_vs_baseline
                if r is None or v is None:
                    missing.append(f"{c} @ {ld.label}" + (f" ({_why_missing(r)})" if _why_missing(r) else ""))
                    continue
                iv = ci_of(r, "speedup_vs_baseline")
                pts.append((x, float(v), iv))
                vals.append(v)
                if iv:
                    vals += list(iv)
            series[c] = pts
        lo, hi, yt = linear_axis(max(min(vals) * 0.95, 0.0), max(vals) * 1.03, 5)
        sy = Scale(lo, hi, ph - bottom, top)
        svg = Svg(pw, ph, f"{title}: {d}", plot)
        svg.text(left, 16, d, size=14, weight="bold")
        y_axis(svg, sy, yt, left, pw - right, "speed-up (×)")
        x_axis(svg, sx, xs, top, ph - bottom, what, fmt=lambda v: f"{v:g}", grid=True)
        svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1.5, "5 4")
        svg.text(left + 4, sy(1.0) + 14, "baseline 1.0", size=11)
        for ci, (c, pts) in enumerate(series.items()):
            colour, dash = m.colour[c], m.dash[c]
            jitter = (ci - (len(series) - 1) / 2) * 7  # keep error bars of configs apart
            svg.series(xs, pts, sx, sy, colour, dash, clip=(lo, hi), jitter=jitter, width=2.5, cap=4)
            simple = [(x, v) for x, v, _ in pts]
            # crossings only between adjacent measured load points
            adjacent = [(simple[i], simple[i + 1]) for i in range(len(simple) - 1)
                        if xs.index(simple[i + 1][0]) == xs.index(simple[i][0]) + 1]
            found = False
            for a, b in adjacent:
                for _, xc in crossings([a, b], log):
                    found = True
                    cx = sx(xc)
                    svg.line(cx, sy(1.0) - 16, cx, ph - bottom, colour, 1.5, "2 3")
                    svg.add(f'<circle cx="{coord(cx)}" cy="{coord(sy(1.0))}" r="7" fill="none" stroke="{colour}" '
                            f'stroke-width="2.5" class="crossover"/>')
                    svg.add(f'<text x="{coord(cx - 10)}" y="{coord(sy(1.0) + 20)}" font-size="12" font-weight="bold" '
                            f'fill="{colour}" text-anchor="end" stroke="#ffffff" stroke-width="4" '
                            f'paint-order="stroke">≈{xc:.3g}</text>')
                    summary.append(
                        f"<li><b>{esc(d)}</b> · <span class=\"swatch\" style=\"background:{colour}\"></span>"
                        f"<code>{esc(c)}</code>: drops below 1.0 between {word} {a[0]:g}{unit} ({a[1]:.3f}×) and "
                        f"{b[0]:g}{unit} ({b[1]:.3f}×); ≈ {xc:.3g}{unit} by linear interpolation"
                        f"{' in log(' + word + ')' if log else ''}{_ci_caveat(pts, a, b)}.</li>")
            if not found and simple:
                if len(simple) < 2:
                    verdict = (f"measured at {word} {simple[0][0]:g}{unit} only ({simple[0][1]:.3f}×); "
                               f"the other load points are not measured")
                elif all(v >= 1.0 for _, v in simple):
                    verdict = f"stays at or above 1.0 up to {word} {simple[-1][0]:g}{unit} (no crossover measured)"
                elif all(v < 1.0 for _, v in simple):
                    verdict = f"below 1.0 at every {word} measured"
                else:
                    verdict = "rises above 1.0 with load (no drop below 1.0)"
                summary.append(f"<li><b>{esc(d)}</b> · <span class=\"swatch\" style=\"background:{colour}\"></span>"
                               f"<code>{esc(c)}</code>: {verdict}.</li>")
        if missing:
            svg.not_measured(left, ph - 14, "; ".join(missing), size=12, listing=True)
        panels.append(svg.render())
    if not panels:
        return None
    items = [(esc(c), m.colour[c], "line", m.dash[c]) for c in m.spec_configs]
    items.append(("○ on the 1.0 line: crossover, where speed-up drops below 1.0", INK, "none", ""))
    caption = (
        f"Each point is one cell's <b>speedup_vs_baseline</b> (output tokens/s ÷ the baseline's at the same "
        f"{word}), with its 95% CI (<code>ci95.speedup_vs_baseline</code>) when the row has one. The crossover is where the line from a "
        "point at or above 1.0 to the next point below 1.0 meets 1.0, linearly interpolated between the two "
        f"measured {word} values (in log({word}) when the axis drawn is logarithmic): an estimate, "
        f"not a measurement. Points that are null in results.json are listed as “not measured” under each panel.")
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + (f'<ul class="crossovers">{"".join(summary)}</ul>' if summary else ""))
    return figure(plot, title, body, caption)


# --------------------------------------------------------------------------------------------
# acceptance by position
# --------------------------------------------------------------------------------------------

def _per_position(r: Record) -> list[float | None]:
    per = r.acceptance_per_position
    if per:
        return list(per)
    out: list[float | None] = []
    i = 1
    while r.has(f"acceptance_pos_{i}"):
        out.append(r.get(f"acceptance_pos_{i}"))
        i += 1
    while out and out[-1] is None:
        out.pop()
    return out


def _pool(rows: Sequence[Record], get: Callable[[Record], list[float | None] | None],
          weight_key: str) -> tuple[list[float | None], int]:
    """Weighted mean per position over cells (weight = the cell's drafts/steps; 1 when unknown)."""
    lists = [(get(r) or [], r.get(weight_key) or 1) for r in rows]
    lists = [(lst, w) for lst, w in lists if any(v is not None for v in lst)]
    n = max((len(lst) for lst, _ in lists), default=0)
    out: list[float | None] = []
    for i in range(n):
        num = sum(v * w for lst, w in lists if i < len(lst) and (v := lst[i]) is not None)
        den = sum(w for lst, w in lists if i < len(lst) and lst[i] is not None)
        out.append(num / den if den else None)
    return out, len(lists)


def acceptance_plot(m: Model) -> str:
    plot = "acceptance-position"
    title = "Acceptance by draft position, per config"
    caption = (
        "Solid line, filled dots: share of draft steps whose first <i>i</i> draft tokens were all accepted, from the "
        "engine's spec-decode counters (<code>acceptance_per_position</code>: accepted-at-position-<i>i</i> ÷ drafts, "
        "deltas over each measured phase). Dashed line, hollow dots: the same joint probability estimated from the "
        "stream (<code>stream_acceptance_joint</code>: a decode chunk of n tokens = n−1 accepted drafts); it reads low "
        "when the engine sends several steps in one chunk or fewer tokens per chunk. When a data set was measured at "
        "several load points, each position is the mean over them weighted by the cell's drafts (counters) or "
        "decode steps (stream). A config with no value at all is listed as “not measured”.")
    if not m.spec_configs:
        return figure(plot, title, empty_plot(plot, "no speculative config in these results"), caption)
    panels = []
    pw, ph = (580.0 if len(m.datasets) <= 2 else 420.0), 310.0  # two or three panels a row
    left, right, top, bottom = 58.0, 16.0, 28.0, 64.0
    any_stream = False
    for d in m.datasets:
        data, partial = {}, {}
        for c in m.spec_configs:
            rows = [r for r in m.rows if r.run == c and r.dataset == d]
            counters, _ = _pool(rows, _per_position, "spec_drafts")
            stream, _ = _pool(rows, lambda r: r.stream_acceptance_joint, "stream_steps")
            data[c] = (counters, stream)
            any_stream = any_stream or any(v is not None for v in stream)
            if any(v is not None for v in counters):  # pooled over fewer cells than exist: say which lack it
                partial[c] = [load_of(r).label + (f" ({_why_missing(r)})" if _why_missing(r) else "")
                              for r in rows if not any(v is not None for v in _per_position(r))]
        kmax = max([len(a) for a, _ in data.values()] + [len(b) for _, b in data.values()] + [1])
        sx = Scale(1, max(kmax, 2), left + 22, pw - right - 22)
        sy = Scale(0.0, 1.0, ph - bottom, top)
        svg = Svg(pw, ph, f"{title}: {d}", plot)
        svg.text(left, 15, d, size=14, weight="bold")
        y_axis(svg, sy, [0, 0.25, 0.5, 0.75, 1.0], left, pw - right, "P(first i drafts accepted)",
               fmt=lambda v: f"{v * 100:.0f}%")
        x_axis(svg, sx, list(range(1, kmax + 1)), top, ph - bottom, "draft position i", fmt=lambda v: f"{v:g}")
        missing = []
        for c, (counters, stream) in data.items():
            colour = m.colour[c]
            for values, dash, hollow in ((stream, "6 4", True), (counters, "", False)):
                pts = [(sx(i + 1), sy(v)) for i, v in enumerate(values) if v is not None]
                if len(pts) > 1:
                    svg.polyline(pts, colour, 2.5 if not hollow else 2, dash)
                for x, y in pts:
                    svg.marker(x, y, colour, hollow=hollow, r=4 if not hollow else 3.5)
            if not any(v is not None for v in counters) and not any(v is not None for v in stream):
                missing.append(c)
            elif not any(v is not None for v in counters):
                missing.append(f"{c} counters")
            elif partial.get(c):
                missing.append(f"{c} counters @ {', '.join(partial[c])}")
        if missing:
            svg.not_measured(left, ph - 8, "; ".join(missing), size=12, listing=True)
        panels.append(svg.render())
    items = [(esc(c), m.colour[c], "line", "") for c in m.spec_configs]
    items.append(("server counters", MUTED, "line", ""))
    if any_stream:
        items.append(("stream estimate", MUTED, "hollow-line", "6 4"))
    body = legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels) + "</div>"
    disagree = [r for r in m.rows if r.acceptance_sources_agree is False]
    if disagree:
        cells = "; ".join(
            f"<code>{esc(r.run)}</code> on {esc(r.dataset)} {esc(load_of(r).label)}: counters "
            f"{r.mean_acceptance_length:.2f} vs stream {r.stream_mean_acceptance_length:.2f} tokens/step"
            for r in disagree if r.mean_acceptance_length is not None
            and r.stream_mean_acceptance_length is not None)
        body += (f'<p class="warn"><b>The two acceptance sources disagree</b> (mean acceptance length differs by more '
                 f"than 5%, <code>acceptance_sources_agree: false</code>): {cells}. Other traffic in the counter window, "
                 "chunks that merge or split engine steps, or max_tokens cutting the last step can cause this; "
                 "the counters are what results.json reports.</p>")
    return figure(plot, title, body, caption)


# --------------------------------------------------------------------------------------------
# per-category acceptance
# --------------------------------------------------------------------------------------------

def _pooled_category(rows: Sequence[Record]) -> dict[str, tuple[float | None, int]]:
    """category -> (acceptance length pooled over load points, requests)."""
    acc: dict[str, list[tuple[float | None, int, int]]] = {}
    for r in rows:
        for cat, v in (r.categories or {}).items():
            acc.setdefault(cat, []).append((v.get("stream_mean_acceptance_length"), v.get("output_tokens") or 0,
                                            v.get("requests") or 0))
    out: dict[str, tuple[float | None, int]] = {}
    for cat, items in acc.items():
        measured = [(length, tok) for length, tok, _ in items if length is not None]
        nreq = sum(n for _, _, n in items)
        if not measured:
            out[cat] = (None, nreq)
        elif len(measured) == 1 or not all(tok for _, tok in measured):
            out[cat] = (float(np.mean([length for length, _ in measured])), nreq)
        else:  # Σtokens / Σsteps, each cell's steps ≈ tokens ÷ its length
            out[cat] = (sum(tok for _, tok in measured) / sum(tok / length for length, tok in measured), nreq)
    return out


def category_plot(m: Model) -> str:
    plot = "category-acceptance"
    title = "Acceptance length per prompt category"
    caption = (
        "Bar: tokens committed per target step as seen in the stream (<code>categories.*.stream_mean_acceptance_length</code>"
        " = decode tokens ÷ decode chunks of that category's requests; the first chunk, prefill, is left out). 1.0 means "
        "no draft token accepted, so bars start at 1.0. Cells measured at several load points are pooled as Σtokens ÷ "
        "Σsteps (steps of a cell ≈ its output tokens ÷ its length). n = requests over all load points. Null values are "
        "written “not measured”.")
    if not any(r.categories for r in m.rows):
        return figure(plot, title, empty_plot(plot, "no row has a categories breakdown; its prompts carry no category"),
                      caption)
    configs = m.spec_configs or m.configs
    blocks = []
    for d in m.datasets:
        per = {c: _pooled_category([r for r in m.rows if r.run == c and r.dataset == d]) for c in configs}
        cats = sorted({cat for v in per.values() for cat in v})
        if not cats:
            continue
        blocks.append((d, cats, per))
    if not blocks:
        return figure(plot, title, empty_plot(plot, "no category values for the speculative configs"), caption)
    values = [v for _, _, per in blocks for c in per for v, _ in per[c].values() if v is not None]
    hi = max(values + [2.0])
    _, hi_, ticks = linear_axis(1.0, hi * 1.02, 5)
    label_w = max(160.0, min(320.0, max(text_width(f"{cat} (n={99})") for _, cats, _ in blocks for cat in cats) + 30))
    plot_w, note_w = 520.0, 190.0
    width = label_w + plot_w + note_w
    bar_h, gap, head_h = 15.0, 10.0, 30.0
    top = 8
    height = top + sum(head_h + len(cats) * (len(configs) * bar_h + gap) for _, cats, _ in blocks) + 50
    sx = Scale(1.0, hi_, label_w, label_w + plot_w)
    svg = Svg(width, height, title, plot)
    y_end = height - 50
    for t in ticks:  # grid under the bars
        svg.line(sx(t), top, sx(t), y_end, GRID)
    y: float = top
    for d, cats, per in blocks:
        svg.rect(0, y + 2, width, head_h - 4, "#f2f2f2")
        svg.text(8, y + head_h / 2 + 5, d, size=14, weight="bold")
        y += head_h
        for cat in cats:
            n = max(per[c].get(cat, (None, 0))[1] for c in configs)
            svg.text(label_w - 10, y + len(configs) * bar_h / 2 + 5, f"{cat} (n={n})", anchor="end")
            for c in configs:
                v = per[c].get(cat, (None, 0))[0]
                if v is None:
                    svg.not_measured(label_w + 6, y + bar_h - 3, size=12)
                    svg.text(label_w + plot_w + 8, y + bar_h - 3, f"{c}: {NOT_MEASURED}", size=12, fill=MUTED)
                else:
                    svg.rect(sx(1.0), y + 1, sx(v) - sx(1.0), bar_h - 2, m.colour[c], extra=' class="bar"')
                    svg.text(label_w + plot_w + 8, y + bar_h - 3, f"{c}: {v:.2f}", size=12)
                y += bar_h
            y += gap
    for t in ticks:
        svg.line(sx(t), y, sx(t), y + 4, AXIS)
        svg.text(sx(t), y + 17, tick_label(t), anchor="middle", size=12, fill=MUTED)
    svg.line(sx(1.0), top, sx(1.0), y, AXIS)
    svg.line(sx(1.0), y, sx(hi_), y, AXIS)
    svg.text(label_w + plot_w / 2, y + 38, "tokens per target step (stream)", anchor="middle")
    items = [(esc(c), m.colour[c], "bar", "") for c in configs]
    return figure(plot, title, legend(items) + f'<div class="svg-wrap">{svg.render()}</div>', caption)


# --------------------------------------------------------------------------------------------
# latency CDFs
# --------------------------------------------------------------------------------------------

CDF_POINTS = 400
METRICS = (
    ("ttft", "TTFT (ms)", "time to first token: first content chunk − send"),
    ("itl", "ITL per token (ms)", "gap before a chunk ÷ its tokens, one sample per token"),
    ("tpot", "TPOT (ms)", "(latency − TTFT) ÷ (output tokens − 1), one per request"),
)


def samples_ms(recs: Sequence[RequestRecord]) -> dict[str, np.ndarray]:
    ok = [r for r in recs if r.ok]
    ttft = np.array([r.ttft for r in ok], dtype=float)
    itl = np.concatenate([token_itl(r) for r in ok]) if ok else np.empty(0)
    tp = np.array([t for t in (tpot(r) for r in ok) if t is not None], dtype=float)
    return {"ttft": ttft * 1000, "itl": itl * 1000, "tpot": tp * 1000}


def cdf_points(values: np.ndarray, n: int = CDF_POINTS) -> list[tuple[float, float]]:
    """Empirical CDF as a step line: (v_i, i/n) → (v_i, (i+1)/n), thinned to about n points."""
    v = np.sort(values)
    size = v.size
    if size <= n:
        idx = np.arange(size)
    else:
        idx = np.unique(np.round(np.linspace(0, size - 1, n)).astype(int))
    pts: list[tuple[float, float]] = []
    for i in idx:
        pts.append((float(v[i]), i / size))
        pts.append((float(v[i]), (i + 1) / size))
    return pts


def latency_plot(m: Model, requests: Sequence[RequestRecord] | None) -> str:
    plot = "latency-cdf"
    title = "Latency distributions (CDF): baseline vs speculative configs"
    caption = (
        "Empirical cumulative distributions over the measured (non-warm-up), successful requests of each config, "
        "per data set and load point, from <code>requests.jsonl</code>. TTFT = first content chunk − send time, one "
        "sample per request. ITL is per token: a chunk of n tokens after a gap g adds n samples of g/n (so a "
        "speculative step's tokens share its gap). TPOT = (latency − TTFT) ÷ (output tokens − 1), one per request. "
        "The x axis is logarithmic when the samples span more than a factor of 20. Dotted lines mark the 50th and "
        "95th percentiles. Black = the baseline.")
    if not requests:
        return figure(plot, title, empty_plot(plot, "requests.jsonl not available for these results"), caption)
    measured = [r for r in requests if r.phase == "measure" and r.config in m.colour]  # only configs of the table
    groups: dict[tuple[str, Load], dict[str, list[RequestRecord]]] = {}
    for r in measured:
        groups.setdefault((r.dataset, load_of_request(r)), {}).setdefault(r.config, []).append(r)
    if not groups:
        return figure(plot, title, empty_plot(plot, "no measured request in requests.jsonl"), caption)
    dorder = {d: i for i, d in enumerate(m.datasets)}
    order = {c: i for i, c in enumerate(m.configs)}
    blocks = []
    pw, ph = 420.0, 270.0
    left, right, top, bottom = 56.0, 14.0, 28.0, 52.0
    for (d, load) in sorted(groups, key=lambda k: (dorder.get(k[0], 99), k[1].sort_key())):
        by_config = groups[(d, load)]
        configs = sorted(set(by_config) | {c for c in m.configs if m.row(c, d, load)},
                         key=lambda c: order.get(c, 99))
        samples = {c: samples_ms(by_config.get(c, [])) for c in configs}
        width = 3 * pw
        where = f"concurrency {load.value:g}" if load.kind == "concurrency" else load.label
        svg = Svg(width, ph, f"latency CDFs: {d} {load.label}", plot)
        for j, (key, label, _) in enumerate(METRICS):
            x0 = j * pw
            arrays = [s[key] for s in samples.values() if s[key].size]
            sy = Scale(0.0, 1.0, ph - bottom, top)
            svg.text(x0 + left, 16, label.split(" (")[0], size=13, weight="bold")
            if not arrays:
                svg.rect(x0 + left, top, pw - left - right, ph - top - bottom, "#fafafa", "#cccccc")
                svg.not_measured(x0 + (left + pw - right) / 2, (top + ph - bottom) / 2, anchor="middle")
                continue
            allv = np.concatenate(arrays)
            pos = allv[allv > 0]
            lo = float(pos.min()) if pos.size else 0.0
            hi = float(allv.max())
            log = pos.size > 0 and hi / lo > 20
            if log:
                sx = Scale(lo / 1.1, hi * 1.1, x0 + left, x0 + pw - right, log=True)
                ticks = log_ticks(sx.lo, sx.hi)
            else:
                a, b, ticks = linear_axis(max(0.0, lo - 0.05 * (hi - lo)), hi + 0.05 * (hi - lo) + 1e-9, 4)
                sx = Scale(a, b, x0 + left, x0 + pw - right)
            for t in ticks:
                svg.line(sx(t), top, sx(t), ph - bottom, GRID)
                svg.line(sx(t), ph - bottom, sx(t), ph - bottom + 4, AXIS)
                svg.text(sx(t), ph - bottom + 17, tick_label(t), anchor="middle", size=12, fill=MUTED)
            svg.line(sx.a, ph - bottom, sx.b, ph - bottom, AXIS)
            svg.text((sx.a + sx.b) / 2, ph - bottom + 36, label + (" · log scale" if log else ""), anchor="middle")
            for q, name in ((0.5, "p50"), (0.95, "p95")):
                svg.line(sx.a, sy(q), sx.b, sy(q), "#9a9a9a", 1, "1 3")
                svg.text(sx.a + 3, sy(q) - 3, name, size=11, fill=MUTED)
            for t in (0, 0.25, 0.5, 0.75, 1.0):
                svg.text(x0 + left - 6, sy(t) + 4, f"{t * 100:.0f}%", anchor="end", size=12, fill=MUTED)
            svg.line(x0 + left, sy.a, x0 + left, sy.b, AXIS)
            # spec configs first, the baseline drawn last (on top)
            for c in sorted(configs, key=lambda c: c == m.baseline):
                arr = samples[c][key]
                if not arr.size:
                    continue
                pts = [(sx(v), sy(p)) for v, p in cdf_points(arr)]
                svg.polyline(pts, m.colour[c], 2.5 if c == m.baseline else 2, m.dash[c])
        absent = [c for c in configs if not samples[c]["ttft"].size]
        items = []
        for c in configs:
            n = sum(1 for r in by_config.get(c, []) if r.ok)
            if c in absent:
                items.append((f"{esc(c)}: {nm_html(_why_missing(m.row(c, d, load)) or 'no successful request')}",
                              m.colour[c], "plain", m.dash[c]))
            else:
                items.append((f"{esc(c)} <small>(n={n} requests)</small>", m.colour[c], "plain", m.dash[c]))
        if absent:
            svg.height = ph + 20
            svg.not_measured(8, ph + 12, ", ".join(absent) + " (no successful request)", size=12, listing=True)
        blocks.append(f'<div class="cdf-block"><h4>{esc(d)} · {where}</h4>{legend(items)}'
                      f'<div class="svg-wrap">{svg.render()}</div></div>')
    return figure(plot, title, "".join(blocks), caption)
