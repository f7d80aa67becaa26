"""The break-even acceptance map of a `specbench whatif` run: per data set, config and load, the
speedup measured at each synthetic acceptance length, where it crosses 1.0, and where the real
drafter's own acceptance sits against that (pure: rows + the plan in meta.json → curves)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..schemas.cell import LoadPoint, load_of
from ..schemas.meta import RunMeta
from ..schemas.plans import WhatifPlan
from ..schemas.row import ResultRow


def break_even(points: Sequence[tuple[float, float | None]]) -> float | Literal["never", "always"] | None:
    """The lowest acceptance length from which speedup stays ≥ 1.0, linearly interpolated.

    Between the last point below 1.0 and the next one (≥ 1.0 by construction). ``"always"``:
    ≥ 1.0 at every measured length; ``"never"``: the highest length measured is still below
    1.0; None: nothing measured.
    """
    pts = sorted((x, s) for x, s in points if s is not None and x is not None)
    if not pts:
        return None
    below = [i for i, (_, s) in enumerate(pts) if s < 1.0]
    if not below:
        return "always"
    i = below[-1]
    if i == len(pts) - 1:
        return "never"
    (x0, s0), (x1, s1) = pts[i], pts[i + 1]
    return x0 + (1.0 - s0) / (s1 - s0) * (x1 - x0)


@dataclass(frozen=True)
class Point:
    config: str
    target: float
    measured: float | None  # counter acceptance length of the synthetic run
    speedup: float | None
    ci: tuple[float, float] | None

    @property
    def x(self) -> float:
        return self.measured if self.measured is not None else self.target


BreakEven = float | Literal["never", "always"] | None


@dataclass(frozen=True)
class Curve:
    """One real config on one data set at one load point: speedup vs acceptance length, and where it crosses 1.0
    (computed once, by ``whatif_curves``; the report only formats it)."""

    dataset: str
    config: str
    load: LoadPoint
    k: int | None
    points: list[Point]  # by target length
    real: ResultRow | None  # the unmodified config's row at this data set and load
    grid: list[tuple[float, float]]  # (x, speedup) of the points measured, by x
    break_even: BreakEven
    real_length: float | None  # the real drafter's counter acceptance length
    real_speedup: float | None
    #: the break-even over the grid plus the real drafter's own point, when that point lies outside the grid: a
    #: random or weak drafter sits below the lowest synthetic length, and its own measured speedup (same drafter
    #: compute, the engine's real sampler) brackets the crossing the grid alone cannot place
    break_even_with_real: BreakEven
    #: what the table and the plot show: the grid's crossing, else one through the real point (True: ≈)
    shown_break_even: tuple[BreakEven, bool]

    def break_even_text(self) -> str:
        """The Break-even AL cell: ≈ marks a crossing interpolated through the real drafter's own point."""
        be, approx = self.shown_break_even
        return "—" if be is None else be if isinstance(be, str) else ("≈" if approx else "") + f"{be:.2f}"


def curve_of(dataset: str, config: str, load: LoadPoint, k: int | None, points: Sequence[Point], real: ResultRow | None) -> Curve:
    """A curve and its break-even, from its points and the real config's row."""
    grid = sorted((p.x, p.speedup) for p in points if p.speedup is not None)
    be = break_even(grid)
    has = None if real is None else next(
        (real.get(k) for k in ("mean_acceptance_length", "request_stats_mean_acceptance_length") if real.get(k) is not None), None)
    sp = real.speedup_vs_baseline if real is not None else None
    ext = None if has is None or sp is None or not grid or grid[0][0] <= has <= grid[-1][0] else break_even([*grid, (has, sp)])
    shown = (ext, True) if not isinstance(be, float) and isinstance(ext, float) else (be, False)
    return Curve(dataset, config, load, k, sorted(points, key=lambda p: p.target), real, grid, be, has, sp, ext, shown)


def _ci(r: ResultRow, key: str) -> tuple[float, float] | None:
    ci = (r.ci95 or {}).get(key)
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 and None not in ci else None


def whatif_plan(meta: RunMeta | None) -> WhatifPlan:
    """meta.json's ``whatif`` (the plan ``run.whatif`` wrote), empty for a run of another command."""
    return (meta.whatif if meta else None) or WhatifPlan()


def is_replay(meta: RunMeta | None) -> bool:
    """A what-if run that replayed a profile's acceptance (``measure.replay``), not a grid of lengths."""
    return whatif_plan(meta).is_replay


def whatif_curves(rows: Sequence[ResultRow], meta: RunMeta | None) -> list[Curve]:
    plan = whatif_plan(meta)
    if plan.is_replay:
        return []  # a profile's replay (measure.replay), not a grid of lengths
    lengths = plan.lengths()
    points: dict[tuple[str, str, LoadPoint], list[Point]] = {}
    ks: dict[tuple[str, str, LoadPoint], int | None] = {}
    for r in rows:
        p = lengths.get(r.run)
        if p is None or p.of is None or p.acceptance_length is None:
            continue
        key = (r.dataset, p.of, load_of(r))
        ks.setdefault(key, p.k)
        points.setdefault(key, []).append(Point(r.run, p.acceptance_length, r.mean_acceptance_length,
                                                r.speedup_vs_baseline, _ci(r, "speedup_vs_baseline")))
    curves = [curve_of(dataset, config, load, ks[(dataset, config, load)], pts,
                       next((r for r in rows if r.run == config and r.dataset == dataset and load_of(r) == load), None))
              for (dataset, config, load), pts in points.items()]
    return sorted(curves, key=lambda c: (c.dataset, c.config, c.load.sort_key()))


def verdict(curve: Curve) -> str:
    """"needs 2.6 at C=16, has 2.3 → loses", or why it cannot be said."""
    be, at, has = curve.break_even, curve.load.label, curve.real_length
    xs = [x for x, _ in curve.grid]
    has_txt = "real acceptance not measured" if has is None else f"has {has:.2f}"
    if be is None:
        return f"no synthetic point measured at {at}"
    ext = curve.break_even_with_real
    if has is not None and ext is not None and not isinstance(be, float):
        own = f"its own {has:.2f} at {curve.real_speedup:.3f}x"
        if isinstance(ext, float):
            return (f"needs ≈{ext:.2f} at {at} (interpolated between {own} and the grid), {has_txt} → "
                    + ("wins" if has >= ext else "loses"))
        if ext == "always":
            return f"pays off at every length measured at {at}, {own} included → wins"
        return f"needs more than {max(xs):.2f} at {at} (below 1.0 at every length measured, {own} included) → loses"
    if be == "never":
        needs = f"needs more than {max(xs):.2f} at {at} (below 1.0 at every length measured)"
        return f"{needs}, {has_txt}" + ("" if has is None else " → loses" if has <= max(xs) else " → above the grid: not established")
    if be == "always":
        needs = f"pays off from the lowest length measured ({min(xs):.2f}) at {at}"
        if has is None:
            return f"{needs}, {has_txt}"
        return f"{needs}, {has_txt} → " + ("wins" if has >= min(xs) else "below the grid: not established")
    if has is None:
        return f"needs {be:.2f} at {at}, {has_txt}"
    return f"needs {be:.2f} at {at}, {has_txt} → {'wins' if has >= be else 'loses'}"


# ------------------------------------------------------------------------------ command line
