"""The break-even acceptance map of a `specbench whatif` run: per data set, config and load, the
speedup measured at each synthetic acceptance length, where it crosses 1.0, and where the real
drafter's own acceptance sits against that (pure: rows + the plan in meta.json → curves)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..schemas.cell import Load, load_of
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


@dataclass
class Curve:
    """One real config on one data set at one load point: speedup vs acceptance length."""

    dataset: str
    config: str
    load: Load
    k: int | None
    points: list[Point] = field(default_factory=list)
    real: ResultRow | None = None

    @property
    def break_even(self) -> float | Literal["never", "always"] | None:
        return break_even(self.grid)

    @property
    def real_length(self) -> float | None:
        if self.real is None:
            return None
        return next((self.real.get(k) for k in ("mean_acceptance_length", "request_stats_mean_acceptance_length")
                     if self.real.get(k) is not None), None)

    @property
    def real_speedup(self) -> float | None:
        return self.real.speedup_vs_baseline if self.real is not None else None

    @property
    def grid(self) -> list[tuple[float, float]]:
        return sorted((p.x, p.speedup) for p in self.points if p.speedup is not None)

    @property
    def break_even_with_real(self) -> float | Literal["never", "always"] | None:
        """The break-even over the grid plus the real drafter's own point, when that point lies outside the grid.

        A random or weak drafter sits below the lowest synthetic length; the grid alone cannot place it, but its
        own measured speedup (same drafter compute, the engine's real sampler) brackets the crossing.
        """
        has, sp, grid = self.real_length, self.real_speedup, self.grid
        if has is None or sp is None or not grid or grid[0][0] <= has <= grid[-1][0]:
            return None
        return break_even([*grid, (has, sp)])

    @property
    def shown_break_even(self) -> tuple[float | Literal["never", "always"] | None, bool]:
        """What the table and the plot show: the grid's crossing, else one through the real point (True: ≈)."""
        be, ext = self.break_even, self.break_even_with_real
        if not isinstance(be, float) and isinstance(ext, float):
            return ext, True
        return be, False

    def break_even_text(self) -> str:
        """The Break-even AL cell: ≈ marks a crossing interpolated through the real drafter's own point."""
        be, approx = self.shown_break_even
        return "—" if be is None else be if isinstance(be, str) else ("≈" if approx else "") + f"{be:.2f}"


def _ci(r: ResultRow, key: str) -> tuple[float, float] | None:
    ci = (r.ci95 or {}).get(key)
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 and None not in ci else None


def whatif_plan(meta: RunMeta | None) -> WhatifPlan:
    """meta.json's ``whatif`` (the plan ``run.whatif`` wrote), empty for a run of another command."""
    return (meta.whatif if meta else None) or WhatifPlan()


def is_replay(meta: RunMeta | None) -> bool:
    """A what-if run that replayed a profile's acceptance (``measure.replay``), not a grid of lengths."""
    return whatif_plan(meta).is_replay


def whatif_curves(records: Sequence[ResultRow], meta: RunMeta | None) -> list[Curve]:
    plan = whatif_plan(meta)
    if plan.is_replay:
        return []  # a profile's replay (measure.replay), not a grid of lengths
    lengths = plan.lengths()
    curves: dict[tuple[str, str, Load], Curve] = {}
    for r in records:
        p = lengths.get(r.run)
        if p is None or p.of is None or p.acceptance_length is None:
            continue
        key = (r.dataset, p.of, load_of(r))
        curve = curves.setdefault(key, Curve(r.dataset, p.of, load_of(r), p.k))
        curve.points.append(Point(r.run, p.acceptance_length, r.mean_acceptance_length,
                                  r.speedup_vs_baseline, _ci(r, "speedup_vs_baseline")))
    for (dataset, config, load), curve in curves.items():
        curve.points.sort(key=lambda p: p.target)
        curve.real = next((r for r in records if r.run == config and r.dataset == dataset
                           and load_of(r) == load), None)
    return sorted(curves.values(), key=lambda c: (c.dataset, c.config, c.load.sort_key()))


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
