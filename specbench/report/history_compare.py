"""Two runs of a suite side by side: ``specbench compare OLD NEW`` and ``report DIR --compare``, metric by
metric with the gate's noise rule.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..gate.judge import comparability_problems
from ..gate.render import fmt_measure
from ..gate.runs import RUN_METRICS, compare_runs
from ..run.readback import load_run
from ..schemas.meta import RunMeta
from ..suite.gate import parse_percent
from .csv_rows import to_csv
from .history import (
    RunEntry,
    SuiteHistory,
    classify,
    heading,
    parse_time,
    run_line,
    status_line,
)

VERDICT_MD = {"better": "better ▲", "worse": "**worse ▼**", "within noise": "within noise"}


def comparison_of(old: RunEntry, new: RunEntry, tolerance: float = 0.0):
    return compare_runs(old.records or [], new.records or [], (str(old.path), str(new.path)), tolerance=tolerance)


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


def verdict_text(m, markup: dict[str, str] | None = None) -> str:
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
            out.append(f"| {cell.cell.config} | {cell.cell.dataset} | {cell.cell.load.label} | {labels[m.metric]} | "
                       f"{fmt_measure(m.old)} | {fmt_measure(m.new)} | {change} | {verdict} |")
    for side, cells in (("old", comp.only_old), ("new", comp.only_new)):
        if cells:
            out += ["", f"Only in the {side} run ({len(cells)}): " + "; ".join(str(c) for c in cells)]
    return "\n".join(out)


def _ci(m) -> list[float] | None:
    return None if m is None or m.ci is None else list(m.ci)


def comparison_dict(old: RunEntry, new: RunEntry, tolerance: float = 0.0) -> dict[str, Any]:
    comp = comparison_of(old, new, tolerance)

    def cell_dict(c) -> dict[str, Any]:
        load = {"concurrency": None, "request_rate": None}
        if c.load.value is not None:
            load["request_rate" if c.load.kind == "rate" else "concurrency"] = c.load.value
        return {"config": c.config, "dataset": c.dataset, **load}

    return {
        "old": old.provenance(), "new": new.provenance(),
        "not_comparable": comparability(old.meta, new.meta),
        "tolerance": tolerance,
        "counts": comp.counts(),
        "cells": [{**cell_dict(c.cell), "metrics": {m.metric: {
            "old": None if m.old is None else m.old.value, "old_ci95": _ci(m.old),
            "new": None if m.new is None else m.new.value, "new_ci95": _ci(m.new),
            "change": m.change, "verdict": m.verdict, "why": m.why or None, "point_only": m.point_only}
            for m in c.metrics}} for c in comp.cells],
        "only_old": [cell_dict(c) for c in comp.only_old],
        "only_new": [cell_dict(c) for c in comp.only_new],
    }


def comparison_rows(suite: str, old: RunEntry, new: RunEntry, tolerance: float = 0.0) -> list[dict[str, Any]]:
    d = comparison_dict(old, new, tolerance)
    head = {"suite": suite, "old_run": d["old"]["path"], "new_run": d["new"]["path"]}
    rows = []
    for c in d["cells"]:
        key = {k: c[k] for k in ("config", "dataset", "concurrency", "request_rate")}
        for metric, m in c["metrics"].items():
            rows.append({**head, **key, "metric": metric, "old": m["old"],
                         "old_ci_low": (m["old_ci95"] or [None])[0], "old_ci_high": (m["old_ci95"] or [None, None])[1],
                         "new": m["new"], "new_ci_low": (m["new_ci95"] or [None])[0],
                         "new_ci_high": (m["new_ci95"] or [None, None])[1], "change": m["change"],
                         "verdict": m["verdict"], "why": m["why"]})
    for side in ("old", "new"):
        for c in d[f"only_{side}"]:
            rows.append({**head, **c, "verdict": f"only in the {side} run"})
    return rows


def compare_report(histories: Sequence[SuiteHistory], fmt: str, tolerance: float = 0.0) -> str:
    """``report DIR --compare``: per suite, the latest complete run against the previous one."""
    pairs = [(h, h.latest_pair) for h in histories]
    if fmt == "json":
        return json.dumps({"suites": [{"suite": h.name, **(comparison_dict(*p, tolerance) if p else {
            "note": f"{len(h.complete)} complete run(s): nothing to compare"})} for h, p in pairs]}, indent=2)
    if fmt == "csv":
        return to_csv([row for h, p in pairs if p for row in comparison_rows(h.name, *p, tolerance)])
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


def read_named_run(path: Path) -> RunEntry:
    """A run named on the command line: read it strictly (a damaged run is an error here)."""
    run = load_run(path)
    status, reason = classify(run.meta, run.rows)
    return RunEntry(run.path.parent if run.path else path, run.meta, run.rows, status, reason,
                    parse_time(run.meta.started_at if run.meta else None))
