"""The best K per load of ``specbench tune`` runs."""

from __future__ import annotations

from ...schemas.cell import LoadPoint
from ...schemas.plans import KCell, TuneResult
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
from .common import LOAD_COLOURS


def tune_section(result: TuneResult | None) -> str | None:
    if not result or not result.cells:
        return None
    plot = "tune"
    title = "Speed-up vs K (draft tokens per step), per load"
    caption = (
        "Each line is one load point: speedup_vs_baseline of the config run with K draft tokens (one server per K, "
        "the same prompts), with its 95% CI; K=0 is the baseline (1.0). The filled ring marks the best K; the Ks not "
        f"told apart from it are listed in the table. Told apart by: {esc(result.method)}.")
    groups: dict[tuple[str, str], list[KCell]] = {}
    for cell in result.cells:
        groups.setdefault((cell.dataset, cell.family), []).append(cell)
    all_loads = sorted({c.load_point for c in result.cells}, key=LoadPoint.sort_key)
    colour = {ld: LOAD_COLOURS[i % len(LOAD_COLOURS)] for i, ld in enumerate(all_loads)}
    panels = []
    pw, ph = 560.0, 320.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 60.0
    for (dataset, fam), cells in groups.items():
        ks = sorted({c.k for cell in cells for c in cell.candidates})
        ys = [1.0] + [c.speedup for cell in cells for c in cell.candidates if c.speedup is not None]
        ys += [c.ci[1] for cell in cells for c in cell.candidates if c.ci]
        sx = Scale(min(ks), max(ks), left + 20, pw - right - 20)
        y_lo, y_hi, yt = linear_axis(max(min(ys) * 0.9, 0.0), max(ys) * 1.05, 5)
        sy = Scale(y_lo, y_hi, ph - bottom, top)
        svg = Svg(pw, ph, f"tune: {dataset} {fam}", plot)
        svg.text(left, 16, f"{dataset} · {fam}", size=14, weight="bold")
        y_axis(svg, sy, yt, left, pw - right, "speed-up (×)")
        x_axis(svg, sx, ks, top, ph - bottom, "K (0 = no speculation)", fmt=lambda v: f"{v:g}")
        svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1, "5 4")
        for cell in cells:
            col = colour[cell.load_point]
            pts = [(c.k, c.speedup, c.ci) for c in cell.candidates if c.speedup is not None]
            if len(pts) > 1:
                svg.polyline([(sx(k), sy(s)) for k, s, _ in pts], col, 2.2)
            for k, s, ci in pts:
                if ci:
                    svg.whisker(sy(max(ci[0], y_lo)), sy(min(ci[1], y_hi)), sx(k), col, cap=3, vertical=True)
                svg.marker(sx(k), sy(s), col, r=3.5)
                if k == cell.best:
                    svg.add(f'<circle cx="{coord(sx(k))}" cy="{coord(sy(s))}" r="8" fill="none" stroke="{col}" '
                            f'stroke-width="2.5" class="best-k"/>')
        panels.append(svg.render())
    ks_all = result.ks()
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in
                   ["Dataset", "Family", "Load", *[("K=0 (off)" if k == 0 else f"K={k}") for k in ks_all], "Best K",
                    "Not told apart"])
    rows = []
    for cell in result.cells:
        by_k = cell.by_k()
        tds = [esc(cell.dataset), esc(cell.family), esc(cell.load_point.label)]
        for k in ks_all:
            c = by_k.get(k)
            if c is None or c.speedup is None:
                tds.append('<span class="na">—</span>')
                continue
            text = f"{c.speedup:.3f}×" + (f" [{c.ci[0]:.2f}–{c.ci[1]:.2f}]" if c.ci and k else "")
            tds.append(f"<b>{text}</b>" if k == cell.best else text)
        tds.append("—" if cell.best is None else "0 (off)" if cell.best == 0 else str(cell.best))
        tds.append(esc(", ".join("0 (off)" if k == 0 else str(k) for k in cell.indistinguishable) or "none"))
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in tds) + "</tr>")
    table = (f'<div class="table-wrap"><table class="results"><thead><tr>{head}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table></div>')
    scheds = "".join(
        f"<li><code>{esc(s.family)}</code>: "
        + esc(", ".join(f"C={c} → K={k}" for c, k in s.by_concurrency.items())) + ". "
        + (f"Serve it with <code>{esc(s.flag)}</code>" if s.flag else esc(s.note)) + "</li>"
        for s in result.schedules)
    items = [(esc(ld.label), colour[ld], "line", "") for ld in all_loads]
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + table + (f'<ul class="crossovers">{scheds}</ul>' if scheds else ""))
    return figure(plot, title, body, caption)
