"""The tables of `specbench whatif` (break-even acceptance per load, or a profile's replay), `specbench tune`
(best K per load) and `specbench profile`: formatted from a run's analyses (``measure.explained.Explained``: the
break-even curves, the replay's points, the tune result) and from profile entries; nothing here computes them."""

from __future__ import annotations

from collections.abc import Sequence

from ..measure.break_even import Curve, Point, verdict
from ..measure.explained import Explained
from ..measure.replay import LENGTH_FLAG, Replay, ReplayPoint
from ..schemas.plans import Candidate, TuneResult
from ..schemas.profile_file import ProfileEntry


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


def explain_markdown(explained: Explained) -> list[str]:
    """The what-if map (or a profile's replay) and the best-K table of runs made by ``specbench whatif`` / ``tune``."""
    out = [replay_markdown(explained.replay) if explained.replay else whatif_markdown(explained.curves),
           tune_markdown(explained.tune)]
    return [part for part in out if part]


def whatif_markdown(curves: Sequence[Curve]) -> str:
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
        lines.append("| " + " | ".join([c.dataset, c.config, c.load.label, *[_cell(by_t.get(t)) for t in targets],
                                        be_txt, real, verdict(c)]) + " |")
    return "What-if: speedup vs acceptance length\n\n" + "\n".join(lines) + "\n\n- " + WHATIF_NOTE


def _fmt(cand: Candidate | None) -> str:
    if cand is None or cand.speedup is None:
        return "—"
    text = f"{cand.speedup:.3f}x"
    if cand.ci and cand.k != 0:
        text += f" [{cand.ci[0]:.2f}–{cand.ci[1]:.2f}]"
    return text


