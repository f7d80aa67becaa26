"""Latency CDFs (TTFT, per-token ITL, TPOT) of baseline vs spec configs, from ``requests.jsonl``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...measure.latency import token_itl, tpot
from ...schemas.cell import Cell, LoadPoint
from ...schemas.request import RequestRecord
from ..model import Model
from ..svg import (
    AXIS,
    GRID,
    MUTED,
    Scale,
    Svg,
    empty_plot,
    esc,
    figure,
    legend,
    linear_axis,
    log_ticks,
    tick_label,
)
from .common import nm_html, why_missing

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


#: one panel's frame: its width and height, and the margins of its plot area
PANEL_W, PANEL_H = 420.0, 270.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 14.0, 28.0, 52.0


def _panel(svg: Svg, m: Model, x0: float, configs: list[str], samples: dict[str, np.ndarray], label: str) -> None:
    """One metric's CDFs, one line per config, in the panel starting at ``x0``."""
    pw, ph = PANEL_W, PANEL_H
    left, right, top, bottom = LEFT, RIGHT, TOP, BOTTOM
    arrays = [s for s in samples.values() if s.size]
    sy = Scale(0.0, 1.0, ph - bottom, top)
    svg.text(x0 + left, 16, label.split(" (")[0], size=13, weight="bold")
    if not arrays:
        svg.rect(x0 + left, top, pw - left - right, ph - top - bottom, "#fafafa", "#cccccc")
        svg.not_measured(x0 + (left + pw - right) / 2, (top + ph - bottom) / 2, anchor="middle")
        return
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
        arr = samples[c]
        if not arr.size:
            continue
        pts = [(sx(v), sy(p)) for v, p in cdf_points(arr)]
        svg.polyline(pts, m.colour[c], 2.5 if c == m.baseline else 2, m.dash[c])


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
    groups: dict[tuple[str, LoadPoint], dict[str, list[RequestRecord]]] = {}
    for r in measured:
        groups.setdefault((r.dataset, Cell.of_record(r).point), {}).setdefault(r.config, []).append(r)
    if not groups:
        return figure(plot, title, empty_plot(plot, "no measured request in requests.jsonl"), caption)
    dorder = {d: i for i, d in enumerate(m.datasets)}
    order = {c: i for i, c in enumerate(m.configs)}
    blocks = []
    pw, ph = PANEL_W, PANEL_H
    for (d, load) in sorted(groups, key=lambda k: (dorder.get(k[0], 99), k[1].sort_key())):
        by_config = groups[(d, load)]
        configs = sorted(set(by_config) | {c for c in m.configs if m.row(c, d, load)},
                         key=lambda c: order.get(c, 99))
        samples = {c: samples_ms(by_config.get(c, [])) for c in configs}
        width = 3 * pw
        svg = Svg(width, ph, f"latency CDFs: {d} {load.label}", plot)
        for j, (key, label, _) in enumerate(METRICS):
            _panel(svg, m, j * pw, configs, {c: samples[c][key] for c in configs}, label)
        absent = [c for c in configs if not samples[c]["ttft"].size]
        items = []
        for c in configs:
            n = sum(1 for r in by_config.get(c, []) if r.ok)
            if c in absent:
                items.append((f"{esc(c)}: {nm_html(why_missing(m.row(c, d, load)) or 'no successful request')}",
                              m.colour[c], "plain", m.dash[c]))
            else:
                items.append((f"{esc(c)} <small>(n={n} requests)</small>", m.colour[c], "plain", m.dash[c]))
        if absent:
            svg.height = ph + 20
            svg.not_measured(8, ph + 12, ", ".join(absent) + " (no successful request)", size=12, listing=True)
        blocks.append(f'<div class="cdf-block"><h4>{esc(d)} · {load.label}</h4>{legend(items)}'
                      f'<div class="svg-wrap">{svg.render()}</div></div>')
    return figure(plot, title, "".join(blocks), caption)
