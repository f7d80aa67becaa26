"""`specbench whatif SUITE`: the break-even acceptance map.

vLLM's synthetic rejection sampler (``speculative: {rejection_sample_method: synthetic,
synthetic_acceptance_length: L}``) keeps the drafter's real compute and accepts draft tokens with
probabilities that give a mean acceptance length L. Running each speculative config at a grid of
L × the suite's load points (baseline included, one run directory) shows how much acceptance the
drafter needs to pay for itself at each load, and where its real acceptance sits against that.

Pure parts: ``default_lengths``, ``expand_whatif`` (suite → derived suite + plan),
``break_even`` (interpolation on a speedup curve), ``whatif_curves`` / ``verdict`` /
``whatif_markdown`` (rows + plan → map). ``synthetic_support`` and ``whatif_cli`` touch the system.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import SuiteError
from ..launch import Engine, load_engine
from ..run.explain import derived_suite, parse_numbers, raw_config, run_with_plan, spec_configs
from ..schemas.cell import Load, load_of
from ..schemas.row import ResultRow
from ..suite import Suite

SYNTHETIC_KEYS = ("rejection_sample_method", "synthetic_acceptance_length", "synthetic_acceptance_rates")
CPU_REFUSAL = "Synthetic acceptance not supported with CPU sampling"


def default_lengths(k: int) -> list[float]:
    """1.5, 2, 2.5, … up to k+1 (every half token a step can carry)."""
    return [1 + i / 2 for i in range(1, 2 * k + 1)]


def synthetic_support(engine: Engine, python: str | None = None) -> str | None:
    """None when the engine can fix acceptance synthetically; else why not, in one line.

    A launcher may declare it (``speculative.synthetic_acceptance``: true, or a reason string);
    otherwise a vLLM engine's own source is read, without importing vLLM: the option must be in
    ``config/speculative.py``, and a CPU build must not carry the CPU sampler's refusal.
    """
    declared = (engine.data.get("speculative") or {}).get("synthetic_acceptance")
    if declared is True:
        return None
    if isinstance(declared, str) and declared:
        return declared
    if declared is False or engine.adapter != "vllm":
        return f"engine {engine.name} has no synthetic acceptance (vLLM's rejection_sample_method: synthetic)"
    exe = engine.python(python)
    probe = ("import importlib.util as u; s = u.find_spec('vllm'); "
             "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")
    try:
        proc = subprocess.run([exe, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"engine {engine.name}: cannot run {exe} to look for synthetic acceptance ({type(err).__name__}: {err})"
    root = Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None
    if root is None:
        return f"engine {engine.name}: {exe} has no vllm package"
    if "synthetic_acceptance_length" not in _read(root / "config" / "speculative.py"):
        return (f"engine {engine.name}: the vLLM at {root} has no synthetic_acceptance_length in config/speculative.py "
                "(vLLM 0.26 and later have it)")
    if engine.env.get("VLLM_TARGET_DEVICE") == "cpu" and CPU_REFUSAL in _read(root / "utils" / "cpu_triton_utils.py"):
        return (f"engine {engine.name}: the vLLM at {root} accepts rejection_sample_method: synthetic, but its CPU "
                f"rejection sampler stops at the first request ('{CPU_REFUSAL}'); run whatif on a GPU engine")
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _k_of(config) -> int | None:
    k = config.num_speculative_tokens or config.speculative.get("num_speculative_tokens")
    return int(k) if isinstance(k, int) and not isinstance(k, bool) else None


def derived_name(config: str, length: float) -> str:
    return f"{config}_al{length:g}"


def expand_whatif(suite: Suite, lengths: Sequence[float] | None = None, only: Sequence[str] | None = None,
                  include_real: bool = True,
                  check: Callable[[Engine, str | None], str | None] = synthetic_support) -> tuple[Suite, dict[str, Any]]:
    """The suite to run (baseline, the real configs, one config per acceptance length) and its plan.

    ``plan["configs"]`` maps each derived config to ``{"of": real config, "acceptance_length": L,
    "k": k}``; it is what ``whatif_curves`` reads back from ``meta.json``.
    """
    chosen = spec_configs(suite, only, "whatif")
    base = suite.baseline
    assert base is not None  # spec_configs raised otherwise
    configs = [raw_config(suite, base)]
    plan: dict[str, Any] = {"configs": {}, "real": include_real}
    derived = []
    for c in chosen:
        why = check(load_engine(c.engine or suite.engine), suite.server.python)
        if why:
            raise SuiteError(f"{suite.path}: config {c.name!r}: {why}")
        k = _k_of(c)
        if k is None:
            raise SuiteError(f"{suite.path}: config {c.name!r}: whatif needs num_speculative_tokens (synthetic acceptance "
                             "is defined over k draft positions)")
        if any(key in c.speculative for key in SYNTHETIC_KEYS):
            raise SuiteError(f"{suite.path}: config {c.name!r} already sets speculative.rejection_sample_method/"
                             "synthetic_*; whatif varies them itself")
        grid = list(lengths) if lengths else default_lengths(k)
        bad = [x for x in grid if not 1 <= x <= k + 1]
        if bad:
            raise SuiteError(f"--lengths: {bad[0]:g} is outside [1, {k + 1}] for config {c.name!r} (k={k}): a step "
                             f"carries 1 to k+1 tokens")
        if include_real:
            configs.append(raw_config(suite, c))
        for length in grid:
            raw = raw_config(suite, c)
            raw["name"] = derived_name(c.name, length)
            raw.pop("port", None)
            raw.pop("baseline", None)
            raw["speculative"] = {**raw.get("speculative", {}), "rejection_sample_method": "synthetic",
                                  "synthetic_acceptance_length": float(length)}
            derived.append(raw)
            plan["configs"][raw["name"]] = {"of": c.name, "acceptance_length": float(length), "k": k}
    return derived_suite(suite, "whatif", configs + derived), plan


# ------------------------------------------------------------------------------ analysis

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


def whatif_curves(records: Sequence[ResultRow], meta: dict[str, Any] | None) -> list[Curve]:
    plan = ((meta or {}).get("whatif") or {}).get("configs") or {}
    curves: dict[tuple, Curve] = {}
    for r in records:
        p = plan.get(r.run)
        if not isinstance(p, dict) or "of" not in p:
            continue
        key = (r.dataset, p["of"], load_of(r))
        curve = curves.setdefault(key, Curve(r.dataset, p["of"], load_of(r), p.get("k")))
        curve.points.append(Point(r.run, float(p["acceptance_length"]), r.mean_acceptance_length,
                                  r.speedup_vs_baseline, _ci(r, "speedup_vs_baseline")))
    for (dataset, config, load), curve in curves.items():
        curve.points.sort(key=lambda p: p.target)
        curve.real = next((r for r in records if r.run == config and r.dataset == dataset
                           and load_of(r) == load), None)
    return sorted(curves.values(), key=lambda c: (c.dataset, c.config, c.load.sort_key()))


def load_label(load: Load) -> str:
    if load.value is None:
        return "load not recorded"
    return f"C={load.value:g}" if load.kind == "concurrency" else f"{load.value:g} req/s"


def verdict(curve: Curve) -> str:
    """"needs 2.6 at C=16, has 2.3 → loses", or why it cannot be said."""
    be, at, has = curve.break_even, load_label(curve.load), curve.real_length
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


def _cell(p: Point | None) -> str:
    if p is None or p.speedup is None:
        return "—"
    return f"{p.speedup:.3f}x" + (f" @ {p.measured:.2f}" if p.measured is not None else "")


WHATIF_NOTE = (
    "What-if: each cell is speedup_vs_baseline of the config run with vLLM's synthetic rejection sampler at that "
    "acceptance length (the drafter's real compute, acceptance fixed), @ the acceptance length its counters measured. "
    "Break-even = the lowest acceptance length from which speedup stays ≥ 1.0, linearly interpolated between the two "
    "measured points around 1.0 (x = measured length); never = below 1.0 at every length, always = ≥ 1.0 at every "
    "length; ≈ = the grid alone does not bracket the real drafter, so the crossing is interpolated between the real "
    "config's own (acceptance length, speedup) and the nearest synthetic point. Real = the unmodified config's "
    "counter acceptance length and speedup in the same run. Synthetic "
    "acceptance changes the output (accepted drafts are not the target's tokens), so Same output does not apply to "
    "those rows.")


def whatif_markdown(records: Sequence[ResultRow], meta: dict[str, Any] | None) -> str:
    curves = whatif_curves(records, meta)
    if not curves:
        return ""
    targets = sorted({p.target for c in curves for p in c.points})
    header = ["Dataset", "Config", "Load", *[f"AL {t:g}" for t in targets], "Break-even AL", "Real AL (speedup)", "Verdict"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for c in curves:
        by_t = {p.target: p for p in c.points}
        be_txt = c.break_even_text()
        real = "—"
        if c.real_length is not None:
            sp = c.real_speedup
            real = f"{c.real_length:.2f}" + (f" ({sp:.3f}x)" if sp is not None else "")
        lines.append("| " + " | ".join([c.dataset, c.config, load_label(c.load), *[_cell(by_t.get(t)) for t in targets],
                                        be_txt, real, verdict(c)]) + " |")
    return "What-if: speedup vs acceptance length\n\n" + "\n".join(lines) + "\n\n- " + WHATIF_NOTE


# ------------------------------------------------------------------------------ command line

def whatif_cli(args: argparse.Namespace) -> int:
    from ..run import default_output
    from ..suite import load_suite

    suite = load_suite(args.suite)
    lengths = parse_numbers(args.lengths, "--lengths", float) if args.lengths else None
    derived, plan = expand_whatif(suite, lengths, args.config or None, include_real=not args.no_real)
    plan["suite"] = str(suite.path)
    out = Path(args.resume or args.output or default_output(derived))
    outcome, _ = run_with_plan(derived, out, "whatif", plan, resume=bool(args.resume), quiet=args.quiet)
    return outcome.exit_code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "whatif", help="speedup vs acceptance length per load (vLLM synthetic acceptance): the break-even map",
        description="Run each speculative config at a grid of synthetic acceptance lengths × the suite's load points "
                    "(baseline and the real config included, one run directory) and report the break-even acceptance "
                    "length per load.")
    p.add_argument("suite", help="suite YAML file")
    p.add_argument("--lengths", help="acceptance lengths, e.g. 1.5,2,3 (default 1.5, 2, 2.5, … up to k+1)")
    p.add_argument("--config", action="append", metavar="NAME", help="only this speculative config (repeatable)")
    p.add_argument("--no-real", action="store_true", help="do not also run the unmodified configs")
    p.add_argument("--output", "-o", help="run directory (default results/<suite>-whatif-<timestamp>/)")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted whatif run in DIR")
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress")
    p.set_defaults(func=whatif_cli)


__all__ = ["break_even", "default_lengths", "expand_whatif", "register", "synthetic_support", "verdict",
           "whatif_curves", "whatif_markdown"]
