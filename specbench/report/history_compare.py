"""Two runs of a suite side by side: ``specbench compare OLD NEW`` and ``report DIR --compare``, metric by
metric with the gate's noise rule.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ..errors import ResultsError
from ..gate.judge import Measure, comparability_problems
from ..gate.render import fmt_measure
from ..gate.runs import RUN_METRICS, MetricChange, RunComparison, compare_runs
from ..run.history import RunEntry, SuiteHistory
from ..schemas.cell import Cell
from ..schemas.meta import RunMeta
from ..suite.gate import parse_percent
from .csv_rows import to_csv
from .history_report import heading, run_line, status_line

VERDICT_MD = {"better": "better ▲", "worse": "**worse ▼**", "within noise": "within noise"}


def comparison_of(old: RunEntry, new: RunEntry, tolerance: float = 0.0) -> RunComparison:
    return compare_runs(old.rows or [], new.rows or [], (str(old.path), str(new.path)), tolerance=tolerance)


def parse_tolerance(text: str | None) -> float:
    """``--tolerance 5%``: the gate's percentage syntax (a bare number is refused there too)."""
    if text is None:
        return 0.0
    try:
        return parse_percent(text)
    except ValueError as err:
        raise ResultsError(f"--tolerance: {err}") from None


def rule_text(tolerance: float) -> str:
    slack = f"changes within {tolerance * 100:g}% count as within noise; " if tolerance else ""
    return ("Verdicts use the gate's noise rule (docs/gate.md): worse/better only when the 95% CIs do not "
            f"overlap; {slack}without a CI, point values decide (marked “no CI”; `--tolerance PCT%` adds slack).")


def comparability(old_meta: RunMeta | None, new_meta: RunMeta | None) -> list[str]:
    if not old_meta or not new_meta:
        return ["a run has no meta.json: cannot verify the runs are comparable"]
    return comparability_problems(new_meta, old_meta)


