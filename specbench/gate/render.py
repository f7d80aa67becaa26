"""The verdict table (stdout and the CI step summary) and the one-line failure message."""

from __future__ import annotations

from collections.abc import Sequence

from ..suite.gate import Outcome
from .judge import Measure, Verdict


def fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3f}"


def fmt_measure(m: Measure | None) -> str:
    if m is None:
        return "—"
    return fmt(m.value) if m.ci is None else f"{fmt(m.value)} [{fmt(m.ci[0])}, {fmt(m.ci[1])}]"


def fmt_threshold(v: Verdict) -> str:
    check = v.check
    if check.kind == "min":
        return f"≥ {check.value:g}"
    if check.kind == "max":
        return f"≤ {check.value:g}"
    pct = f"{check.value * 100:g}%"
    if check.lower_is_better:
        return f"rise ≤ {pct} (≤ {fmt(v.limit)})"
    return f"drop ≤ {pct} (≥ {fmt(v.limit)})"


VERDICT_TEXT: dict[Outcome, str] = {
    "pass": "✅ pass",
    "within noise": "⚠️ within noise",
    "fail": "❌ FAIL",
}


def render_markdown(verdicts: Sequence[Verdict], candidate: str, reference: str | None) -> str:
    """The verdict table with a one-line headline; same text for stdout and the step summary."""
    fails = sum(v.outcome == "fail" for v in verdicts)
    noisy = sum(v.outcome == "within noise" for v in verdicts)
    status = "FAIL" if fails else "PASS"
    against = f" vs reference `{reference}`" if reference else ""
    lines = [
        f"### specbench gate: {status}",
        "",
        f"Candidate `{candidate}`{against}: {len(verdicts)} checks, "
        f"{fails} regressed, {noisy} within noise.",
        "",
    ]
    with_load = any(v.cell.point.recorded for v in verdicts)
    header = ["Metric", "Config", "Data set"] + (["Load"] if with_load else [])
    header += ["Reference", "Candidate", "Change", "Threshold", "Verdict"]
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for v in verdicts:
        change = "—" if v.change is None else f"{v.change * 100:+.1f}%"
        row = [v.check.metric, v.cell.config, v.cell.dataset]
        if with_load:
            row.append(v.cell.point.label if v.cell.point.recorded else "—")
        row += [fmt_measure(v.reference), fmt_measure(v.candidate), change]
        row += [fmt_threshold(v), VERDICT_TEXT[v.outcome]]
        lines.append("| " + " | ".join(row) + " |")
    if noisy:
        lines += [
            "",
            "_within noise_: the value crosses the threshold but the 95% confidence interval "
            "does not rule out a pass, so it is not counted as a regression (docs/gate.md).",
        ]
    return "\n".join(lines) + "\n"


def failure_line(verdicts: Sequence[Verdict], shown: int = 3) -> str:
    """One stderr line naming the regressions."""
    fails = [v for v in verdicts if v.outcome == "fail"]
    parts = [
        f"{v.cell}: {v.check.metric} {fmt(v.candidate.value)} vs {fmt_threshold(v)}"
        for v in fails[:shown]
    ]
    more = f"; +{len(fails) - shown} more" if len(fails) > shown else ""
    return f"{len(fails)} regression(s): " + "; ".join(parts) + more
