"""The break-even acceptance map of ``specbench whatif`` runs."""

from __future__ import annotations

from collections.abc import Sequence

from ...measure.break_even import Curve, verdict
from ...measure.explained import Explained
from ...schemas.cell import LoadPoint
from ..explain_tables import WHATIF_NOTE
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
from .common import LOAD_COLOURS, num_or_none
from .replay import replay_section


def whatif_section(explained: Explained) -> str | None:
    """The break-even map of a whatif grid, or a profile's replay."""
    if explained.replay is not None:
        return replay_section(explained.replay)
    curves = explained.curves
    if not curves:
        return None
    plot = "whatif"
    title = "Speed-up vs acceptance length (synthetic acceptance), per load"
    caption = (
        "Each line is one load point: speedup_vs_baseline of the config served with vLLM's synthetic rejection "
        "sampler (the drafter's real compute, acceptance fixed) against the acceptance length its counters measured "
        "(the requested length when they measured none), with the 95% CI when the row has one. ○ on the 1.0 line: the "
        "break-even acceptance length, the lowest length from which speed-up stays ≥ 1.0, linearly interpolated "
        "between the two measured points around it. ◆: the real drafter (the unmodified config in the same run) at its "
        f"measured acceptance length and speed-up. {esc(WHATIF_NOTE)}")
    groups: dict[tuple[str, str], list] = {}
    for c in curves:
        groups.setdefault((c.dataset, c.config), []).append(c)
    panels, notes = [], []
    pw, ph = 560.0, 330.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 64.0
    all_loads = sorted({c.load for c in curves}, key=LoadPoint.sort_key)
    colour = {ld: LOAD_COLOURS[i % len(LOAD_COLOURS)] for i, ld in enumerate(all_loads)}
    for (dataset, config), cs in groups.items():
        xs = [p.x for c in cs for p in c.points if p.speedup is not None]
        reals = [(c.real_length, num_or_none(c.real.speedup_vs_baseline if c.real is not None else None)) for c in cs]
        xs += [a for a, s in reals if a is not None and s is not None]
        ys = [p.speedup for c in cs for p in c.points if p.speedup is not None]
        ys += [p.ci[1] for c in cs for p in c.points if p.ci] + [s for _, s in reals if s is not None] + [1.0]
        if not xs:
            continue
        x_lo, x_hi, xt = linear_axis(min(xs) - 0.1, max(xs) + 0.1, 6)
        sx = Scale(x_lo, x_hi, left, pw - right)
        y_lo, y_hi, yt = linear_axis(max(min(ys) * 0.9, 0.0), max(ys) * 1.05, 5)
        sy = Scale(y_lo, y_hi, ph - bottom, top)
        svg = Svg(pw, ph, f"what-if: {dataset} {config}", plot)
        svg.text(left, 16, f"{dataset} · {config}", size=14, weight="bold")
        y_axis(svg, sy, yt, left, pw - right, "speed-up (×)")
        x_axis(svg, sx, xt, top, ph - bottom, "acceptance length (tokens per step, counters)")
        svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1.5, "5 4")
        svg.text(pw - right - 4, sy(1.0) - 4, "baseline 1.0", anchor="end", size=11)
        for c in cs:
            col = colour[c.load]
            pts = sorted((p.x, p.speedup, p.ci) for p in c.points if p.speedup is not None)
            if len(pts) > 1:
                svg.polyline([(sx(x), sy(s)) for x, s, _ in pts], col, 2.5)
            for x, s, ci in pts:
                if ci:
                    svg.whisker(sy(max(ci[0], y_lo)), sy(min(ci[1], y_hi)), sx(x), col, cap=3, vertical=True)
                svg.marker(sx(x), sy(s), col)
            be, _ = c.shown_break_even
            if isinstance(be, float):
                svg.add(f'<circle cx="{coord(sx(be))}" cy="{coord(sy(1.0))}" r="7" fill="none" stroke="{col}" '
                        f'stroke-width="2.5" class="break-even"/>')
            a, s = c.real_length, num_or_none(c.real_speedup)
            if a is not None and s is not None:
                if isinstance(c.break_even_with_real, float) and pts:  # the dotted segment the ≈ crossing lies on
                    near = min(pts, key=lambda p: abs(p[0] - a))
                    svg.line(sx(a), sy(s), sx(near[0]), sy(near[1]), col, 1.5, "2 3")
                svg.marker(sx(a), sy(s), col, "diamond", r=5)
            notes.append(f"<li><b>{esc(dataset)}</b> · <code>{esc(config)}</code>: {esc(verdict(c))}.</li>")
        panels.append(svg.render())
    items = [(esc(ld.label), colour[ld], "line", "") for ld in all_loads]
    items.append(("◆ real drafter, ○ break-even (on a dotted segment: through the real drafter's own point)", INK, "none", ""))
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + f'<ul class="crossovers">{"".join(notes)}</ul>' + _whatif_table(curves))
    return figure(plot, title, body, caption)


def _whatif_table(curves: Sequence[Curve]) -> str:
    targets = sorted({p.target for c in curves for p in c.points})
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in
                   ["Dataset", "Config", "Load", *[f"AL {t:g}" for t in targets], "Break-even AL", "Real AL", "Real speed-up"])
    rows = []
    for c in curves:
        by_t = {p.target: p for p in c.points}
        cells = [esc(c.dataset), esc(c.config), esc(c.load.label)]
        for t in targets:
            p = by_t.get(t)
            cells.append('<span class="na">—</span>' if p is None or p.speedup is None else
                         f"{p.speedup:.3f}× @ {p.measured:.2f}" if p.measured is not None else f"{p.speedup:.3f}×")
        cells.append(esc(c.break_even_text()))
        cells.append("—" if c.real_length is None else f"{c.real_length:.2f}")
        sp = num_or_none(c.real_speedup)
        cells.append("—" if sp is None else f"{sp:.3f}×")
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return (f'<div class="table-wrap"><table class="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')
