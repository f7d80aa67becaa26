"""SVG primitives for the HTML report: an SVG builder, scales, "nice" ticks, axes, legends.

Hand-written so the report needs no plotting library, script or external file; every string
that reaches the markup goes through ``esc``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

NOT_MEASURED = "not measured"
FONT = 13
INK, MUTED, GRID, AXIS = "#1a1a1a", "#555555", "#e3e3e3", "#767676"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def coord(v: float) -> str:
    """A coordinate as SVG text: one decimal at most, no trailing zeros."""
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
        self.add(f'<line x1="{coord(x1)}" y1="{coord(y1)}" x2="{coord(x2)}" y2="{coord(y2)}" stroke="{stroke}" '
                 f'stroke-width="{width}"{d}/>')

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str = "none", extra: str = "") -> None:
        self.add(f'<rect x="{coord(x)}" y="{coord(y)}" width="{coord(max(w, 0))}" height="{coord(max(h, 0))}" fill="{fill}" '
                 f'stroke="{stroke}"{extra}/>')

    def text(self, x: float, y: float, s: Any, anchor: str = "start", size: float = FONT, fill: str = INK,
             weight: str = "", italic: bool = False, rotate: float | None = None, cls: str = "") -> None:
        attrs = f'x="{coord(x)}" y="{coord(y)}" font-size="{size}" fill="{fill}" text-anchor="{anchor}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if italic:
            attrs += ' font-style="italic"'
        if rotate is not None:
            attrs += f' transform="rotate({rotate} {coord(x)} {coord(y)})"'
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
        p = " ".join(f"{coord(x)},{coord(y)}" for x, y in pts)
        self.add(f'<polyline points="{p}" fill="none" stroke="{stroke}" stroke-width="{width}" '
                 f'stroke-linejoin="round"{d}/>')

    def marker(self, x: float, y: float, colour: str, shape: str = "circle", hollow: bool = False, r: float = 4.5) -> None:
        fill = "#ffffff" if hollow else colour
        if shape == "diamond":
            self.add(f'<path d="M{coord(x)},{coord(y - r - 1)} L{coord(x + r + 1)},{coord(y)} L{coord(x)},{coord(y + r + 1)} '
                     f'L{coord(x - r - 1)},{coord(y)} Z" fill="{fill}" stroke="{colour}" stroke-width="1.8"/>')
        else:
            self.add(f'<circle cx="{coord(x)}" cy="{coord(y)}" r="{r}" fill="{fill}" stroke="{colour}" stroke-width="1.8"/>')

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

    def series(self, slots: Sequence[Any], pts: Sequence[tuple[Any, float, Any]], sx: Callable[[Any], float],
               sy: Callable[[float], float], colour: str, dash: str, *, clip: tuple[float, float], jitter: float = 0.0,
               width: float = 2, cap: float = 4, r: float = 4.5) -> None:
        """One config's values (slot, value, CI or None) over ordered slots: a line that breaks where a slot
        has no value (a not-measured point is never bridged), an error bar per interval clipped to the
        axis, a marker per value."""
        at: dict[Any, tuple[Any, float, Any]] = {}
        for p in pts:
            at.setdefault(p[0], p)
        segs: list[list[tuple[float, float]]] = []
        cur: list[tuple[float, float]] = []
        for s in slots:
            if s in at:
                cur.append((sx(s) + jitter, sy(at[s][1])))
            elif cur:
                segs.append(cur)
                cur = []
        segs.append(cur)
        for seg in segs:
            if len(seg) > 1:
                self.polyline(seg, colour, width, dash)
        lo, hi = clip
        for s, v, iv in pts:
            if iv:
                self.whisker(sy(max(iv[0], lo)), sy(min(iv[1], hi)), sx(s) + jitter, colour, cap=cap, vertical=True)
            self.marker(sx(s) + jitter, sy(v), colour, r=r)

    def render(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-plot="{esc(self.plot)}" role="img" '
                f'viewBox="0 0 {coord(self.width)} {coord(self.height)}" width="{coord(self.width)}" '
                f'height="{coord(self.height)}"><title>{esc(self.title)}</title>' + "".join(self.parts) + "</svg>")


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
