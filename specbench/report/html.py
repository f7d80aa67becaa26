"""One self-contained HTML report: the comparison table and inline-SVG plots, no network needed.

Everything is drawn here as SVG markup (no plotting library, no script, no external font or
stylesheet), so the file can be mailed, attached to a PR or opened offline. Every plot carries a
caption saying how its numbers were computed; a value that is null in ``results.json`` is written
"not measured" on the plot, never drawn as 0.

Plots:

- speed-up per data set (and load point) with 95% confidence intervals
- speed-up vs concurrency (or request rate) with the crossover below 1.0 marked, for sweeps
- acceptance by draft position per config (server counters, and the stream-derived estimate)
- per-category acceptance length (from each row's ``categories``)
- latency CDFs (TTFT, per-token ITL, TPOT) of baseline vs spec configs, from ``requests.jsonl``
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics import token_itl, tpot
from ..records import RequestRecord
from .load import load_run
from .render import COLUMNS, DASH

Record = dict[str, Any]

NOT_MEASURED = "not measured"
#: baseline first (black), then the Okabe–Ito colours, which stay distinct under colour-vision deficiency
BASELINE_COLOUR = "#000000"
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
DASHES = ["", "7 4", "2 3", "9 3 2 3"]
FONT = 13
INK, MUTED, GRID, AXIS = "#1a1a1a", "#555555", "#e3e3e3", "#767676"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


# --------------------------------------------------------------------------------------------
# the data model: configs, cells and load points
# --------------------------------------------------------------------------------------------

def _unique(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def baseline_name(records: Sequence[Record], meta: dict[str, Any] | None) -> str | None:
    """The suite's baseline: the config marked ``baseline: true``, else the one named "baseline"."""
    raw = (((meta or {}).get("suite") or {}).get("raw") or {})
    marked = [c.get("name") for c in raw.get("configs") or [] if isinstance(c, dict) and c.get("baseline")]
    runs = _unique(r.get("run") for r in records)
    if marked and marked[0] in runs:
        return marked[0]
    if "baseline" in runs:
        return "baseline"
    return next((r["run"] for r in records if r.get("method") == "baseline"), None)


@dataclass(frozen=True)
class Load:
    """A load point: closed-loop concurrency, or an open-loop request rate."""

    kind: str  # "concurrency" | "rate"
    value: float | None

    @property
    def label(self) -> str:
        if self.value is None:
            return "load not recorded"
        if self.kind == "rate":
            return f"{self.value:g} req/s"
        return f"c={self.value:g}"

    def sort_key(self) -> tuple:
        return (self.kind, -1 if self.value is None else self.value)


def load_of(r: Record) -> Load:
    if r.get("request_rate") is not None:
        return Load("rate", float(r["request_rate"]))
    c = r.get("concurrency")
    return Load("concurrency", None if c is None else float(c))