def verdict_text(m: MetricChange, markup: dict[str, str] | None = None) -> str:
    text = (markup or {}).get(m.verdict, m.verdict)
    notes = [m.why] if m.why else []
    if m.point_only and m.verdict in ("better", "worse"):
        notes.append("no CI")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def comparison_markdown(old: RunEntry, new: RunEntry, title: str, tolerance: float = 0.0) -> str:
    comp = comparison_of(old, new, tolerance)
    labels = dict(RUN_METRICS)
    counts = comp.counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in ("worse", "better", "within noise", "not comparable",
                                                     "not measured") if counts.get(v))
    out = [title, "", f"Old: {run_line(old)}", f"New: {run_line(new)}", ""]
    problems = comparability(old.meta, new.meta)
    if problems:
        out += [f"⚠ not comparable (new vs old): {'; '.join(problems)}", ""]
    out += [f"{len(comp.cells)} cell(s) in both runs: {summary or 'nothing to compare'}. {rule_text(tolerance)} "
            "Rows null in both runs, and the baseline's own speedup, are left out of the table.", ""]
    out += ["| Config | Data set | Load | Metric | Old | New | Change | Verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell in comp.cells:
        for m in cell.metrics:
            if m.vacuous:
                continue
            change = "—" if m.change is None else f"{m.change * 100:+.1f}%"
            verdict = verdict_text(m, VERDICT_MD)
            out.append(f"| {cell.cell.config} | {cell.cell.dataset} | {cell.cell.point.label} | {labels[m.metric]} | "
                       f"{fmt_measure(m.old)} | {fmt_measure(m.new)} | {change} | {verdict} |")
    for side, cells in (("old", comp.only_old), ("new", comp.only_new)):
        if cells:
            out += ["", f"Only in the {side} run ({len(cells)}): " + "; ".join(str(c) for c in cells)]
    return "\n".join(out)


def _ci(m: Measure | None) -> list[float] | None:
    return None if m is None or m.ci is None else list(m.ci)


def cell_json(cell: Cell) -> dict[str, str | float | None]:
    """A cell's columns in a comparison's JSON and CSV: its load point as a results row writes it."""
    concurrency, rate = cell.point.columns
    return {"config": cell.config, "dataset": cell.dataset, "concurrency": concurrency, "request_rate": rate}


def comparison_json(old: RunEntry, new: RunEntry, tolerance: float = 0.0) -> dict[str, Any]:
    """The object ``--format json`` writes for two runs."""
    comp = comparison_of(old, new, tolerance)
    return {
        "old": asdict(old.provenance()), "new": asdict(new.provenance()),
        "not_comparable": comparability(old.meta, new.meta),
        "tolerance": tolerance,
        "counts": comp.counts(),
        "cells": [{**cell_json(c.cell), "metrics": {m.metric: {
            "old": None if m.old is None else m.old.value, "old_ci95": _ci(m.old),
            "new": None if m.new is None else m.new.value, "new_ci95": _ci(m.new),
            "change": m.change, "verdict": m.verdict, "why": m.why or None, "point_only": m.point_only}
            for m in c.metrics}} for c in comp.cells],
        "only_old": [cell_json(c) for c in comp.only_old],
        "only_new": [cell_json(c) for c in comp.only_new],
    }


def comparison_csv(pairs: Sequence[tuple[str, RunEntry, RunEntry]], tolerance: float = 0.0) -> str:
    """``--format csv``: one row per cell and metric of each (suite, old, new), then one per cell in one run only."""
    rows: list[dict[str, Any]] = []
    for suite, old, new in pairs:
        comp = comparison_of(old, new, tolerance)
        head = {"suite": suite, "old_run": str(old.path), "new_run": str(new.path)}
        for c in comp.cells:
            for m in c.metrics:
                old_ci, new_ci = m.old.ci if m.old else None, m.new.ci if m.new else None
                rows.append({**head, **cell_json(c.cell), "metric": m.metric, "old": None if m.old is None else m.old.value,
                             "old_ci_low": old_ci[0] if old_ci else None, "old_ci_high": old_ci[1] if old_ci else None,
                             "new": None if m.new is None else m.new.value,
                             "new_ci_low": new_ci[0] if new_ci else None, "new_ci_high": new_ci[1] if new_ci else None,
                             "change": m.change, "verdict": m.verdict, "why": m.why or None})
        for side, cells in (("old", comp.only_old), ("new", comp.only_new)):
            rows += [{**head, **cell_json(cell), "verdict": f"only in the {side} run"} for cell in cells]
    return to_csv(rows)


def comparison_text(old: RunEntry, new: RunEntry, fmt: str, tolerance: float = 0.0) -> str:
    """``specbench compare OLD NEW`` as ``fmt`` (markdown, json, csv); a run that is not complete is said under
    the markdown."""
    if fmt == "json":
        return json.dumps(comparison_json(old, new, tolerance), indent=2)
    if fmt == "csv":
        return comparison_csv([(new.suite or old.suite or "", old, new)], tolerance)
    text = comparison_markdown(old, new, f"## {old.path} → {new.path}", tolerance)
    notes = [status_line(r) for r in (old, new) if not r.complete]
    return text + ("\n\n⚠ not complete (its numbers may be partial):\n" + "\n".join(notes) if notes else "")


def compare_report(histories: Sequence[SuiteHistory], fmt: str, tolerance: float = 0.0) -> str:
    """``report DIR --compare``: per suite, the latest complete run against the previous one."""
    pairs = [(h, h.latest_pair) for h in histories]
    if fmt == "json":
        return json.dumps({"suites": [{"suite": h.name, **(comparison_json(*p, tolerance) if p else {
            "note": f"{len(h.complete)} complete run(s): nothing to compare"})} for h, p in pairs]}, indent=2)
    if fmt == "csv":
        return comparison_csv([(h.name, *p) for h, p in pairs if p], tolerance)
    out = []
    for h, p in pairs:
        title = heading(h) + ": latest complete run vs the one before"
        if p is None:
            out.append(f"{title}\n\n{len(h.complete)} complete run(s): nothing to compare.")
        else:
            out.append(comparison_markdown(p[0], p[1], title, tolerance))
        others = [status_line(r) for r in h.runs if not r.complete]
        if others:
            out.append("Runs left out (not complete):\n" + "\n".join(others))
    return "\n\n".join(out)

