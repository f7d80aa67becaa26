"""Accepted draft tokens per target step: the distribution per cell (``accepted_per_step``) and per prompt
category (``accepted_per_step_categories``), one bar per speculative config."""

from __future__ import annotations

from collections.abc import Sequence

from ...schemas.row import ResultRow
from ..model import Model
from ..svg import Scale, Svg, empty_plot, esc, figure, legend, x_axis, y_axis
from .common import why_missing

PLOT = "accepted-per-step"
TITLE = "Accepted draft tokens per step"
CAPTION = (
    "Bar height: the share of a config's target steps (counted per request) that accepted <i>a</i> draft tokens "
    "(<code>accepted_per_step</code>[a] ÷ its sum), one panel per data set and load point, then, where the prompts "
    "carry categories, one per data set and category pooled over load points (<code>accepted_per_step_categories"
    "</code>). Source (<code>accepted_per_step_source</code>): the engine's step log where the cell ran with one "
    "(a request committing j tokens in a step accepted j − 1; its prefill step counts as one accepting 0), else the "
    "stream's decode chunks (a chunk of n tokens = n − 1 accepted, the prefill chunk left out; a chunk that merged "
    "steps reads as one step accepting more). A config with no distribution in a panel is listed as “not measured”, never drawn as 0.")


def _shares(counts: Sequence[int] | None) -> list[float] | None:
    total = sum(counts or ())
    return [c / total for c in counts or ()] if total else None


def _pooled(lists: Sequence[Sequence[int]]) -> list[int] | None:
    if not lists:
        return None
    n = max(len(v) for v in lists)
    return [sum(v[i] for v in lists if i < len(v)) for i in range(n)]


def _panel(m: Model, heading: str, data: dict[str, list[float] | None], missing: dict[str, str], width: float) -> str:
    """Grouped bars: x = accepted tokens, one bar per config; the configs without data listed under it."""
    amax = max([len(v) - 1 for v in data.values() if v] + [1])
    height, left, right, top, bottom = 270.0, 58.0, 12.0, 28.0, 64.0
    sx = Scale(-0.5, amax + 0.5, left, width - right)
    sy = Scale(0.0, 1.0, height - bottom, top)
    svg = Svg(width, height, f"{TITLE}: {heading}", PLOT)
    svg.text(left, 15, heading, size=14, weight="bold")
    y_axis(svg, sy, [0, 0.25, 0.5, 0.75, 1.0], left, width - right, "share of steps", fmt=lambda v: f"{v * 100:.0f}%")
    x_axis(svg, sx, list(range(amax + 1)), top, height - bottom, "draft tokens accepted in the step",
           fmt=lambda v: f"{v:g}", grid=False)
    drawn = [c for c, v in data.items() if v]
    slot = (sx(1) - sx(0)) * 0.8
    bar = slot / max(len(drawn), 1)
    for i, c in enumerate(drawn):
        for a, share in enumerate(data[c] or ()):
            x = sx(a) - slot / 2 + i * bar
            svg.rect(x, sy(share), bar - 1, sy(0) - sy(share), m.colour[c], extra=' class="bar"')
    gone = [f"{c}" + (f" ({why})" if (why := missing.get(c)) else "") for c, v in data.items() if not v]
    if gone:
        svg.not_measured(left, height - 8, "; ".join(gone), size=12, listing=True)
    return svg.render()


def accepted_plot(m: Model) -> str:
    """The figure, or an empty one saying why: no speculative config, or none with a distribution."""
    if not m.spec_configs:
        return figure(PLOT, TITLE, empty_plot(PLOT, "no speculative config in these results"), CAPTION)
    if not any(r.accepted_per_step for r in m.rows):
        return figure(PLOT, TITLE, empty_plot(PLOT, "no cell has accepted_per_step (results from before it, or no "
                                                    "per-chunk token counts)"), CAPTION)
    width = 460.0
    panels = []
    for d in m.datasets:
        for ld in m.loads_of(d):
            rows: dict[str, ResultRow | None] = {c: m.row(c, d, ld) for c in m.spec_configs}
            data = {c: _shares(r.accepted_per_step if r else None) for c, r in rows.items()}
            missing = {c: why_missing(r) for c, r in rows.items()}
            panels.append(_panel(m, f"{d} {ld.label}".strip(), data, missing, width))
        cats = sorted({cat for r in m.rows if r.dataset == d for cat in (r.accepted_per_step_categories or {})})
        for cat in cats:
            data = {c: _shares(_pooled([v for r in m.rows if r.run == c and r.dataset == d
                                        if (v := (r.accepted_per_step_categories or {}).get(cat))]))
                    for c in m.spec_configs}
            panels.append(_panel(m, f"{d} · {cat} (all loads)", data, {}, width))
    items = [(esc(c), m.colour[c], "bar", "") for c in m.spec_configs]
    sources = sorted({r.accepted_per_step_source.split(" (")[0] for r in m.rows if r.accepted_per_step_source})
    body = (legend(items) + f'<p class="notes">Source: {esc("; ".join(sources))}.</p>' + '<div class="panels">'
            + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels) + "</div>")
    return figure(PLOT, TITLE, body, CAPTION)
