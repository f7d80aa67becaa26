"""Trend plot: speed-up and acceptance length of each config across the complete runs of a suite.

One panel per data set (and load point, when a suite sweeps), a line per config, runs in order of
start time. Only complete runs are drawn (an interrupted run's numbers are not comparable); a value
null in a run's results is listed "not measured" under its panel and breaks the line, never 0."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from ...schemas.cell import LoadPoint, load_of
from ...schemas.meta import RunMeta
from ...schemas.row import ResultRow
from ..model import Model
from ..svg import (
    INK,
    MUTED,
    Scale,
    Svg,
    empty_plot,
    esc,
    figure,
    legend,
    linear_axis,
    y_axis,
)
from .common import ci_of

PLOT = "trend"


METRICS = (("speedup_vs_baseline", "speed-up (×)", "Speed-up over the baseline"),
           ("mean_acceptance_length", "acceptance length (tokens/step)", "Acceptance length"))


MAX_X_LABELS = 6


@dataclass(frozen=True)
class TrendRun:
    """One complete run of the suite: when it started, what to call it, its result rows."""

    started: dt.datetime | None
    name: str
    rows: Sequence[ResultRow]


def _time_label(started: dt.datetime | None) -> str:
    return "start unknown" if started is None else started.astimezone(dt.UTC).strftime("%m-%d %H:%M")


def _panel(title: str, metric: str, axis: str, runs: Sequence[TrendRun], m: Model, dataset: str, load: LoadPoint,
           configs: Sequence[str]) -> str:
    pw, ph = 440.0, 290.0
    left, right, top, bottom = 62.0, 18.0, 30.0, 66.0
    n = len(runs)
    sx = Scale(0, max(n - 1, 1), left + 20, pw - right - 20)
    series: dict[str, list[tuple[int, float, tuple[float, float] | None]]] = {}
    missing: list[str] = []
    values: list[float] = [1.0] if metric == "speedup_vs_baseline" else []
    for c in configs:
        pts = []
        for i, run in enumerate(runs):
            r = next((x for x in run.rows if x.run == c and x.dataset == dataset and load_of(x) == load), None)
            v = None if r is None else r.get(metric)
            if r is None or not isinstance(v, (int, float)) or isinstance(v, bool):
                missing.append(f"{c} @ {_time_label(run.started)}")
                continue
            iv = ci_of(r, metric)
            pts.append((i, float(v), iv))
            values.append(float(v))
            if iv:
                values += list(iv)
        series[c] = pts
    heading = dataset if len(m.loads) < 2 else f"{dataset} · {load.label}"
    if not values:
        return empty_plot(PLOT, f"{title.lower()}: {heading}", pw, 90)
    lo, hi, ticks = linear_axis(max(min(values) * 0.95, 0.0), max(values) * 1.03, 5)
    sy = Scale(lo, hi, ph - bottom, top)
    svg = Svg(pw, ph, f"{title} across runs: {heading}", PLOT)
    svg.text(left, 16, heading, size=14, weight="bold")
    y_axis(svg, sy, ticks, left, pw - right, axis)
    step = max(1, -(-n // MAX_X_LABELS))
    for i, run in enumerate(runs):
        x = sx(i)
        svg.line(x, top, x, ph - bottom, "#f0f0f0")
        if i % step == 0 or i == n - 1:
            svg.text(x, ph - bottom + 16, _time_label(run.started), anchor="middle", size=11, fill=MUTED)
    svg.line(left, ph - bottom, pw - right, ph - bottom, INK)
    svg.text((left + pw - right) / 2, ph - bottom + 34, "run start (UTC), oldest → newest", anchor="middle", size=12)
    if metric == "speedup_vs_baseline":
        svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1.2, "5 4")
    for k, (c, pts) in enumerate(series.items()):
        colour, dash = m.colour[c], m.dash[c]
        jitter = (k - (len(series) - 1) / 2) * 5
        svg.series(range(n), pts, sx, sy, colour, dash, clip=(lo, hi), jitter=jitter, width=2.2, cap=3, r=3.8)
    if missing:
        svg.not_measured(left, ph - 10, "; ".join(missing), size=11, listing=True)
    return svg.render()


def trend_plot(suite: str, runs: Sequence[TrendRun], meta: RunMeta | None = None) -> str:
    """The trend figure of one suite over its complete runs (chronological)."""
    title = f"Trend across runs: {suite}"
    caption = (
        "Each point is one cell of one <b>complete</b> run of this suite (interrupted, failed and unfinished runs "
        "are left out), runs equally spaced in order of start time. Top: <b>speedup_vs_baseline</b> (output tokens/s "
        "÷ the baseline's in the same run) with its 95% CI <code>ci95.speedup_vs_baseline</code> when the run has "
        "one; the dashed line is 1.0. Bottom: <b>mean_acceptance_length</b> (1 + accepted ÷ drafts, from the "
        "engine's counters). A value null in a run is listed as “not measured” under its panel and breaks the line.")
    if len(runs) < 2:
        why = "one complete run so far: a trend needs two" if runs else "no complete run"
        return figure(PLOT, title, empty_plot(PLOT, why), caption)
    rows = [r for run in runs for r in run.rows]
    m = Model(rows, meta)
    blocks = []
    for metric, axis, name in METRICS:
        configs = m.spec_configs
        if not configs:
            blocks.append(f"<h4>{esc(name)}</h4>" + empty_plot(PLOT, "no speculative config in these runs"))
            continue
        panels = [_panel(name, metric, axis, runs, m, d, ld, configs) for d in m.datasets for ld in m.loads_of(d)]
        blocks.append(f"<h4>{esc(name)}</h4>" + '<div class="panels">'
                      + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels) + "</div>")
    items = [(esc(c), m.colour[c], "line", m.dash[c]) for c in m.spec_configs]
    runs_list = ", ".join(esc(f"{_time_label(r.started)} {r.name}") for r in runs)
    body = legend(items) + "".join(blocks) + f'<p class="notes">Runs drawn: {runs_list}.</p>'
    return figure(PLOT, title, body, caption)
