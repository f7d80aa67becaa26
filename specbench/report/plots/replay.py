"""A profile's replay (`specbench whatif --profile`): predicted speedup per data set and load, beside the
profile's own measured speedup, with ⚠ where the replay's acceptance length missed the profile's by > 3 %."""

from __future__ import annotations

from collections.abc import Sequence

from ...measure.replay import LENGTH_FLAG, Replay, ReplayPoint
from ...schemas.cell import LoadPoint
from ..explain_tables import REPLAY_NOTE, measured_length_text, profile_speedup_text, replayed_text
from ..svg import INK, Scale, Svg, esc, figure, legend, linear_axis, y_axis
from .common import LOAD_COLOURS


def replay_section(replay: Replay) -> str | None:
    points = replay.points
    if not points:
        return None
    plot = "whatif"
    title = "Predicted speed-up at the profile's acceptance, per data set and load"
    caption = (
        "● predicted: speedup_vs_baseline of each config served at the profile's acceptance for its data set and k, "
        "with its 95% CI; ◆ the profile's own measured speedup at that load (hollow: the profile does not say at "
        f"which load it was measured). ⚠ above a point: the replay's counter acceptance length is more than "
        f"{LENGTH_FLAG:.0%} from the profile's, so the prediction is for another acceptance than the profile's. "
        + esc(REPLAY_NOTE))
    configs = sorted({p.config for p in points})
    colour = {c: LOAD_COLOURS[i % len(LOAD_COLOURS)] for i, c in enumerate(configs)}
    panels = []
    for dataset in sorted({p.dataset for p in points}):
        panels.append(_panel(dataset, [p for p in points if p.dataset == dataset], colour))
    items = [(esc(c), colour[c], "line", "") for c in configs]
    items.append(("◆ the profile's own speedup, ⚠ acceptance length off the profile's", INK, "none", ""))
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + _table(points))
    return figure(plot, title, body, caption)


def _panel(dataset: str, points: Sequence[ReplayPoint], colour: dict[str, str]) -> str:
    pw, ph = 520.0, 320.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 56.0
    loads = sorted({p.load for p in points}, key=LoadPoint.sort_key)
    slot = {ld: i for i, ld in enumerate(loads)}
    sx = Scale(-0.5, len(loads) - 0.5, left, pw - right)
    ys = [y for p in points for y in (p.predicted, p.profile_speedup) if y is not None]
    ys += [p.ci[1] for p in points if p.ci] + [1.0]
    y_lo, y_hi, yt = linear_axis(max(min(ys) * 0.9, 0.0), max(ys) * 1.08, 5)
    sy = Scale(y_lo, y_hi, ph - bottom, top)
    svg = Svg(pw, ph, f"replay: {dataset}", "whatif")
    svg.text(left, 16, dataset, size=14, weight="bold")
    y_axis(svg, sy, yt, left, pw - right, "speed-up (×)")
    for ld in loads:
        svg.text(sx(slot[ld]), ph - bottom + 18, ld.label, anchor="middle", size=12)
    svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1.5, "5 4")
    svg.text(pw - right - 4, sy(1.0) - 4, "baseline 1.0", anchor="end", size=11)
    configs = sorted({p.config for p in points})
    for j, config in enumerate(configs):
        mine = [p for p in points if p.config == config]
        jitter = (j - (len(configs) - 1) / 2) * 8.0
        col = colour[config]
        svg.series(loads, [(p.load, p.predicted, p.ci) for p in mine if p.predicted is not None],
                   lambda ld: sx(slot[ld]), sy, col, "", clip=(y_lo, y_hi), jitter=jitter)
        for p in mine:
            x = sx(slot[p.load]) + jitter
            if p.profile_speedup is not None:
                svg.marker(x + 10, sy(p.profile_speedup), col, "diamond", hollow=not p.profile_load_known, r=4)
            if p.flagged and p.predicted is not None:
                svg.text(x, sy(p.predicted) - 10, "⚠", anchor="middle", size=13, cls="length-flag")
    return svg.render()


def _table(points: Sequence[ReplayPoint]) -> str:
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in
                   ["Dataset", "Config", "k", "Load", "Predicted speed-up", "Profile speed-up", "Profile AL",
                    "Measured AL", "Acceptance replayed"])
    rows = []
    for p in points:
        pred = "—" if p.predicted is None else f"{p.predicted:.3f}×" + (f" [{p.ci[0]:.2f}–{p.ci[1]:.2f}]" if p.ci else "")
        cells = [p.dataset, p.config, "—" if p.k is None else str(p.k), p.load.label, pred,
                 profile_speedup_text(p).replace("x", "×"), f"{p.profile_length:.2f}", measured_length_text(p),
                 replayed_text(p)]
        rows.append("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in cells) + "</tr>")
    return (f'<div class="table-wrap"><table class="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')