def tune_markdown(result: TuneResult | None) -> str:
    if not result or not result.cells:
        return ""
    ks = result.ks()
    header = ["Dataset", "Family", "Load", *[("K=0 (off)" if k == 0 else f"K={k}") for k in ks], "Best K",
              "Not told apart from the best"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for cell in result.cells:
        by_k = cell.by_k()
        cols = []
        for k in ks:
            text = _fmt(by_k.get(k))
            cols.append(f"**{text}**" if k == cell.best and text != "—" else text)
        best = "—" if cell.best is None else ("0 (off)" if cell.best == 0 else str(cell.best))
        alike = ", ".join("0 (off)" if k == 0 else str(k) for k in cell.indistinguishable) or "none"
        lines.append("| " + " | ".join([cell.dataset, cell.family, cell.load_point.label, *cols, best, alike]) + " |")
    out = "Best K per load\n\n" + "\n".join(lines) + f"\n\n- Told apart by: {result.method}."
    for s in result.schedules:
        sched = ", ".join(f"C={c} → K={k}" for c, k in s.by_concurrency.items())
        out += f"\n- Schedule {s.family}: {sched}. " + (f"Serve it with: `{s.flag}`" if s.flag else s.note)
    return out


# ------------------------------------------------------------------------------ profiles and their replay

ESTIMATED = "*"


def rates_text(rates: Sequence[float | None] | None, estimated: Sequence[int] = ()) -> str:
    """``0.618 0.365 0.124*``: p_1..p_k, * on each position filled by the profile's fill rule (1-based)."""
    if not rates:
        return "—"
    return " ".join("—" if p is None else f"{p:.3f}" + (ESTIMATED if i in estimated else "") for i, p in enumerate(rates, 1))


def _x(value: float | None, ci: Sequence[float | None] | None = None) -> str:
    if value is None:
        return "—"
    low, high = ci if ci and len(ci) == 2 else (None, None)
    return f"{value:.3f}x" + (f" [{low:.2f}–{high:.2f}]" if low is not None and high is not None else "")


PROFILE_NOTE = (
    "p_i = P(the first i drafts of a step all accepted), unconditional, from the engine's per-position counters "
    "(accepted at position i ÷ drafts); conditional = p_i ÷ p_(i−1); mean AL = 1 + Σ p_i. * = estimated by the "
    "profile's fill_rule (the input gave fewer positions than k), not measured. Speedup = the profile run's own "
    "speedup_vs_baseline [95% CI].")


def profile_markdown(profiles: Sequence[ProfileEntry]) -> str:
    header = ["Config", "Dataset", "Load", "k", "p_1…p_k", "Conditional", "Mean AL", "Speedup", "Categories"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for p in profiles:
        est = p.estimated_positions or []
        cat = ", ".join(f"{c} {v.mean_acceptance_length:.2f}" for c, v in (p.categories or {}).items()
                        if v.mean_acceptance_length is not None)
        lines.append("| " + " | ".join([
            str(p.config), str(p.dataset), p.load or "—", str(p.num_speculative_tokens),
            rates_text(p.acceptance_per_position, est), rates_text(p.acceptance_conditional, est),
            "—" if p.mean_acceptance_length is None else f"{p.mean_acceptance_length:.3f}", _x(p.speedup_vs_baseline, p.speedup_ci95),
            (cat + " (stream)") if cat else "—"]) + " |")
    return "Acceptance profiles\n\n" + "\n".join(lines) + "\n\n- " + PROFILE_NOTE


def measured_length_text(p: ReplayPoint) -> str:
    """The replay's counter acceptance length, ⚠ with the gap when it is more than 3 % off the profile's."""
    if p.measured_length is None:
        return "—"
    gap = p.length_gap
    return f"{p.measured_length:.2f}" + (f" ⚠ {gap:+.1%}" if p.flagged and gap is not None else "")


def replayed_text(p: ReplayPoint) -> str:
    if p.mode == "rates":
        return rates_text(p.rates, p.estimated)
    return f"mean {p.replayed_length:.2f} only ({p.note})" if p.note else f"mean {p.replayed_length:.2f} only"


def profile_speedup_text(p: ReplayPoint) -> str:
    return _x(p.profile_speedup, p.profile_ci) + ("†" if p.profile_speedup is not None and not p.profile_load_known else "")


REPLAY_NOTE = (
    "Predicted = speedup_vs_baseline [95% CI] of the config served at the profile's acceptance (its data set, k = "
    "the config's num_speculative_tokens): vLLM's synthetic rejection sampler at synthetic_acceptance_rates p_1..p_k "
    "(the drafter's real compute, acceptance fixed per position), or on SGLang SGLANG_SIMULATE_ACC_LEN at the "
    "profile's mean length only. Profile speedup = the profile's own measured speedup at that load († = the profile "
    "does not say at which load it was measured). Measured AL = the replay's counter acceptance length; "
    f"⚠ = more than {LENGTH_FLAG:.0%} from the profile's. * = a position the profile estimated (its fill_rule), "
    "not measured. Synthetic acceptance commits draft tokens whether or not they match the target's, so Same output "
    "and accuracy do not apply to these rows.")


def replay_markdown(replay: Replay) -> str:
    points = replay.points
    if not points:
        return ""
    header = ["Dataset", "Config", "k", "Load", "Predicted speedup", "Profile speedup", "Profile AL", "Measured AL",
              "Acceptance replayed"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for p in points:
        lines.append("| " + " | ".join([
            p.dataset, p.config, "—" if p.k is None else str(p.k), p.load.label, _x(p.predicted, p.ci),
            profile_speedup_text(p), f"{p.profile_length:.2f}", measured_length_text(p), replayed_text(p)]) + " |")
    profile = replay.profile
    src = f"Profile {profile.path} (sha256 {str(profile.sha256)[:12]}…)" if profile.path else "Profile"
    skipped = replay.skipped
    notes = [REPLAY_NOTE] + ([f"Not replayed (the profile has no entry for them): {', '.join(skipped)}."] if skipped else [])
    return (f"What-if: predicted speedup at the profile's acceptance\n\n{src}\n\n" + "\n".join(lines)
            + "".join(f"\n\n- {n}" for n in notes))