class Model:
    """Records grouped the way every plot needs them."""

    def __init__(self, records: Sequence[Record], meta: dict[str, Any] | None) -> None:
        self.records = list(records)
        self.meta = meta or {}
        self.baseline = baseline_name(self.records, self.meta)
        self.configs = _unique(r["run"] for r in self.records)
        if self.baseline in self.configs:  # baseline first, then the suite's order
            self.configs.remove(self.baseline)
            self.configs.insert(0, self.baseline)
        self.spec_configs = [c for c in self.configs if c != self.baseline and not self._is_plain(c)]
        self.datasets = _unique(r["dataset"] for r in self.records)
        self.loads = sorted(_unique(load_of(r) for r in self.records), key=Load.sort_key)
        self.colour = {}
        self.dash = {}
        i = 0
        for c in self.configs:
            if c == self.baseline:
                self.colour[c], self.dash[c] = BASELINE_COLOUR, ""
            else:
                self.colour[c] = PALETTE[i % len(PALETTE)]
                self.dash[c] = DASHES[(i // len(PALETTE)) % len(DASHES)]
                i += 1

    def _is_plain(self, config: str) -> bool:
        rows = [r for r in self.records if r["run"] == config]
        return all(r.get("method") == "baseline" and r.get("num_speculative_tokens") is None for r in rows)

    def row(self, config: str, dataset: str, load: Load) -> Record | None:
        return next((r for r in self.records if r["run"] == config and r["dataset"] == dataset
                     and load_of(r) == load), None)

    def loads_of(self, dataset: str) -> list[Load]:
        return [ld for ld in self.loads if any(r["dataset"] == dataset and load_of(r) == ld for r in self.records)]

    def sweep_kind(self) -> str | None:
        """The load dimension swept with several values, if any."""
        for kind in ("concurrency", "rate"):
            if len([ld for ld in self.loads if ld.kind == kind and ld.value is not None]) > 1:
                return kind
        return None


# --------------------------------------------------------------------------------------------
# SVG primitives
# --------------------------------------------------------------------------------------------

def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


class Svg:
    def __init__(self, width: float, height: float, title: str, plot: str) -> None:
        self.width, self.height, self.title, self.plot = width, height, title, plot
        self.parts: list[str] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = AXIS, width: float = 1,
             dash: str = "") -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}" '
                 f'stroke-width="{width}"{d}/>')

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str = "none", extra: str = "") -> None:
        self.add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0))}" height="{_f(max(h, 0))}" fill="{fill}" '
                 f'stroke="{stroke}"{extra}/>')

    def text(self, x: float, y: float, s: Any, anchor: str = "start", size: float = FONT, fill: str = INK,
             weight: str = "", italic: bool = False, rotate: float | None = None, cls: str = "") -> None:
        attrs = f'x="{_f(x)}" y="{_f(y)}" font-size="{size}" fill="{fill}" text-anchor="{anchor}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if italic:
            attrs += ' font-style="italic"'
        if rotate is not None:
            attrs += f' transform="rotate({rotate} {_f(x)} {_f(y)})"'
        if cls:
            attrs += f' class="{cls}"'
        self.add(f"<text {attrs}>{esc(s)}</text>")

    def not_measured(self, x: float, y: float, detail: str = "", anchor: str = "start", size: float = FONT,
                     listing: bool = False) -> None:
        """"not measured", with a reason in parentheses, or (listing) followed by what was not measured."""
        if detail:
            detail = f": {detail}" if listing else f" ({detail})"
        self.text(x, y, NOT_MEASURED + detail, anchor=anchor, size=size, fill=MUTED, italic=True, cls="not-measured")

    def polyline(self, pts: Sequence[tuple[float, float]], stroke: str, width: float = 2, dash: str = "") -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        p = " ".join(f"{_f(x)},{_f(y)}" for x, y in pts)
        self.add(f'<polyline points="{p}" fill="none" stroke="{stroke}" stroke-width="{width}" '
                 f'stroke-linejoin="round"{d}/>')

    def marker(self, x: float, y: float, colour: str, shape: str = "circle", hollow: bool = False, r: float = 4.5) -> None:
        fill = "#ffffff" if hollow else colour
        if shape == "diamond":
            self.add(f'<path d="M{_f(x)},{_f(y - r - 1)} L{_f(x + r + 1)},{_f(y)} L{_f(x)},{_f(y + r + 1)} '
                     f'L{_f(x - r - 1)},{_f(y)} Z" fill="{fill}" stroke="{colour}" stroke-width="1.8"/>')
        else:
            self.add(f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{r}" fill="{fill}" stroke="{colour}" stroke-width="1.8"/>')

    def whisker(self, x1: float, x2: float, y: float, colour: str = INK, cap: float = 5, vertical: bool = False) -> None:
        """An error bar from x1 to x2 at y (or, vertical, from y=x1 to y=x2 at x=y)."""
        if vertical:
            self.line(y, x1, y, x2, colour, 1.6)
            self.line(y - cap, x1, y + cap, x1, colour, 1.6)
            self.line(y - cap, x2, y + cap, x2, colour, 1.6)
        else:
            self.line(x1, y, x2, y, colour, 1.6)
            self.line(x1, y - cap, x1, y + cap, colour, 1.6)
            self.line(x2, y - cap, x2, y + cap, colour, 1.6)

    def render(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-plot="{esc(self.plot)}" role="img" '
                f'viewBox="0 0 {_f(self.width)} {_f(self.height)}" width="{_f(self.width)}" '
                f'height="{_f(self.height)}"><title>{esc(self.title)}</title>' + "".join(self.parts) + "</svg>")


def text_width(s: str, size: float = FONT) -> float:
    return 0.6 * size * len(s)


@dataclass
class Scale:
    lo: float
    hi: float
    a: float  # pixel of lo
    b: float  # pixel of hi
    log: bool = False

    def __call__(self, v: float) -> float:
        if self.log:
            v = max(v, self.lo)
            t = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo) if self.hi != self.lo else 0.5
        return self.a + t * (self.b - self.a)


