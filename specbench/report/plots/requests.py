"""Acceptance length vs TPOT, one point per request, coloured by category: where speculation paid
off request by request, and whether a category (code, math, chat) sits apart."""

from __future__ import annotations

from collections.abc import Sequence

from ...measure.latency import tpot
from ...measure.per_request import request_lengths
from ...schemas.cell import LoadPoint, load_of
from ...schemas.request import RequestRecord
from ..model import PALETTE, Model
from ..svg import (
    MUTED,
    Scale,
    Svg,
    empty_plot,
    esc,
    figure,
    legend,
    linear_axis,
    x_axis,
    y_axis,
)

NO_CATEGORY = "(no category)"


def request_scatter(m: Model, requests: Sequence[RequestRecord] | None) -> str:
    plot = "request-acceptance"
    title = "Acceptance length vs TPOT, per request"
    caption = (
        "One point per measured, successful request of each speculative config: x = its acceptance length "
        "(tokens per target step over its decode: vLLM's per-request stats when every request of the cell has them, "
        "else decode tokens ÷ decode chunks from the stream; <code>request_acceptance_source</code> says which), "
        "y = its TPOT = (latency − TTFT) ÷ (output tokens − 1). Colour = the prompt's category. The dashed line is "
        "the baseline's median TPOT on the same data set and load point, when measured: points above it were "
        "decoded more slowly than the typical baseline request. Requests with one output token have no TPOT and are left out.")
    if not requests:
        return figure(plot, title, empty_plot(plot, "requests.jsonl not available for these results"), caption)
    measured = [r for r in requests if r.phase == "measure"]
    groups: dict[tuple[str, int, str | None], list[RequestRecord]] = {}
    for r in measured:
        groups.setdefault((r.dataset, r.concurrency or 0, r.config), []).append(r)
    categories = sorted({r.category or NO_CATEGORY for r in measured})
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(categories)}
    blocks = []
    for d in m.datasets:
        for conc in sorted({k[1] for k in groups if k[0] == d}):
            base = [t * 1000 for r in groups.get((d, conc, m.baseline), []) if (t := tpot(r)) is not None]
            base_median = sorted(base)[len(base) // 2] if base else None
            for config in m.spec_configs:
                recs = groups.get((d, conc, config))
                if not recs:
                    continue
                pts = [(al, t * 1000, r.category or NO_CATEGORY) for r, al, _ in request_lengths(recs)[0]
                       if (t := tpot(r)) is not None]
                blocks.append(_panel(plot, f"{d} · {_load(m, config, d, conc)} · {config}", pts, colour, base_median))
    if not blocks:
        return figure(plot, title, empty_plot(plot, "no speculative request with an acceptance length"), caption)
    items = [(esc(c), colour[c], "bar", "") for c in categories]
    return figure(plot, title, legend(items) + '<div class="panels">' + "".join(blocks) + "</div>", caption)


def _load(m: Model, config: str, dataset: str, conc: int) -> str:
    row = next((r for r in m.rows if r.run == config and r.dataset == dataset
                and ((r.concurrency or r.max_concurrency or 0) == conc)), None)
    return load_of(row).label if row else LoadPoint(conc).label


def _panel(plot: str, name: str, pts: list[tuple[float, float, str]], colour: dict[str, str],
           base_median: float | None) -> str:
    w, h = 420.0, 300.0
    left, right, top, bottom = 60.0, 14.0, 30.0, 52.0
    if not pts:
        return f"<div><h4>{esc(name)}</h4>{empty_plot(plot, 'no request with both an acceptance length and a TPOT', w, 90)}</div>"
    xs, ys = [p[0] for p in pts], [p[1] for p in pts] + ([base_median] if base_median is not None else [])
    xa, xb, xt = linear_axis(min(1.0, min(xs)), max(xs) * 1.05 + 1e-9, 5)
    ya, yb, yt = linear_axis(0.0, max(ys) * 1.08 + 1e-9, 5)
    sx, sy = Scale(xa, xb, left, w - right), Scale(ya, yb, h - bottom, top)
    svg = Svg(w, h, f"acceptance vs TPOT: {name}", plot)
    y_axis(svg, sy, yt, left, w - right, "TPOT (ms)")
    x_axis(svg, sx, xt, top, h - bottom, "acceptance length (tokens per step)", grid=False)
    if base_median is not None:
        svg.line(left, sy(base_median), w - right, sy(base_median), MUTED, 1.2, "6 4")
        svg.text(w - right - 4, sy(base_median) - 4, "baseline median TPOT", anchor="end", size=11, fill=MUTED)
    for x, y, cat in pts:
        svg.add(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.2" fill="{colour[cat]}" fill-opacity="0.75" '
                f'stroke="{colour[cat]}"><title>{esc(cat)}: {x:.2f} tokens/step, {y:.1f} ms</title></circle>')
    svg.text(left, 18, f"n = {len(pts)} requests", size=12, fill=MUTED)
    return f"<div><h4>{esc(name)}</h4>{svg.render()}</div>"
