"""Acceptance by draft position per config: server counters and the stream-derived estimate."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...schemas.cell import load_of
from ...schemas.row import ResultRow
from ..model import Model
from ..svg import (
    MUTED,
    Scale,
    Svg,
    empty_plot,
    esc,
    figure,
    legend,
    x_axis,
    y_axis,
)
from .common import why_missing


def _per_position(r: ResultRow) -> list[float | None]:
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


def _pool(rows: Sequence[ResultRow], get: Callable[[ResultRow], list[float | None] | None],
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
                partial[c] = [load_of(r).label + (f" ({why_missing(r)})" if why_missing(r) else "")
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