def nice_step(span: float, n: int) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    step = nice_step(hi - lo, n)
    start = math.ceil(lo / step - 1e-9) * step
    ticks, v = [], start
    while v <= hi + step * 1e-6:
        ticks.append(round(v, 10))
        v += step
    return ticks


def linear_axis(lo: float, hi: float, n: int = 5) -> tuple[float, float, list[float]]:
    """A domain covering [lo, hi] that starts and ends on a tick, and its ticks."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = nice_step(hi - lo, n)
    a, b = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    ticks = [round(a + i * step, 10) for i in range(int(round((b - a) / step)) + 1)]
    return round(a, 10), round(b, 10), ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                out.append(v)
    if len(out) > 9:
        out = [v for v in out if str(v).lstrip("0.").startswith("1")]
    return out


def tick_label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def x_axis(svg: Svg, sx: Scale, ticks: Sequence[float], y0: float, y1: float, label: str,
           fmt: Callable[[float], str] = tick_label, grid: bool = True) -> None:
    for t in ticks:
        x = sx(t)
        if grid:
            svg.line(x, y0, x, y1, GRID)
        svg.line(x, y1, x, y1 + 4, AXIS)
        svg.text(x, y1 + 17, fmt(t), anchor="middle", size=12, fill=MUTED)
    svg.line(sx.a, y1, sx.b, y1, AXIS)
    svg.text((sx.a + sx.b) / 2, y1 + 36, label, anchor="middle", size=FONT, fill=INK)


def y_axis(svg: Svg, sy: Scale, ticks: Sequence[float], x0: float, x1: float, label: str,
           fmt: Callable[[float], str] = tick_label) -> None:
    for t in ticks:
        y = sy(t)
        svg.line(x0, y, x1, y, GRID)
        svg.text(x0 - 6, y + 4, fmt(t), anchor="end", size=12, fill=MUTED)
    svg.line(x0, sy.a, x0, sy.b, AXIS)
    mid = (sy.a + sy.b) / 2
    svg.text(14, mid, label, anchor="middle", size=FONT, rotate=-90)


# --------------------------------------------------------------------------------------------
# HTML helpers
# --------------------------------------------------------------------------------------------

def legend(items: Sequence[tuple[str, str, str, str]]) -> str:
    """items: (label, colour, kind, dash) with kind "line", "bar", "marker", "hollow-line" or "none"."""
    out = []
    for label, colour, kind, dash in items:
        if kind == "bar":
            swatch = f'<rect x="2" y="2" width="24" height="10" fill="{colour}"/>'
        elif kind == "marker":
            swatch = (f'<line x1="2" y1="7" x2="26" y2="7" stroke="{INK}" stroke-width="1.6"/>'
                      f'<path d="M14,1.5 L19.5,7 L14,12.5 L8.5,7 Z" fill="{colour}" stroke="{colour}"/>')
        elif kind == "none":
            swatch = ""
        elif kind == "plain":
            d = f' stroke-dasharray="{dash}"' if dash else ""
            swatch = f'<line x1="1" y1="7" x2="27" y2="7" stroke="{colour}" stroke-width="2.5"{d}/>'
        else:
            d = f' stroke-dasharray="{dash}"' if dash else ""
            dot = (f'<circle cx="14" cy="7" r="3.5" fill="{"#fff" if kind == "hollow-line" else colour}" '
                   f'stroke="{colour}" stroke-width="1.6"/>') if kind in ("line", "hollow-line") else ""
            swatch = f'<line x1="1" y1="7" x2="27" y2="7" stroke="{colour}" stroke-width="2.5"{d}/>{dot}'
        sw = f'<svg width="28" height="14" viewBox="0 0 28 14" aria-hidden="true">{swatch}</svg>' if swatch else ""
        out.append(f"<li>{sw}<span>{label}</span></li>")
    return '<ul class="legend">' + "".join(out) + "</ul>"


def figure(plot: str, title: str, body: str, caption: str) -> str:
    return (f'<figure class="plot" id="fig-{plot}" data-plot="{plot}"><h3>{esc(title)}</h3>{body}'
            f"<figcaption>{caption}</figcaption></figure>")


def empty_plot(plot: str, why: str, width: float = 640, height: float = 90) -> str:
    svg = Svg(width, height, f"{plot}: not measured", plot)
    svg.rect(0.5, 0.5, width - 1, height - 1, "#fafafa", "#cccccc")
    svg.not_measured(width / 2, height / 2 + 5, why, anchor="middle")
    return svg.render()


def nm_html(detail: str = "") -> str:
    return f'<span class="na">{NOT_MEASURED}{" (" + esc(detail) + ")" if detail else ""}</span>'


# --------------------------------------------------------------------------------------------
# comparison table
# --------------------------------------------------------------------------------------------

def _ci_cell(r: Record, key: str) -> str:
    ci = (r.get("ci95") or {}).get(key)
    return f"{ci[0]:.3f}–{ci[1]:.3f}" if ci and None not in ci else DASH


def _failed(r: Record) -> str:
    if r.get("status") in ("failed", "interrupted"):
        return f"cell {r['status']}"
    return str(r.get("failed_requests") or 0)


def table_columns(records: Sequence[Record]) -> list[tuple[str, Callable[[Record], str]]]:
    """The markdown table's columns (``render.COLUMNS``) plus the sweep extras it adds for our runs.

    Paired speed-up is left to the speed-up plot, which draws it with its interval.
    """
    cols = list(COLUMNS)
    names = [h for h, _ in cols]
    loads = {load_of(r) for r in records}
    if len(loads) > 1:
        if all(ld.kind == "concurrency" for ld in loads):
            cols.insert(names.index("Run") + 1, ("Conc", lambda r: DASH if r.get("concurrency") is None
                                                 else str(r["concurrency"])))
        else:
            cols.insert(names.index("Run") + 1, ("Load", lambda r: load_of(r).label))
    if any((r.get("ci95") or {}).get("speedup_vs_baseline") for r in records):
        at = [h for h, _ in cols].index("Speedup") + 1
        cols.insert(at, ("Speedup 95% CI", lambda r: _ci_cell(r, "speedup_vs_baseline")))
    if any(r.get("fidelity_identical") is not None for r in records):
        cols.append(("Same output", lambda r: DASH if r.get("fidelity_identical") is None
                     else f"{r['fidelity_identical'] * 100:.2f}%"))
    if any(r.get("status") not in (None, "ok") or r.get("failed_requests") for r in records):
        cols.append(("Failed", _failed))
    return cols


def _cell_html(text: str) -> str:
    if text == DASH or (text and set(text) <= {"-", "/", DASH}):
        return f'<td class="na" title="{NOT_MEASURED}">{DASH}</td>'
    shown = esc(text).replace(DASH, f'<span class="na" title="{NOT_MEASURED}">{DASH}</span>')
    return f"<td>{shown}</td>"


def table_html(m: Model) -> str:
    cols = table_columns(m.records)
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h, _ in cols)
    order = {c: i for i, c in enumerate(m.configs)}
    dorder = {d: i for i, d in enumerate(m.datasets)}
    rows = sorted(m.records, key=lambda r: (dorder[r["dataset"]], load_of(r).sort_key(), order[r["run"]]))
    body = []
    for r in rows:
        cls = []
        if r["run"] == m.baseline:
            cls.append("baseline")
        if r.get("status") not in (None, "ok"):
            cls.append("bad")
        c = f' class="{" ".join(cls)}"' if cls else ""
        body.append(f"<tr{c}>" + "".join(_cell_html(cell(r)) for _, cell in cols) + "</tr>")
    return (f'<div class="table-wrap"><table class="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


# --------------------------------------------------------------------------------------------
# speed-up per data set
# --------------------------------------------------------------------------------------------

def _interval(r: Record, key: str) -> tuple[float, float] | None:
    ci = (r.get("ci95") or {}).get(key)
    if ci and len(ci) == 2 and None not in ci:
        return float(ci[0]), float(ci[1])
    if key == "paired_speedup" and r.get("paired_speedup_ci_low") is not None and r.get("paired_speedup_ci_high") is not None:
        return float(r["paired_speedup_ci_low"]), float(r["paired_speedup_ci_high"])
    return None


def _why_missing(r: Record | None, what: str = "") -> str:
    if r is None:
        return "no such cell"
    if r.get("status") == "failed":
        return "cell failed"
    if r.get("status") == "interrupted":
        return "interrupted"
    return what


def speedup_plot(m: Model) -> str:
    plot = "speedup"
    title = "Speed-up over the baseline, per data set"
    methods = _unique(r["speedup_ci_method"] for r in m.records if r.get("speedup_ci_method"))
    how = ("; here: " + "; ".join(esc(x) for x in methods)) if methods else (
        "; Student-t over per-repeat ratios when the run has repeats")
    caption = (
        f"Bar: <b>speedup_vs_baseline</b> = output tokens/s of the config ÷ the baseline's "
        f"(<code>{esc(m.baseline)}</code>) on the same data set and load point; the black error bar is its 95% "
        f"confidence interval <code>ci95.speedup_vs_baseline</code>, computed as each row's "
        f"<code>speedup_ci_method</code> says{how}. “no CI” = the row has none. Diamond: <b>paired speed-up</b> = Σtokens/Σlatency of the config ÷ the same "
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
    has_paired = any(r.get("paired_speedup") is not None for r in m.records)
    values: list[float] = [1.0]
    for kind, item in rows:
        if kind == "bar" and item[1] is not None:
            r = item[1]
            for v in (r.get("speedup_vs_baseline"), r.get("paired_speedup")):
                if v is not None:
                    values.append(v)
            for key in ("speedup_vs_baseline", "paired_speedup"):
                iv = _interval(r, key)
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
            sp = None if r is None else r.get("speedup_vs_baseline")
            note_x = label_w + plot_w + 10
            if sp is None:
                svg.not_measured(label_w + 6, y + 15, _why_missing(r))
            else:
                colour = m.colour[config]
                svg.rect(sx(0), y + 6, sx(sp) - sx(0), 14, colour, extra=' class="bar"')
                iv = _interval(r, "speedup_vs_baseline")
                if iv:
                    svg.whisker(sx(iv[0]), sx(iv[1]), y + 13, INK, cap=5)
                svg.text(note_x, y + 17, f"{sp:.3f}×" + (f"  [{iv[0]:.2f}–{iv[1]:.2f}]" if iv else "  (no CI)"),
                         size=12)
            ps = None if r is None else r.get("paired_speedup")
            piv = None if r is None else _interval(r, "paired_speedup")
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
        xs = [ld.value for ld in loads]
        log = min(xs) > 0 and max(xs) / min(xs) >= 4
        sx = Scale(min(xs), max(xs), left + 24, pw - right - 24, log=log)
        vals = [1.0]
        series: dict[str, list[tuple[float, float, tuple[float, float] | None]]] = {}
        missing: list[str] = []
        for c in m.spec_configs:
            pts = []
            for ld in loads:
                r = m.row(c, d, ld)
                v = None if r is None else r.get("speedup_vs_baseline")
                if v is None:
                    missing.append(f"{c} @ {ld.label}" + (f" ({_why_missing(r)})" if _why_missing(r) else ""))
                    continue
                iv = _interval(r, "speedup_vs_baseline")
                pts.append((ld.value, float(v), iv))
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
            # a gap in the series (a not-measured point) breaks the line
            segs, cur = [], []
            present = {p[0] for p in pts}
            for x in xs:
                if x in present:
                    p = next(q for q in pts if q[0] == x)
                    cur.append((sx(p[0]) + jitter, sy(p[1])))
                elif cur:
                    segs.append(cur)
                    cur = []
            if cur:
                segs.append(cur)
            for seg in segs:
                if len(seg) > 1:
                    svg.polyline(seg, colour, 2.5, dash)
            for x, v, iv in pts:
                if iv:
                    svg.whisker(sy(max(iv[0], lo)), sy(min(iv[1], hi)), sx(x) + jitter, colour, cap=4, vertical=True)
                svg.marker(sx(x) + jitter, sy(v), colour)
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
                    svg.add(f'<circle cx="{_f(cx)}" cy="{_f(sy(1.0))}" r="7" fill="none" stroke="{colour}" '
                            f'stroke-width="2.5" class="crossover"/>')
                    svg.add(f'<text x="{_f(cx - 10)}" y="{_f(sy(1.0) + 20)}" font-size="12" font-weight="bold" '
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
    per = r.get("acceptance_per_position")
    if per:
        return list(per)
    out: list[float | None] = []
    i = 1
    while f"acceptance_pos_{i}" in r:
        out.append(r[f"acceptance_pos_{i}"])
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
        num = sum(lst[i] * w for lst, w in lists if i < len(lst) and lst[i] is not None)
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
            rows = [r for r in m.records if r["run"] == c and r["dataset"] == d]
            counters, _ = _pool(rows, _per_position, "spec_drafts")
            stream, _ = _pool(rows, lambda r: r.get("stream_acceptance_joint"), "stream_steps")
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
    disagree = [r for r in m.records if r.get("acceptance_sources_agree") is False]
    if disagree:
        cells = "; ".join(
            f"<code>{esc(r['run'])}</code> on {esc(r['dataset'])} {esc(load_of(r).label)}: counters "
            f"{r['mean_acceptance_length']:.2f} vs stream {r['stream_mean_acceptance_length']:.2f} tokens/step"
            for r in disagree if r.get("mean_acceptance_length") is not None
            and r.get("stream_mean_acceptance_length") is not None)
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
        for cat, v in (r.get("categories") or {}).items():
            acc.setdefault(cat, []).append((v.get("stream_mean_acceptance_length"), v.get("output_tokens") or 0,
                                            v.get("requests") or 0))
    out = {}
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
    if not any(r.get("categories") for r in m.records):
        return figure(plot, title, empty_plot(plot, "no row has a categories breakdown; its prompts carry no category"),
                      caption)
    configs = m.spec_configs or m.configs
    blocks = []
    for d in m.datasets:
        per = {c: _pooled_category([r for r in m.records if r["run"] == c and r["dataset"] == d]) for c in configs}
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
    y = top
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
    measured = [r for r in requests if r.phase == "measure"]
    groups: dict[tuple[str, int], dict[str, list[RequestRecord]]] = {}
    for r in measured:
        groups.setdefault((r.dataset, r.concurrency or 0), {}).setdefault(r.config, []).append(r)
    if not groups:
        return figure(plot, title, empty_plot(plot, "no measured request in requests.jsonl"), caption)
    dorder = {d: i for i, d in enumerate(m.datasets)}
    order = {c: i for i, c in enumerate(m.configs)}
    blocks = []
    pw, ph = 420.0, 270.0
    left, right, top, bottom = 56.0, 14.0, 28.0, 52.0
    for (d, conc) in sorted(groups, key=lambda k: (dorder.get(k[0], 99), k[1])):
        by_config = groups[(d, conc)]
        configs = sorted(set(by_config) | {c for c in m.configs if m.row(c, d, Load("concurrency", float(conc)))},
                         key=lambda c: order.get(c, 99))
        samples = {c: samples_ms(by_config.get(c, [])) for c in configs}
        width = 3 * pw
        svg = Svg(width, ph, f"latency CDFs: {d} c={conc}", plot)
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
                items.append((f"{esc(c)}: {nm_html(_why_missing(m.row(c, d, Load('concurrency', float(conc)))) or 'no successful request')}",
                              m.colour[c], "plain", m.dash[c]))
            else:
                items.append((f"{esc(c)} <small>(n={n} requests)</small>", m.colour[c], "plain", m.dash[c]))
        if absent:
            svg.height = ph + 20
            svg.not_measured(8, ph + 12, ", ".join(absent) + " (no successful request)", size=12, listing=True)
        blocks.append(f'<div class="cdf-block"><h4>{esc(d)} · concurrency {conc}</h4>{legend(items)}'
                      f'<div class="svg-wrap">{svg.render()}</div></div>')
    return figure(plot, title, "".join(blocks), caption)


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------

CSS = """
:root{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:#1a1a1a;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",Arial,sans-serif}
main{max-width:1400px;margin:0 auto;padding:20px 16px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:32px 0 10px;padding-bottom:4px;border-bottom:2px solid #e3e3e3}
h3{font-size:16px;margin:0 0 8px}
h4{font-size:14px;margin:12px 0 4px}
code{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.92em;background:#f3f3f3;padding:0 3px;border-radius:3px}
.meta{color:#444;margin:0 0 4px}
.meta span{margin-right:14px;white-space:nowrap;display:inline-block}
nav{margin:12px 0 0;font-size:14px}
nav a{color:#0b5cad;margin-right:14px}
.table-wrap{overflow-x:auto;border:1px solid #dcdcdc;border-radius:4px}
table.results{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums;width:100%}
table.results th,table.results td{padding:5px 6px;border-bottom:1px solid #e8e8e8;text-align:right;white-space:nowrap}
table.results th{white-space:normal;vertical-align:bottom;min-width:3.5em}
table.results th:nth-child(-n+2),table.results td:nth-child(-n+2){text-align:left}
table.results thead th{background:#f2f2f2;position:sticky;top:0;font-weight:600}
table.results tr.baseline td{background:#f7f7f7}
table.results tr.bad td{background:#fdecea}
td.na,.na{color:#666;font-style:italic}
figure.plot{margin:0 0 22px;padding:14px 16px 10px;border:1px solid #dcdcdc;border-radius:4px;background:#fff}
figcaption{font-size:14px;color:#333;margin-top:8px;max-width:1150px}
.svg-wrap{overflow-x:auto}
svg.chart{display:block;max-width:100%;height:auto;font-family:inherit}
.panels{display:flex;flex-wrap:wrap;gap:8px 18px}
ul.legend{list-style:none;padding:0;margin:2px 0 8px;display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px}
ul.legend li{display:flex;align-items:center;gap:6px}
ul.crossovers{font-size:14px;margin:8px 0 0;padding-left:20px}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;vertical-align:-1px;margin-right:3px}
.notes{font-size:14px;color:#333}
.warn{font-size:14px;background:#fff4e0;border-left:4px solid #E69F00;padding:6px 10px;margin:8px 0 0}
footer{margin-top:28px;color:#666;font-size:13px}
"""


def _meta_html(m: Model, meta: dict[str, Any]) -> tuple[str, str]:
    raw = ((meta.get("suite") or {}).get("raw") or {})
    name = (meta.get("suite") or {}).get("name") or raw.get("name") or "specbench results"
    spans = []
    model = raw.get("model") or (meta.get("comparability") or {}).get("model")
    if model:
        spans.append(f"model <b>{esc(model)}</b>")
    engines = _unique(f"{r.get('engine')} {r.get('server_version') or ''}".strip() for r in m.records if r.get("engine"))
    if engines:
        spans.append("engine " + ", ".join(f"<b>{esc(e)}</b>" for e in engines))
    host = meta.get("host") or {}
    if host.get("cpus"):
        spans.append(f"host {esc(host.get('platform', ''))} · {esc(host['cpus'])} CPUs")
    if meta.get("started_at"):
        spans.append(f"started {esc(meta['started_at'])}")
    if meta.get("finished_at"):
        spans.append(f"finished {esc(meta['finished_at'])}")
    comp = meta.get("comparability") or {}
    if comp.get("max_tokens") is not None:
        spans.append(f"max_tokens {esc(comp['max_tokens'])}, temperature {esc(comp.get('temperature'))}")
    if meta.get("merged_from"):
        spans.append("merged from " + ", ".join(f"<code>{esc(p)}</code>" for p in meta["merged_from"]))
    desc = raw.get("description")
    head = (f"<h1>{esc(name)}</h1>" + (f'<p class="meta">{esc(desc)}</p>' if desc else "")
            + f'<p class="meta">{" ".join(f"<span>{s}</span>" for s in spans)}</p>')
    return str(name), head


def render_html(records: list[dict], requests: list[RequestRecord] | None, meta: dict | None) -> str:
    """The whole report as one HTML document (inline CSS and SVG only)."""
    meta = meta or {}
    m = Model(records, meta)
    name, head = _meta_html(m, meta)
    sections: list[tuple[str, str, str]] = []
    sections.append(("table", "Comparison table", table_html(m) + (
        '<p class="notes">— (and - inside Accept p1/p2/p3) = not measured (null in results.json), never 0. Speedup = output tok/s ÷ the baseline\'s '
        "on the same data set and load point (the paired per-prompt speed-up is drawn in the next plot); "
        "Accept p1/p2/p3 = joint acceptance of draft positions 1–3 from server counters.</p>")))
    if m.records:
        sections.append(("speedup", "Speed-up per data set", speedup_plot(m)))
        lp = load_plot(m)
        if lp:
            sections.append(("speedup-load", "Speed-up vs load", lp))
        sections.append(("acceptance-position", "Acceptance by position", acceptance_plot(m)))
        sections.append(("category-acceptance", "Acceptance per category", category_plot(m)))
        sections.append(("latency-cdf", "Latency CDFs", latency_plot(m, requests)))
    nav = "<nav>" + "".join(f'<a href="#sec-{sid}">{esc(t)}</a>' for sid, t, _ in sections) + "</nav>"
    notes = meta.get("notes") or []
    notes_html = ("<h2>Notes</h2><ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>") if notes else ""
    body = "".join(f'<section id="sec-{sid}"><h2>{esc(t)}</h2>{content}</section>' for sid, t, content in sections)
    if not m.records:
        body += f"<p>{nm_html('no result records')}</p>"
    version = meta.get("specbench_version", "")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(name)} — specbench report</title><style>{CSS}</style></head>"
        f"<body><main><header>{head}{nav}</header>{body}{notes_html}"
        f"<footer>Generated by specbench {esc(version)} · one self-contained file: inline SVG, no scripts, no network."
        "</footer></main></body></html>\n")


def read_requests(run_dir: Path) -> list[RequestRecord] | None:
    """``requests.jsonl`` of a run directory; a line cut by a crash ends the file (as RunDir does)."""
    path = run_dir / "requests.jsonl"
    if not path.exists():
        return None
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            out.append(RequestRecord.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            break
    return out


def write_html(run_paths: list[Path], out: Path) -> Path:
    """Render the runs (directories or results.json files) into one HTML file; returns its path.

    ``out`` may be a file or an existing directory (then ``report.html`` inside it).
    """
    runs = [load_run(p) for p in run_paths]
    records = [r for run in runs for r in run.records]
    requests: list[RequestRecord] | None = None
    for run in runs:
        reqs = read_requests(run.path.parent) if run.path else None
        if reqs is not None:
            requests = (requests or []) + reqs
    if len(runs) == 1:
        meta = dict(runs[0].meta)
    else:
        meta = dict(runs[0].meta)
        meta.pop("notes", None)
        meta["merged_from"] = [str(run.path) for run in runs]
    out = Path(out)
    if out.is_dir():
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(records, requests, meta), encoding="utf-8")
    return out
