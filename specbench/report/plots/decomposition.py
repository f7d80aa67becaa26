"""Why a speed-up: tokens per step against step cost per load (every run with both measured)."""

from __future__ import annotations

import math

from ...schemas.cell import LoadPoint, load_of
from ..model import Model
from ..svg import (
    INK,
    MUTED,
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
from .common import num_or_none, panel_loads

Series = dict[str, list[tuple[float, float]]]


def _series(m: Model, c: str, d: str, loads: list[LoadPoint], xs: list[float], vals: list[float],
            missing: list[str]) -> Series | None:
    """One config's tokens per step, step cost and speed-up over the loads; None when it has none."""
    s: Series = {"al": [], "cost": [], "speedup": []}
    for ld, x in zip(loads, xs):
        r = m.row(c, d, ld)
        tokens = None if r is None else (r.steplog_tokens_per_step if r.step_source == "step log"
                                         else r.stream_mean_acceptance_length)
        values = (("al", tokens),
                  ("cost", None if r is None else r.step_cost_ratio),
                  ("speedup", None if r is None else r.speedup_vs_baseline))
        for key, value in values:
            v = num_or_none(value)
            if v is None:
                if key != "speedup":
                    missing.append(f"{c} {'tokens/step' if key == 'al' else 'step cost'} @ {ld.label}")
                continue
            s[key].append((x, v))
            vals.append(v)
    return s if any(s.values()) else None


def _draw(svg: Svg, m: Model, sx: Scale, sy: Scale, c: str, d: str, s: Series, loads: list[LoadPoint], xs: list[float],
          log: bool) -> list[str]:
    """One config's three lines and crossovers; the summary lines that say what they show."""
    summary = []
    colour = m.colour[c]
    for key, dash, shape, hollow in (("al", "", "circle", False), ("cost", "6 4", "circle", True),
                                     ("speedup", "2 3", "diamond", False)):
        pts = [(sx(x), sy(v)) for x, v in s[key]]
        if len(pts) > 1:
            svg.polyline(pts, colour, 2.5 if key == "al" else 2, dash)
        for x, y in pts:
            svg.marker(x, y, colour, shape, hollow=hollow, r=4)
    al, cost = dict(s["al"]), dict(s["cost"])
    both = [x for x in xs if x in al and x in cost]
    for x0, x1 in zip(both, both[1:]):
        d0, d1 = al[x0] - cost[x0], al[x1] - cost[x1]
        if xs.index(x1) != xs.index(x0) + 1 or (d0 >= 0) == (d1 >= 0):
            continue
        t = d0 / (d0 - d1)  # where the two drawn segments cross
        xc = 10 ** (math.log10(x0) + t * math.log10(x1 / x0)) if log else x0 + t * (x1 - x0)
        yc = al[x0] + t * (al[x1] - al[x0])
        svg.add(f'<circle cx="{coord(sx(xc))}" cy="{coord(sy(yc))}" r="8" fill="none" stroke="{colour}" '
                f'stroke-width="2.5" class="crossover"/>')
        summary.append(f"<li><b>{esc(d)}</b> · <code>{esc(c)}</code>: tokens per step and step cost meet at "
                       f"≈ {xc:.3g} ({'above' if d0 >= 0 else 'below'} it a step costs more than the tokens "
                       "it carries).</li>")
    for x in xs:
        r = m.row(c, d, next(ld for ld in loads if ld.value == x))
        dec = num_or_none(r.speedup_decomposed if r is not None else None)
        res = num_or_none(r.speedup_residual if r is not None else None)
        if r is not None and x in al and x in cost and dec is not None:
            sp = num_or_none(r.speedup_vs_baseline)
            summary.append(
                f"<li><b>{esc(d)}</b> · <code>{esc(c)}</code> @ {esc(load_of(r).label)}: {al[x]:.2f} tokens per "
                f"step ÷ step cost {cost[x]:.2f}× = {dec:.3f}× in decode"
                + (f"; measured {sp:.3f}× (residual {res:.3f})" if sp is not None and res is not None else "")
                + ".</li>")
    return summary


def decomposition_plot(m: Model) -> str:
    plot = "decomposition"
    title = "Tokens per step vs step cost, per data set"
    caption = (
        "Per speculative config and load point: <b>tokens per step</b> (solid, filled dots: "
        "<code>stream_mean_acceptance_length</code>, decode tokens ÷ decode chunks, one chunk per target step) and "
        "<b>step cost</b> (dashed, hollow dots: <code>step_cost_ratio</code> = mean chunk gap ÷ the baseline's time per "
        "decode step at the same load). Their ratio is the decode-phase speed-up (<code>speedup_decomposed</code>); the measured "
        "<b>speed-up</b> (dotted, diamonds: <code>speedup_vs_baseline</code>) is that times the residual (prefill/TTFT, "
        "queueing, scheduling). Speculation pays off in decode while tokens per step stay above the step cost; the "
        "crossover (○) is where the two curves meet, linearly interpolated between two measured loads (in log(load) "
        "on a logarithmic axis). Values that are null in results.json are listed as “not measured”.")
    panels, summary = [], []
    pw, ph = 560.0, 330.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 74.0
    for d in m.datasets:
        loads = panel_loads(m, d)
        if not loads:
            continue
        xs = [ld.value for ld in loads if ld.value is not None]
        log = len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 4
        sx = Scale(min(xs), max(xs), left + 24, pw - right - 24, log=log)
        vals: list[float] = [1.0]
        missing: list[str] = []
        series = {c: found for c in m.spec_configs if (found := _series(m, c, d, loads, xs, vals, missing))}
        if not series:
            continue
        lo, hi, yt = linear_axis(max(min(vals) * 0.9, 0.0), max(vals) * 1.05, 5)
        sy = Scale(lo, hi, ph - bottom, top)
        what = "concurrency" if loads[0].kind == "concurrency" else "request rate (req/s)"
        svg = Svg(pw, ph, f"{title}: {d}", plot)
        svg.text(left, 16, d, size=14, weight="bold")
        y_axis(svg, sy, yt, left, pw - right, "tokens per step / × baseline")
        x_axis(svg, sx, xs, top, ph - bottom, what, fmt=lambda v: f"{v:g}", grid=True)
        svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1, "5 4")
        svg.text(left + 4, sy(1.0) - 4, "1.0", size=11)
        for c, s in series.items():
            summary += _draw(svg, m, sx, sy, c, d, s, loads, xs, log)
        if missing:
            svg.not_measured(left, ph - 14, "; ".join(missing), size=12, listing=True)
        panels.append(svg.render())
    if not panels:
        return figure(plot, title, '<p class="na">not measured</p>', caption)
    items = [(esc(c), m.colour[c], "plain", "") for c in m.spec_configs]
    items += [("tokens per step", MUTED, "line", ""), ("step cost (× baseline)", MUTED, "hollow-line", "6 4"),
              ("speed-up", MUTED, "marker", "")]
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + (f'<ul class="crossovers">{"".join(summary)}</ul>' if summary else ""))
    return figure(plot, title, body, caption)
