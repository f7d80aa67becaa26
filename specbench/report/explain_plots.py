"""Plots that explain a speedup: tokens per step against step cost per load (every run), the
break-even acceptance map (``specbench whatif`` runs) and the best K per load (``specbench tune``).

Same rules as ``plots.py``: inline SVG, a caption saying how each number was computed, and a null
value written "not measured", never drawn as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .model import PALETTE, Load, Model, load_of
from .svg import INK, MUTED, Scale, Svg, coord, esc, figure, legend, linear_axis, x_axis, y_axis

LOAD_COLOURS = PALETTE + ["#000000", "#999999"]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _panel_loads(m: Model, dataset: str) -> list[Load]:
    loads = [ld for ld in m.loads_of(dataset) if ld.value is not None]
    kinds = {ld.kind for ld in loads}
    kind = "concurrency" if "concurrency" in kinds else "rate"
    return [ld for ld in loads if ld.kind == kind]


# --------------------------------------------------------------------------------------------
# decomposition: tokens per step vs step cost
# --------------------------------------------------------------------------------------------

def decomposition_plot(m: Model) -> str:
    plot = "decomposition"
    title = "Tokens per step vs step cost, per data set"
    caption = (
        "Per speculative config and load point: <b>tokens per step</b> (solid, filled dots: "
        "<code>stream_mean_acceptance_length</code>, decode tokens ÷ decode chunks, one chunk per target step) and "
        "<b>step cost</b> (dashed, hollow dots: <code>step_cost_ratio</code> = mean chunk gap ÷ the baseline's at the "
        "same load). Their ratio is the decode-phase speed-up (<code>speedup_decomposed</code>); the measured "
        "<b>speed-up</b> (dotted, diamonds: <code>speedup_vs_baseline</code>) is that times the residual (prefill/TTFT, "
        "queueing, scheduling). Speculation pays off in decode while tokens per step stay above the step cost; the "
        "crossover (○) is where the two curves meet, linearly interpolated between two measured loads (in log(load) "
        "on a logarithmic axis). Values that are null in results.json are listed as “not measured”.")
    panels, summary = [], []
    pw, ph = 560.0, 330.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 74.0
    for d in m.datasets:
        loads = _panel_loads(m, d)
        if not loads:
            continue
        xs = [ld.value for ld in loads if ld.value is not None]
        log = len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 4
        sx = Scale(min(xs), max(xs), left + 24, pw - right - 24, log=log)
        series: dict[str, dict[str, list[tuple[float, float]]]] = {}
        vals, missing = [1.0], []
        for c in m.spec_configs:
            s: dict[str, list[tuple[float, float]]] = {"al": [], "cost": [], "speedup": []}
            for ld, x in zip(loads, xs):
                r = m.row(c, d, ld)
                for key, field in (("al", "stream_mean_acceptance_length"), ("cost", "step_cost_ratio"),
                                   ("speedup", "speedup_vs_baseline")):
                    v = _num(None if r is None else r.get(field))
                    if v is None:
                        if key != "speedup":
                            missing.append(f"{c} {'tokens/step' if key == 'al' else 'step cost'} @ {ld.label}")
                        continue
                    s[key].append((x, v))
                    vals.append(v)
            if any(s.values()):
                series[c] = s
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
                dec = _num(r.speedup_decomposed if r is not None else None)
                res = _num(r.speedup_residual if r is not None else None)
                if r is not None and x in al and x in cost and dec is not None:
                    sp = _num(r.speedup_vs_baseline)
                    summary.append(
                        f"<li><b>{esc(d)}</b> · <code>{esc(c)}</code> @ {esc(load_of(r).label)}: {al[x]:.2f} tokens per "
                        f"step ÷ step cost {cost[x]:.2f}× = {dec:.3f}× in decode"
                        + (f"; measured {sp:.3f}× (residual {res:.3f})" if sp is not None and res is not None else "")
                        + ".</li>")
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


# --------------------------------------------------------------------------------------------
# what-if: speedup vs acceptance length
# --------------------------------------------------------------------------------------------

def whatif_section(m: Model) -> str | None:
    from ..whatif import WHATIF_NOTE, load_label, verdict, whatif_curves

    curves = whatif_curves(m.rows, m.meta)
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
    all_loads = sorted({c.load for c in curves}, key=Load.sort_key)
    colour = {ld: LOAD_COLOURS[i % len(LOAD_COLOURS)] for i, ld in enumerate(all_loads)}
    for (dataset, config), cs in groups.items():
        xs = [p.x for c in cs for p in c.points if p.speedup is not None]
        reals = [(c.real_length, _num((c.real or {}).get("speedup_vs_baseline"))) for c in cs]
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
            be = c.break_even
            if isinstance(be, float):
                svg.add(f'<circle cx="{coord(sx(be))}" cy="{coord(sy(1.0))}" r="7" fill="none" stroke="{col}" '
                        f'stroke-width="2.5" class="break-even"/>')
            a, s = c.real_length, _num((c.real or {}).get("speedup_vs_baseline"))
            if a is not None and s is not None:
                svg.marker(sx(a), sy(s), col, "diamond", r=5)
            notes.append(f"<li><b>{esc(dataset)}</b> · <code>{esc(config)}</code>: {esc(verdict(c))}.</li>")
        panels.append(svg.render())
    items = [(esc(load_label(ld)), colour[ld], "line", "") for ld in all_loads]
    items.append(("◆ real drafter, ○ break-even", INK, "none", ""))
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + f'<ul class="crossovers">{"".join(notes)}</ul>' + _whatif_table(curves))
    return figure(plot, title, body, caption)


def _whatif_table(curves: Sequence[Any]) -> str:
    from ..whatif import load_label

    targets = sorted({p.target for c in curves for p in c.points})
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in
                   ["Dataset", "Config", "Load", *[f"AL {t:g}" for t in targets], "Break-even AL", "Real AL", "Real speed-up"])
    rows = []
    for c in curves:
        by_t = {p.target: p for p in c.points}
        cells = [esc(c.dataset), esc(c.config), esc(load_label(c.load))]
        for t in targets:
            p = by_t.get(t)
            cells.append('<span class="na">—</span>' if p is None or p.speedup is None else
                         f"{p.speedup:.3f}× @ {p.measured:.2f}" if p.measured is not None else f"{p.speedup:.3f}×")
        be = c.break_even
        cells.append("—" if be is None else esc(be) if isinstance(be, str) else f"{be:.2f}")
        cells.append("—" if c.real_length is None else f"{c.real_length:.2f}")
        sp = _num((c.real or {}).get("speedup_vs_baseline"))
        cells.append("—" if sp is None else f"{sp:.3f}×")
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return (f'<div class="table-wrap"><table class="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


# --------------------------------------------------------------------------------------------
# tune: best K per load
# --------------------------------------------------------------------------------------------

def tune_section(m: Model) -> str | None:
    from ..tune import analysis_of
    from ..whatif import load_label

    result = analysis_of(m.rows, m.meta)
    if not result or not result["cells"]:
        return None
    plot = "tune"
    title = "Speed-up vs K (draft tokens per step), per load"
    caption = (
        "Each line is one load point: speedup_vs_baseline of the config run with K draft tokens (one server per K, "
        "the same prompts), with its 95% CI; K=0 is the baseline (1.0). The filled ring marks the best K; the Ks not "
        f"told apart from it are listed in the table. Told apart by: {esc(result['method'])}.")
    groups: dict[tuple[str, str], list[dict]] = {}
    for cell in result["cells"]:
        groups.setdefault((cell["dataset"], cell["family"]), []).append(cell)
    all_loads = sorted({Load(c["kind"], c["load"]) for c in result["cells"]}, key=Load.sort_key)
    colour = {ld: LOAD_COLOURS[i % len(LOAD_COLOURS)] for i, ld in enumerate(all_loads)}
    panels = []
    pw, ph = 560.0, 320.0
    left, right, top, bottom = 62.0, 20.0, 32.0, 60.0
    for (dataset, fam), cells in groups.items():
        ks = sorted({c["k"] for cell in cells for c in cell["candidates"]})
        ys = [1.0] + [c["speedup"] for cell in cells for c in cell["candidates"] if c["speedup"] is not None]
        ys += [c["ci"][1] for cell in cells for c in cell["candidates"] if c.get("ci")]
        sx = Scale(min(ks), max(ks), left + 20, pw - right - 20)
        y_lo, y_hi, yt = linear_axis(max(min(ys) * 0.9, 0.0), max(ys) * 1.05, 5)
        sy = Scale(y_lo, y_hi, ph - bottom, top)
        svg = Svg(pw, ph, f"tune: {dataset} {fam}", plot)
        svg.text(left, 16, f"{dataset} · {fam}", size=14, weight="bold")
        y_axis(svg, sy, yt, left, pw - right, "speed-up (×)")
        x_axis(svg, sx, ks, top, ph - bottom, "K (0 = no speculation)", fmt=lambda v: f"{v:g}")
        svg.line(left, sy(1.0), pw - right, sy(1.0), INK, 1, "5 4")
        for cell in cells:
            col = colour[Load(cell["kind"], cell["load"])]
            pts = [(c["k"], c["speedup"], c.get("ci")) for c in cell["candidates"] if c["speedup"] is not None]
            if len(pts) > 1:
                svg.polyline([(sx(k), sy(s)) for k, s, _ in pts], col, 2.2)
            for k, s, ci in pts:
                if ci:
                    svg.whisker(sy(max(ci[0], y_lo)), sy(min(ci[1], y_hi)), sx(k), col, cap=3, vertical=True)
                svg.marker(sx(k), sy(s), col, r=3.5)
                if k == cell["best"]:
                    svg.add(f'<circle cx="{coord(sx(k))}" cy="{coord(sy(s))}" r="8" fill="none" stroke="{col}" '
                            f'stroke-width="2.5" class="best-k"/>')
        panels.append(svg.render())
    ks_all = sorted({c["k"] for cell in result["cells"] for c in cell["candidates"]})
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in
                   ["Dataset", "Family", "Load", *[("K=0 (off)" if k == 0 else f"K={k}") for k in ks_all], "Best K",
                    "Not told apart"])
    rows = []
    for cell in result["cells"]:
        by_k = {c["k"]: c for c in cell["candidates"]}
        tds = [esc(cell["dataset"]), esc(cell["family"]), esc(load_label(Load(cell["kind"], cell["load"])))]
        for k in ks_all:
            c = by_k.get(k)
            if c is None or c["speedup"] is None:
                tds.append('<span class="na">—</span>')
                continue
            text = f"{c['speedup']:.3f}×" + (f" [{c['ci'][0]:.2f}–{c['ci'][1]:.2f}]" if c.get("ci") and k else "")
            tds.append(f"<b>{text}</b>" if k == cell["best"] else text)
        tds.append("—" if cell["best"] is None else "0 (off)" if cell["best"] == 0 else str(cell["best"]))
        tds.append(esc(", ".join("0 (off)" if k == 0 else str(k) for k in cell["indistinguishable"]) or "none"))
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in tds) + "</tr>")
    table = (f'<div class="table-wrap"><table class="results"><thead><tr>{head}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table></div>')
    scheds = "".join(
        f"<li><code>{esc(s['family'])}</code>: "
        + esc(", ".join(f"C={c} → K={k}" for c, k in s["by_concurrency"].items())) + ". "
        + (f"Serve it with <code>{esc(s['flag'])}</code>" if s.get("flag") else esc(s["note"])) + "</li>"
        for s in result.get("schedules") or [])
    items = [(esc(load_label(ld)), colour[ld], "line", "") for ld in all_loads]
    body = (legend(items) + '<div class="panels">' + "".join(f'<div class="svg-wrap">{p}</div>' for p in panels)
            + "</div>" + table + (f'<ul class="crossovers">{scheds}</ul>' if scheds else ""))
    return figure(plot, title, body, caption)
