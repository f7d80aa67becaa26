"""Speed-up per data set (and load point) with 95% confidence intervals."""

from __future__ import annotations

from typing import Any

from ...schemas.cell import unique
from ..model import Model
from ..svg import (
    AXIS,
    FONT,
    GRID,
    INK,
    MUTED,
    Scale,
    Svg,
    empty_plot,
    esc,
    figure,
    legend,
    linear_axis,
    text_width,
    tick_label,
)
from .common import ci_of, nm_html, why_missing


def _caption(m: Model) -> str:
    methods = unique(r.speedup_ci_method for r in m.rows if r.speedup_ci_method)
    how = ("; here: " + "; ".join(esc(x) for x in methods)) if methods else (
        "; Student-t on the log of the per-repeat ratios when the run has repeats")
    return (
        f"Bar: <b>speedup_vs_baseline</b> = output tokens/s of the config ÷ the baseline's "
        f"(<code>{esc(m.baseline)}</code>) on the same data set and load point; the black error bar is its 95% "
        f"confidence interval <code>ci95.speedup_vs_baseline</code>, computed as each row's "
        f"<code>speedup_ci_method</code> says{how}. “no CI” = the row has none. "
        "Diamond: <b>paired speed-up</b> = Σtokens/Σlatency of the config ÷ the same "
        "for the baseline over the prompts both answered, with a 95% bootstrap interval over prompts "
        "(<code>paired_speedup_ci_low/high</code>). The dashed line at 1.0 is the baseline; a null value is "
        "written “not measured”, never drawn as 0.")


def _layout(m: Model) -> list[tuple[str, Any]]:
    """The plot's rows: ("dataset", name) | ("load", label) | ("bar", (config, record))."""
    multi_load = len(m.loads) > 1
    rows: list[tuple[str, Any]] = []
    for d in m.datasets:
        rows.append(("dataset", d))
        for ld in m.loads_of(d):
            if multi_load:
                rows.append(("load", ld.label))
            for c in m.spec_configs:
                rows.append(("bar", (c, m.row(c, d, ld))))
    return rows


def _values(rows: list[tuple[str, Any]]) -> list[float]:
    """Every value the x axis must reach: 1.0, the speed-ups and the top of their intervals."""
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
    return values


def _bar(svg: Svg, m: Model, sx: Scale, label_w: float, note_x: float, y: float, item: Any, has_paired: bool) -> None:
    """One config's bar, whisker and numbers, and its paired diamond below."""
    config, r = item
    svg.text(label_w - 10, y + 15, config, anchor="end")
    sp = None if r is None else r.speedup_vs_baseline
    if sp is None:
        svg.not_measured(label_w + 6, y + 15, why_missing(r))
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


def _legend(has_paired: bool) -> str:
    items = [("bar: throughput speed-up, black bar = its 95% CI", "#888888", "bar", "")]
    if has_paired:
        items.append(("diamond: paired per-prompt speed-up, grey bar = 95% bootstrap CI", "#888888", "marker", ""))
    else:
        items.append((f"paired per-prompt speed-up: {nm_html('no requests paired in these results')}", "", "none", ""))
    return legend(items)


def speedup_plot(m: Model) -> str:
    plot = "speedup"
    title = "Speed-up over the baseline, per data set"
    caption = _caption(m)
    if not m.baseline:
        return figure(plot, title, empty_plot(plot, "no baseline config in these results"), caption)
    if not m.spec_configs:
        return figure(plot, title, empty_plot(plot, "no speculative config in these results"), caption)
    rows = _layout(m)
    has_paired = any(r.paired_speedup is not None for r in m.rows)
    values = _values(rows)
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
            _bar(svg, m, sx, label_w, label_w + plot_w + 10, y, item, has_paired)
        y += h
    # axis + reference line, drawn last so they sit on top of the bars
    for t in ticks:
        svg.line(sx(t), y, sx(t), y + 4, AXIS)
        svg.text(sx(t), y + 17, tick_label(t), anchor="middle", size=12, fill=MUTED)
    svg.line(sx(0), y, sx(hi_), y, AXIS)
    svg.line(sx(1.0), top, sx(1.0), y, INK, 1.5, "5 4")
    svg.text(sx(1.0), top - 8, "baseline = 1.0", anchor="middle", size=12, fill=INK)
    svg.text(label_w + plot_w / 2, y + 38, "speed-up (×, higher is faster)", anchor="middle")
    return figure(plot, title, _legend(has_paired) + f'<div class="svg-wrap">{svg.render()}</div>', caption)
