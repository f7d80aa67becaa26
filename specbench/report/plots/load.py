"""Speed-up vs concurrency or request rate, with the crossover below 1.0 marked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...schemas.cell import LoadPoint
from ..model import Model
from ..svg import (
    INK,
    Scale,
    Svg,
    coord,
    esc,
    figure,
    legend,
    linear_axis,
    x_axis,
    y_axis,
)
from .common import ci_of, why_missing


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


Points = list[tuple[float, float, tuple[float, float] | None]]


def _points(m: Model, c: str, d: str, loads: list[LoadPoint], xs: list[float], missing: list[str],
            vals: list[float]) -> Points:
    """One config's measured speed-ups over the loads; what is null goes to ``missing``."""
    pts = []
    for ld, x in zip(loads, xs):
        r = m.row(c, d, ld)
        v = None if r is None else r.speedup_vs_baseline
        if r is None or v is None:
            missing.append(f"{c} @ {ld.label}" + (f" ({why_missing(r)})" if why_missing(r) else ""))
            continue
        iv = ci_of(r, "speedup_vs_baseline")
        pts.append((x, float(v), iv))
        vals.append(v)
        if iv:
            vals += list(iv)
    return pts


def _verdict(simple: list[tuple[float, float]], word: str, unit: str) -> str:
    """What a config's line does when it crosses no 1.0 between adjacent measured points."""
    if len(simple) < 2:
        return (f"measured at {word} {simple[0][0]:g}{unit} only ({simple[0][1]:.3f}×); "
                f"the other load points are not measured")
    if all(v >= 1.0 for _, v in simple):
        return f"stays at or above 1.0 up to {word} {simple[-1][0]:g}{unit} (no crossover measured)"
    if all(v < 1.0 for _, v in simple):
        return f"below 1.0 at every {word} measured"
    return "rises above 1.0 with load (no drop below 1.0)"


def _crossovers(svg: Svg, sx: Scale, sy: Scale, bottom_y: float, colour: str, d: str, c: str, pts: Points,
                xs: list[float], log: bool, word: str, unit: str) -> list[str]:
    """Mark where one config's line drops below 1.0; the summary lines that say it."""
    summary = []
    simple = [(x, v) for x, v, _ in pts]
    # crossings only between adjacent measured load points
    adjacent = [(simple[i], simple[i + 1]) for i in range(len(simple) - 1)
                if xs.index(simple[i + 1][0]) == xs.index(simple[i][0]) + 1]
    found = False
    for a, b in adjacent:
        for _, xc in crossings([a, b], log):
            found = True
            cx = sx(xc)
            svg.line(cx, sy(1.0) - 16, cx, bottom_y, colour, 1.5, "2 3")
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
        summary.append(f"<li><b>{esc(d)}</b> · <span class=\"swatch\" style=\"background:{colour}\"></span>"
                       f"<code>{esc(c)}</code>: {_verdict(simple, word, unit)}.</li>")
    return summary


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
        missing: list[str] = []
        series = {c: _points(m, c, d, loads, xs, missing, vals) for c in m.spec_configs}
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
            summary += _crossovers(svg, sx, sy, ph - bottom, colour, d, c, pts, xs, log, word, unit)
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
