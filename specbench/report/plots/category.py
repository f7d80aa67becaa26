"""Acceptance length per category, from each row's ``categories``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...schemas.row import ResultRow
from ..model import Model
from ..svg import (
    AXIS,
    GRID,
    MUTED,
    NOT_MEASURED,
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


def _pooled_category(rows: Sequence[ResultRow]) -> dict[str, tuple[float | None, int]]:
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
