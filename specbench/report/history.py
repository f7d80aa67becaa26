"""A directory of runs as a history: find the runs under it, group them by suite, pick what to show.

``specbench run`` writes each run to ``results/<suite>-<timestamp>/``; ``specbench report results/``
then means "the latest complete run of each suite", ``--all`` every complete run, and ``--compare``
the latest against the one before it. A run is *complete* when its meta.json says it finished,
no config or cell failed or was cut, and every cell of the suite (config × data set × load point,
every repeat) is there. Interrupted, failed, unfinished and unreadable runs are listed one line
each with the reason, and never shown as if they were results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ResultsError, SpecbenchError
from ..row import ResultRow
from .load import load_run, refusal
from .model import Load, load_of

Record = ResultRow

COMPLETE = "complete"
SHOWN_FORMATS = ("markdown", "json", "csv", "html")


# ------------------------------------------------------------------------------------- a run


@dataclass(eq=False)
class RunEntry:
    """One run directory found under a root, read and classified."""

    path: Path
    meta: dict[str, Any]
    records: list[Record] | None
    status: str  # complete | interrupted | failed | unfinished | unreadable
    reason: str = ""
    started: dt.datetime | None = None

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE

    @property
    def suite(self) -> str | None:
        suite = self.meta.get("suite")
        name = suite.get("name") if isinstance(suite, dict) else None
        return name if isinstance(name, str) else None

    @property
    def group(self) -> str:
        """Runs are grouped by suite name; a run without one (no meta.json) is a group of its own."""
        return self.suite if self.suite is not None else f"(no suite recorded) {self.path}"

    def provenance(self) -> dict[str, Any]:
        """Which run this is: suite, times, engine versions, suite-file hash and git state."""
        meta = self.meta
        source = _dict(meta.get("suite_file"))
        git = _dict(source.get("git"))
        return {
            "path": str(self.path),
            "suite": self.suite,
            "status": self.status,
            "reason": self.reason or None,
            "started_at": _str(meta.get("started_at")),
            "finished_at": _str(meta.get("finished_at")),
            "engine": engines(self.records or [], meta),
            "specbench_version": _str(meta.get("specbench_version")),
            "suite_sha256": _str(source.get("sha256")),
            "git_commit": _str(git.get("commit")),
            "git_dirty": git.get("dirty") if isinstance(git.get("dirty"), bool) else None,
        }


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def engines(records: Sequence[Record], meta: dict[str, Any]) -> list[str]:
    """``engine version`` of every server of the run, from its rows, else from meta.json's servers."""
    found = [f"{r.engine} {r.server_version or ''}".strip() for r in records
             if isinstance(r.engine, str)]
    if not found and isinstance(meta.get("servers"), dict):
        found = [f"{s.get('engine')} {s.get('version') or ''}".strip() for s in meta["servers"].values()
                 if isinstance(s, dict) and isinstance(s.get("engine"), str)]
    return list(dict.fromkeys(found))


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO time as written by the runner; a time without a zone is taken as UTC."""
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def show_time(t: dt.datetime | None) -> str:
    return "start time not recorded" if t is None else t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def is_run_dir(path: Path) -> bool:
    return (path / "results.json").is_file() or (path / "meta.json").is_file()


def find_run_dirs(root: Path) -> list[Path]:
    """Run directories at or under ``root`` (a run's own subfolders, and hidden folders, are not searched)."""
    if is_run_dir(root):
        return [root]
    found = []
    for here, dirs, files in os.walk(root):
        if "results.json" in files or "meta.json" in files:
            found.append(Path(here))
            dirs[:] = []
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return found


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ResultsError(f"{path}: unreadable JSON ({err})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    return data


def read_entry(path: Path) -> RunEntry:
    """Read one run directory; damage makes it an ``unreadable`` entry, not an error for the others."""
    try:
        if (path / "results.json").is_file():
            run = load_run(path, quiet=True)
            if run.problems:  # a repaired value would make a damaged run look complete
                raise ResultsError(refusal(run.problems))
            meta, records = run.meta, run.rows
            if not isinstance(meta, dict):
                raise ResultsError(f"{path / 'meta.json'}: expected a JSON object")
            for i, r in enumerate(records):
                if not (isinstance(r.run, str) and isinstance(r.dataset, str)):
                    raise ResultsError(f"{path / 'results.json'}: record {i} has no string 'run' and 'dataset'")
        else:
            meta, records = _read_meta(path / "meta.json"), None
        status, reason = classify(meta, records)
    except SpecbenchError as err:
        return RunEntry(path, {}, None, "unreadable", str(err))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        return RunEntry(path, {}, None, "unreadable", f"{path}: {type(err).__name__}: {err}".splitlines()[0])
    return RunEntry(path, meta, records, status, reason, parse_time(meta.get("started_at")))


# -------------------------------------------------------------------------------- completeness


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when meta.json holds an object there, else empty: its content is not trusted."""
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def expected_cells(meta: dict[str, Any]) -> set[tuple[str, str, Load]] | None:
    """Every cell the suite asked for, from the suite copy in meta.json; None when it cannot be told."""
    suite = _dict(meta.get("suite"))
    raw = _dict(suite.get("raw"))
    comp = _dict(meta.get("comparability"))
    configs, datasets = comp.get("configs"), comp.get("datasets")
    load = _dict(raw.get("load"))
    if not isinstance(configs, dict) or not isinstance(datasets, dict) or not configs or not datasets:
        return None
    try:
        if load.get("request_rate") is not None:
            loads = [Load("rate", float(v)) for v in _as_list(load["request_rate"])]
        else:
            loads = [Load("concurrency", float(v)) for v in _as_list(load.get("concurrency", 1))]
    except (TypeError, ValueError):
        return None
    return {(c, d, ld) for c in configs for d in datasets for ld in loads}


def _cell_name(r: Record) -> str:
    return f"{r.run} / {r.dataset} / {load_of(r).label}"


def classify(meta: dict[str, Any], records: list[Record] | None) -> tuple[str, str]:
    """(status, one-line reason) of a run; the reason is empty for a complete run."""
    if records is None:
        if not meta.get("finished_at"):
            return "unfinished", "no cell measured and no finished_at in meta.json: still running, or killed"
        return "failed", "no cell measured (no results.json)"
    if meta and not meta.get("finished_at"):
        return "unfinished", f"{len(records)} cell(s) written but no finished_at in meta.json: still running, or killed"
    failed_configs = _dict(meta.get("failed_configs"))
    failed = [_cell_name(r) for r in records if r.status == "failed"]
    if failed_configs or failed:
        parts = [f"config {name} failed: {str(err).splitlines()[0] if str(err) else '?'}"
                 for name, err in failed_configs.items()]
        parts += [f"cell {c} failed" for c in failed[:3]] + ([f"+{len(failed) - 3} more"] if len(failed) > 3 else [])
        return "failed", "; ".join(parts)
    cut = [_cell_name(r) for r in records if r.status not in (None, "ok")]
    expected = expected_cells(meta)
    present = {(r.run, r.dataset, load_of(r)) for r in records}
    missing = len(expected - present) if expected is not None else 0
    raw = (meta.get("suite") or {}).get("raw") if isinstance(meta.get("suite"), dict) else None
    repeats = ((raw or {}).get("load") or {}).get("repeats", 1) if isinstance(raw, dict) else 1
    short = [_cell_name(r) for r in records if isinstance(repeats, int) and isinstance(r.repeats, int)
             and r.repeats < repeats]
    if cut or missing or short:
        total = len(expected) if expected is not None else len(records)
        parts = [f"{len(present & expected) if expected is not None else len(records)} of {total} cells measured"]
        parts += [f"cell {c} {next(r.status for r in records if _cell_name(r) == c)}" for c in cut[:3]]
        parts += [f"cell {c} has fewer than {repeats} repeats" for c in short[:3]]
        return "interrupted", "; ".join(parts)
    return COMPLETE, ""


# -------------------------------------------------------------------------------- the history


@dataclass
class SuiteHistory:
    """The runs of one suite under the roots, oldest first."""

    name: str
    runs: list[RunEntry]
    shown: list[RunEntry] = field(default_factory=list)

    @property
    def complete(self) -> list[RunEntry]:
        return [r for r in self.runs if r.complete]

    @property
    def latest_pair(self) -> tuple[RunEntry, RunEntry] | None:
        """(previous, latest) complete runs, for ``--compare``."""
        done = self.complete
        return (done[-2], done[-1]) if len(done) >= 2 else None


def _order(run: RunEntry) -> tuple:
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    return (run.started or epoch, str(run.path))


def parse_since(text: str) -> dt.datetime:
    """``--since``: an ISO date or date-time; without a zone it is local time."""
    try:
        t = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ResultsError(f"--since {text!r}: expected a date like 2026-12-01 or 2026-12-01T14:00") from None
    return t if t.tzinfo else t.astimezone()


def discover(roots: Iterable[Path]) -> list[RunEntry]:
    roots = [Path(r) for r in roots]
    for root in roots:
        if not root.exists():
            raise ResultsError(f"{root}: not found")
    found: dict[Path, Path] = {}
    for root in roots:
        for d in find_run_dirs(root):
            found.setdefault(d.resolve(), d)
    return [read_entry(d) for d in found.values()]


def history(roots: Sequence[Path], *, suite: str | None = None, since: dt.datetime | None = None,
            show_all: bool = False) -> list[SuiteHistory]:
    """Runs under ``roots`` grouped by suite (by name), filtered, with the ones to show picked."""
    runs = discover(roots)
    where = ", ".join(str(r) for r in roots)
    if not runs:
        raise ResultsError(f"{where}: no run directories under it (none holds a results.json or meta.json)")
    if suite is not None:
        known = sorted({r.suite for r in runs if r.suite})
        runs = [r for r in runs if r.suite == suite]
        if not runs:
            raise ResultsError(f"{where}: no run of suite {suite!r} (suites found: {', '.join(known) or 'none'})")
    if since is not None:
        runs = [r for r in runs if r.started is not None and r.started >= since]
        if not runs:
            raise ResultsError(f"{where}: no run started since {show_time(since)}")
    groups: dict[str, list[RunEntry]] = {}
    for r in sorted(runs, key=_order):
        groups.setdefault(r.group, []).append(r)
    out = []
    for name in sorted(groups):
        h = SuiteHistory(name, groups[name])
        done = h.complete
        h.shown = done if show_all else done[-1:]
        out.append(h)
    return out


def reference_for(reference: Path, candidate_dir: Path, candidate_meta: Mapping[str, Any] | None) -> Path:
    """``gate --reference DIR``: a run directory or results.json is itself; a directory of runs means
    the latest complete run of the candidate's suite started before the candidate."""
    from ..gate import GateError

    reference = Path(reference)
    if not reference.is_dir() or is_run_dir(reference):
        return reference
    meta = candidate_meta or {}
    name = (meta.get("suite") or {}).get("name") if isinstance(meta.get("suite"), dict) else None
    started = parse_time(meta.get("started_at"))
    if not isinstance(name, str) or started is None:
        raise GateError(f"--reference {reference}: the candidate's meta.json records no suite name and start time, "
                        "so no run of the same suite can be picked; give a run directory")
    own = candidate_dir.resolve()
    earlier = [r for r in discover([reference]) if r.complete and r.suite == name
               and r.path.resolve() != own and r.started is not None and r.started < started]
    if not earlier:
        raise GateError(f"--reference {reference}: no complete run of suite {name!r} started before the candidate "
                        f"({show_time(started)})")
    ref = max(earlier, key=_order)
    print(f"specbench gate: reference {ref.path}: the latest complete run of suite {name!r} before the candidate "
          f"(started {show_time(ref.started)})", file=sys.stderr)
    return ref.path


# -------------------------------------------------------------------------------- rendering


def run_line(run: RunEntry) -> str:
    """Which run a table comes from, in one markdown line."""
    p = run.provenance()
    parts = [f"`{run.path}`", f"started {show_time(run.started)}"]
    if p["engine"]:
        parts.append("engine " + ", ".join(p["engine"]))
    if p["suite_sha256"]:
        parts.append(f"suite file sha256 `{p['suite_sha256'][:12]}`")
    if p["git_commit"]:
        parts.append(f"git `{p['git_commit'][:10]}`" + (" (suite file differs from that commit)" if p["git_dirty"] else ""))
    if not p["suite_sha256"] and not p["git_commit"] and run.meta:
        parts.append("suite file hash and git commit not recorded (run made before they were)")
    if not run.meta:
        parts.append("no meta.json")
    return " · ".join(parts)


def status_line(run: RunEntry) -> str:
    return f"- `{run.path}` (started {show_time(run.started)}): **{run.status}** — {run.reason}"


def other_runs(h: SuiteHistory) -> list[str]:
    """One line per run of the suite that is not shown: not complete (and why), or older."""
    lines = []
    for run in h.runs:
        if run in h.shown:
            continue
        if run.complete:
            lines.append(f"- `{run.path}` (started {show_time(run.started)}): complete, older — shown with `--all`")
        else:
            lines.append(status_line(run) + f"; not shown (its own table: `specbench report {run.path}`)")
    return lines


def _heading(h: SuiteHistory) -> str:
    return f"## Suite `{h.name}`" if not h.name.startswith("(") else f"## {h.name}"


def markdown(histories: Sequence[SuiteHistory], roots: Sequence[Path], show_all: bool) -> str:
    from .markdown import markdown as table

    n_runs = sum(len(h.runs) for h in histories)
    what = "every complete run of each suite" if show_all else "the latest complete run of each suite (`--all`: every one)"
    out = [f"# specbench results under {', '.join(f'`{r}`' for r in roots)}", "",
           f"{n_runs} run(s) of {len(histories)} suite(s); showing {what}."]
    for h in histories:
        out += ["", _heading(h)]
        if not h.shown:
            out += ["", "No complete run of this suite."]
        for run in h.shown:
            out += ["", ("Run " if show_all else "Latest complete run: ") + run_line(run), "",
                    table(run.records or [], run.meta)]
        others = other_runs(h)
        if others:
            out += ["", "Other runs of this suite:", *others]
    return "\n".join(out)


def as_json(histories: Sequence[SuiteHistory], roots: Sequence[Path], show_all: bool) -> str:
    suites = []
    for h in histories:
        runs = []
        for run in h.runs:
            entry = {**run.provenance(), "shown": run in h.shown}
            if run in h.shown:
                entry["records"] = [r.to_dict(reference_first=False) for r in run.records or []]
            runs.append(entry)
        suites.append({"suite": h.name, "runs": runs})
    return json.dumps({"roots": [str(r) for r in roots], "selection": "all" if show_all else "latest",
                       "suites": suites}, indent=2)


RUN_COLUMNS = ("suite", "run_dir", "run_started_at", "run_status", "run_note")


def as_csv(histories: Sequence[SuiteHistory]) -> str:
    """One row per cell of each shown run, then one row per run that is not complete (its status and
    why, no numbers); the run_* columns say which run every row comes from."""
    from .csv_rows import to_csv

    rows: list[dict[str, Any]] = []
    for h in histories:
        for run in h.shown:
            head = {"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.get("started_at"),
                    "run_status": run.status, "run_note": None}
            rows += [{**head, **r.to_dict(reference_first=False)} for r in run.records or []]
    for h in histories:
        for run in h.runs:
            if not run.complete:
                rows.append({"suite": h.name, "run_dir": str(run.path), "run_started_at": run.meta.get("started_at"),
                             "run_status": run.status, "run_note": run.reason})
    return to_csv(rows)


# -------------------------------------------------------------------------------- comparison


def comparison_of(old: RunEntry, new: RunEntry, tolerance: float = 0.0):
    from ..compare import compare_runs

    return compare_runs(old.records or [], new.records or [], (str(old.path), str(new.path)), tolerance=tolerance)


def parse_tolerance(text: str | None) -> float:
    """``--tolerance 5%``: the gate's percentage syntax (a bare number is refused there too)."""
    from ..gate.checks import parse_percent

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


def comparability(old_meta: dict[str, Any], new_meta: dict[str, Any]) -> list[str]:
    from ..gate.judge import comparability_problems

    if not old_meta or not new_meta:
        return ["a run has no meta.json: cannot verify the runs are comparable"]
    return comparability_problems(new_meta, old_meta)


VERDICT_MD = {"better": "better ▲", "worse": "**worse ▼**", "within noise": "within noise"}


def verdict_text(m, markup: dict[str, str] | None = None) -> str:
    text = (markup or {}).get(m.verdict, m.verdict)
    notes = [m.why] if m.why else []
    if m.point_only and m.verdict in ("better", "worse"):
        notes.append("no CI")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def comparison_markdown(old: RunEntry, new: RunEntry, title: str, tolerance: float = 0.0) -> str:
    from ..compare import RUN_METRICS
    from ..gate.render import fmt_measure

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
    from .csv_rows import to_csv

    pairs = [(h, h.latest_pair) for h in histories]
    if fmt == "json":
        return json.dumps({"suites": [{"suite": h.name, **(comparison_dict(*p, tolerance) if p else {
            "note": f"{len(h.complete)} complete run(s): nothing to compare"})} for h, p in pairs]}, indent=2)
    if fmt == "csv":
        return to_csv([row for h, p in pairs if p for row in comparison_rows(h.name, *p, tolerance)])
    out = []
    for h, p in pairs:
        title = _heading(h) + ": latest complete run vs the one before"
        if p is None:
            out.append(f"{title}\n\n{len(h.complete)} complete run(s): nothing to compare.")
        else:
            out.append(comparison_markdown(p[0], p[1], title, tolerance))
        others = [status_line(r) for r in h.runs if not r.complete]
        if others:
            out.append("Runs left out (not complete):\n" + "\n".join(others))
    return "\n\n".join(out)


# -------------------------------------------------------------------------------- commands


def wants_history(args: argparse.Namespace) -> bool:
    """A directory that is not itself a run, or a history flag, makes ``report`` a history report."""
    flags = args.all or args.suite or args.since or args.compare or args.tolerance
    return bool(flags) or any(Path(p).is_dir() and not is_run_dir(Path(p)) for p in args.paths)


def report_cli(args: argparse.Namespace) -> int:
    roots = [Path(p) for p in args.paths]
    since = parse_since(args.since) if args.since else None
    tolerance = parse_tolerance(args.tolerance)
    if args.tolerance and not args.compare:
        raise ResultsError("--tolerance applies to --compare only")
    if args.format not in SHOWN_FORMATS:
        raise ResultsError(f"--format {args.format}: one run only, not the runs under a directory (formats here: {', '.join(SHOWN_FORMATS)})")
    histories = history(roots, suite=args.suite, since=since, show_all=args.all)
    if args.format == "html":
        from .history_html import write_history_html

        out = write_history_html(histories, roots, Path(args.output or "report.html"), args.all, args.compare, tolerance)
        print(f"wrote {out}")
        return 0
    if args.compare:
        text = compare_report(histories, args.format, tolerance)
    elif args.format == "json":
        text = as_json(histories, roots, args.all)
    elif args.format == "csv":
        text = as_csv(histories)
    else:
        text = markdown(histories, roots, args.all)
    _emit(text, args.output)
    return 0


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text + "\n")
    else:
        sys.stdout.write(text + "\n")


def _explicit(path: Path) -> RunEntry:
    """A run named on the command line: read it strictly (a damaged run is an error here)."""
    run = load_run(path)
    meta = run.meta if isinstance(run.meta, dict) else {}
    status, reason = classify(meta, run.rows)
    return RunEntry(run.path.parent if run.path else path, meta, run.rows, status, reason,
                    parse_time(meta.get("started_at")))


def compare_cli(args: argparse.Namespace) -> int:
    """``specbench compare OLD NEW``: every cell of two runs, metric by metric, with the gate's verdicts."""
    tolerance = parse_tolerance(args.tolerance)
    old, new = _explicit(Path(args.old)), _explicit(Path(args.new))
    if args.format == "json":
        text = json.dumps(comparison_dict(old, new, tolerance), indent=2)
    elif args.format == "csv":
        from .csv_rows import to_csv

        text = to_csv(comparison_rows(new.suite or old.suite or "", old, new, tolerance))
    else:
        notes = [status_line(r) for r in (old, new) if not r.complete]
        text = comparison_markdown(old, new, f"## {old.path} → {new.path}", tolerance)
        if notes:
            text += "\n\n⚠ not complete (its numbers may be partial):\n" + "\n".join(notes)
    _emit(text, args.output)
    return 0


TOLERANCE_HELP = ("changes smaller than PCT%% are never better/worse (the gate's allowed drop; default 0%%: only the "
                  "95%% CIs, or point values where there is none, decide)")


def register_compare(subparsers: Any) -> None:
    p = subparsers.add_parser("compare", help="compare two runs of a suite cell by cell (better / worse / within noise)")
    p.add_argument("old", help="the earlier run: run directory or results.json")
    p.add_argument("new", help="the later run: run directory or results.json")
    p.add_argument("--format", "-f", choices=("markdown", "json", "csv"), default="markdown")
    p.add_argument("--output", "-o", help="write to this file")
    p.add_argument("--tolerance", metavar="PCT%", help=TOLERANCE_HELP)
    p.set_defaults(func=compare_cli)


def add_report_flags(report: argparse.ArgumentParser) -> None:
    """``report``'s flags for directories of runs."""
    report.add_argument("--all", action="store_true", help="a directory of runs: every complete run, not just the latest of each suite")
    report.add_argument("--suite", metavar="NAME", help="a directory of runs: only runs of this suite")
    report.add_argument("--since", metavar="DATE", help="a directory of runs: only runs started at or after DATE (ISO, local time)")
    report.add_argument("--compare", action="store_true", help="a directory of runs: the latest complete run of each suite vs the one before")
    report.add_argument("--tolerance", metavar="PCT%", help="with --compare: " + TOLERANCE_HELP)
