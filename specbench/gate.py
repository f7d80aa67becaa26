"""`specbench gate`: turn a results run into a CI verdict (0 pass, 1 regression, 2 unusable input).

The core is pure: thresholds parse into ``Check`` objects, ``evaluate`` turns one check and the
cells of two runs into ``Verdict`` rows, ``render_markdown`` prints them. Reading runs and suites
and writing the step summary happen only in ``load_run``, ``load_suite_gate`` and ``run_cli``.
See docs/gate.md for the threshold syntax and the noise rule.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeGuard

from specbench.errors import ResultsError, SpecbenchError, SuiteError
from specbench.report.load import load_run as read_run

Kind = Literal["min", "max", "max_drop"]
Outcome = Literal["pass", "within noise", "fail"]

KINDS: tuple[Kind, ...] = ("min", "max", "max_drop")
FLAGS: dict[Kind, str] = {"min": "--min", "max": "--max", "max_drop": "--max-drop"}
CLI_ORIGIN = "command line"

LOWER_IS_BETTER_SUFFIX = "_ms"
LOWER_IS_BETTER_NAMES = frozenset({"failed_requests"})
NON_METRIC_KEYS = frozenset(
    {"dataset", "run", "method", "status", "ci95", "std", "concurrency"}
)

_SELECTOR = re.compile(
    r"^(?P<metric>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?::(?P<config>[^:@=\s]+))?"
    r"(?:@(?P<dataset>[^:@=\s]+))?$"
)
_PERCENT = re.compile(r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*%\s*$")


class GateError(SpecbenchError):
    """The gate cannot judge: bad threshold, missing cell or metric, runs that are not comparable."""


# ----------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Selector:
    """Which cells a threshold applies to; ``None`` config or dataset means every one."""

    metric: str
    config: str | None = None
    dataset: str | None = None

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse ``METRIC[:CONFIG][@DATASET]``; raises ValueError with the reason."""
        match = _SELECTOR.match(text.strip())
        if not match:
            raise ValueError(f"{text!r} is not METRIC[:CONFIG][@DATASET]")
        metric = match["metric"]
        if metric in NON_METRIC_KEYS:
            raise ValueError(f"{metric!r} is a key column, not a numeric metric")
        return cls(metric, match["config"], match["dataset"])

    def __str__(self) -> str:
        text = self.metric
        if self.config:
            text += f":{self.config}"
        if self.dataset:
            text += f"@{self.dataset}"
        return text

    def matches(self, cell: CellKey) -> bool:
        return (self.config is None or self.config == cell.config) and (
            self.dataset is None or self.dataset == cell.dataset
        )


@dataclass(frozen=True)
class Check:
    """One threshold. ``value`` is the floor/ceiling, or for ``max_drop`` the allowed fraction."""

    kind: Kind
    selector: Selector
    value: float
    origin: str = CLI_ORIGIN

    @property
    def metric(self) -> str:
        return self.selector.metric

    @property
    def lower_is_better(self) -> bool:
        return lower_is_better(self.metric)

    def label(self) -> str:
        value = f"{self.value * 100:g}%" if self.kind == "max_drop" else f"{self.value:g}"
        return f"{FLAGS[self.kind]} {self.selector}={value}"

    def describe(self) -> str:
        """The label plus where the threshold came from, for error messages."""
        return self.label() if self.origin == CLI_ORIGIN else f"{self.label()} (from {self.origin})"


@dataclass(frozen=True)
class CellKey:
    """A cell of the results matrix; ``concurrency`` and ``request_rate`` are part of the key only when recorded."""

    config: str
    dataset: str
    concurrency: int | None = None
    request_rate: float | None = None

    @property
    def load(self) -> str | None:
        if self.request_rate is not None:
            return f"rate {self.request_rate:g}/s"
        return None if self.concurrency is None else f"concurrency {self.concurrency}"

    def __str__(self) -> str:
        text = f"{self.config}@{self.dataset}"
        return text if self.load is None else f"{text} ({self.load})"


Cells = Mapping[CellKey, Mapping[str, Any]]


@dataclass(frozen=True)
class Measure:
    """A metric value and, when the run recorded one, its 95% confidence interval."""

    value: float
    ci: tuple[float, float] | None = None

    @property
    def best_high(self) -> float:
        """The highest value the CI allows: the most favourable reading of a higher-is-better metric."""
        return self.value if self.ci is None else max(self.value, self.ci[1])

    @property
    def best_low(self) -> float:
        return self.value if self.ci is None else min(self.value, self.ci[0])


@dataclass(frozen=True)
class Verdict:
    """One row of the verdict table: a check applied to one cell."""

    check: Check
    cell: CellKey
    candidate: Measure
    reference: Measure | None
    limit: float
    outcome: Outcome

    @property
    def change(self) -> float | None:
        """Relative change candidate vs reference, or None when there is no usable reference."""
        if self.reference is None or self.reference.value == 0:
            return None
        return (self.candidate.value - self.reference.value) / abs(self.reference.value)


@dataclass(frozen=True)
class Run:
    """A loaded run: its cells by key and its meta.json (None for old runs without one)."""

    path: Path
    cells: Cells
    meta: Mapping[str, Any] | None


def lower_is_better(metric: str) -> bool:
    """Latencies (``*_ms``) and ``failed_requests`` improve downwards; everything else upwards."""
    return metric.endswith(LOWER_IS_BETTER_SUFFIX) or metric in LOWER_IS_BETTER_NAMES


# ------------------------------------------------------------------------------ threshold parsing


def parse_percent(value: Any) -> float:
    """``"5%"`` -> 0.05. A bare number is refused: 5 vs 0.05 vs 500% is too easy to get wrong."""
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"expected a percentage like '5%', got {value!r}")
    return float(match["num"]) / 100


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_number(value: Any) -> float:
    if not is_number(value) or not math.isfinite(value):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def make_check(kind: Kind, key: str, value: Any, origin: str = CLI_ORIGIN) -> Check:
    """Build a check from a selector string and a raw value; raises ValueError with the reason."""
    selector = Selector.parse(key)
    number = parse_percent(value) if kind == "max_drop" else parse_number(value)
    return Check(kind, selector, number, origin)


def parse_cli_threshold(kind: Kind, text: str) -> Check:
    """Parse one ``--min/--max/--max-drop`` argument, ``METRIC[:CONFIG][@DATASET]=VALUE``."""
    key, sep, raw = text.partition("=")
    try:
        if not sep:
            raise ValueError("missing '=VALUE'")
        value: Any = raw.strip()
        if kind != "max_drop":
            try:
                value = float(value)
            except ValueError:
                raise ValueError(f"expected a number, got {raw!r}") from None
        return make_check(kind, key, value)
    except ValueError as err:
        raise GateError(f"{FLAGS[kind]} {text}: {err}") from None


@dataclass(frozen=True)
class GateSpec:
    """The thresholds of one gate, from a suite's ``gate:`` section or the command line."""

    checks: tuple[Check, ...] = ()

    @classmethod
    def from_mapping(cls, data: Any, where: str) -> GateSpec:
        """Validate a suite's ``gate:`` mapping; ``where`` locates it (``"suites/x.yaml: gate"``)
        and SuiteError messages read ``{where}.SECTION.SELECTOR: why``.

        Schema: ``{min: {SELECTOR: number}, max: {SELECTOR: number}, max_drop: {SELECTOR: "PCT%"}}``,
        every section optional; SELECTOR is ``METRIC[:CONFIG][@DATASET]``.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise SuiteError(f"{where}: expected a mapping with min/max/max_drop")
        checks: list[Check] = []
        for section, entries in data.items():
            if section not in KINDS:
                raise SuiteError(
                    f"{where}.{section}: unknown key (expected one of {', '.join(KINDS)})"
                )
            if entries is None:
                continue
            if not isinstance(entries, Mapping):
                raise SuiteError(f"{where}.{section}: expected a mapping SELECTOR: VALUE")
            for key, value in entries.items():
                try:
                    if not isinstance(key, str):
                        raise ValueError(f"selector must be a string, got {key!r}")
                    checks.append(make_check(section, key, value, f"{where}.{section}"))
                except ValueError as err:
                    raise SuiteError(f"{where}.{section}.{key}: {err}") from None
        return cls(tuple(checks))

    def merged(self, override: GateSpec) -> GateSpec:
        """Thresholds of ``override`` replace ours with the same kind and selector, others add."""
        replaced = {(c.kind, c.selector) for c in override.checks}
        kept = tuple(c for c in self.checks if (c.kind, c.selector) not in replaced)
        return GateSpec(kept + dedupe(override.checks))


def dedupe(checks: Iterable[Check]) -> tuple[Check, ...]:
    """Later thresholds with the same kind and selector win (a repeated flag overrides)."""
    latest: dict[tuple[Kind, Selector], Check] = {}
    for check in checks:
        latest.pop((check.kind, check.selector), None)
        latest[(check.kind, check.selector)] = check
    return tuple(latest.values())


def cli_spec(mins: Sequence[str], maxes: Sequence[str], drops: Sequence[str]) -> GateSpec:
    checks = [parse_cli_threshold("min", t) for t in mins]
    checks += [parse_cli_threshold("max", t) for t in maxes]
    checks += [parse_cli_threshold("max_drop", t) for t in drops]
    return GateSpec(dedupe(checks))


# ------------------------------------------------------------------------------------ run cells


def index_cells(records: Any, where: str) -> dict[CellKey, Mapping[str, Any]]:
    """Key records by (run, dataset, concurrency); duplicates would make a verdict ambiguous."""
    if not isinstance(records, list):
        raise ResultsError(f"{where}: expected a JSON list of records")
    cells: dict[CellKey, Mapping[str, Any]] = {}
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise ResultsError(f"{where}: record {i} is not an object")
        for field in ("run", "dataset"):
            if not isinstance(record.get(field), str):
                raise ResultsError(f"{where}: record {i} has no string {field!r}")
        concurrency = record.get("concurrency")
        if concurrency is not None and type(concurrency) is not int:
            raise ResultsError(f"{where}: record {i}: concurrency is not an integer: {concurrency!r}")
        rate = record.get("request_rate")
        if rate is not None and (type(rate) not in (int, float) or not math.isfinite(rate)):
            raise ResultsError(f"{where}: record {i}: request_rate is not a number: {rate!r}")
        key = CellKey(record["run"], record["dataset"], concurrency, rate)
        if key in cells:
            raise ResultsError(f"{where}: duplicate cell {key}")
        cells[key] = record
    return cells


def is_baseline(cell: Mapping[str, Any]) -> bool:
    return cell.get("method") == "baseline"


def read_measure(cell: Mapping[str, Any], metric: str, side: str, key: CellKey) -> Measure:
    """The metric and its ci95 from one cell; null is never read as 0, it makes the gate unusable."""
    if metric not in cell:
        raise GateError(f"{side} cell {key} has no metric {metric!r}")
    value = cell[metric]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise GateError(f"{metric} is null in {side} cell {key}")
    if not is_number(value):
        raise GateError(f"{metric} in {side} cell {key} is not a number: {value!r}")
    if not math.isfinite(value):  # an infinite speedup or latency is damage, never a measurement
        raise GateError(f"{metric} in {side} cell {key} is not a finite number: {value!r}")
    return Measure(float(value), read_ci(cell, metric, side, key))


def read_ci(cell: Mapping[str, Any], metric: str, side: str, key: CellKey) -> tuple[float, float] | None:
    table = cell.get("ci95")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise GateError(f"{side} cell {key}: ci95 is not a mapping")
    bounds = table.get(metric)
    if bounds is None or (isinstance(bounds, list) and all(b is None for b in bounds)):
        return None
    ok = (
        isinstance(bounds, list)
        and len(bounds) == 2
        and all(is_number(b) and math.isfinite(b) for b in bounds)
        and bounds[0] <= bounds[1]
    )
    if not ok:
        raise GateError(f"{side} cell {key}: ci95.{metric} is not [low, high]: {bounds!r}")
    return (float(bounds[0]), float(bounds[1]))


# ------------------------------------------------------------------------------------ judgement


def judge(point_ok: bool, best_ok: bool) -> Outcome:
    """A crossed threshold is a regression only if even the favourable end of the CI crosses it."""
    if point_ok:
        return "pass"
    return "within noise" if best_ok else "fail"


def judge_floor(cand: Measure, floor: float) -> Outcome:
    return judge(cand.value >= floor, cand.best_high >= floor)


def judge_ceiling(cand: Measure, ceiling: float) -> Outcome:
    return judge(cand.value <= ceiling, cand.best_low <= ceiling)


def judge_drop(cand: Measure, ref: Measure, drop: float, lower_better: bool) -> tuple[float, Outcome]:
    """Return the point limit and the outcome of an allowed relative worsening ``drop``.

    Higher is better: limit = ref*(1-drop); fails only if cand < limit and the candidate's CI high
    is below the reference's CI low * (1-drop). Lower is better mirrors it with (1+drop).
    """
    if lower_better:
        limit = ref.value * (1 + drop)
        noise_limit = max(ref.value, ref.ci[1] if ref.ci else ref.value) * (1 + drop)
        return limit, judge(cand.value <= limit, cand.best_low <= noise_limit)
    limit = ref.value * (1 - drop)
    noise_limit = min(ref.value, ref.ci[0] if ref.ci else ref.value) * (1 - drop)
    return limit, judge(cand.value >= limit, cand.best_high >= noise_limit)


def select_cells(check: Check, cand: Cells, ref: Cells | None) -> list[CellKey]:
    """Matching cells in results order; a drop check also needs every matching reference cell."""
    pool = list(cand) + (list(ref) if check.kind == "max_drop" and ref is not None else [])
    keys = [k for k in dict.fromkeys(pool) if check.selector.matches(k)]
    if not keys:
        scope = f"config {check.selector.config!r}" if check.selector.config else "any config"
        if check.selector.dataset:
            scope += f" on data set {check.selector.dataset!r}"
        where = "candidate or reference" if check.kind == "max_drop" and ref else "candidate"
        raise GateError(f"{check.describe()}: no cell for {scope} in the {where}")
    return keys


def skip_wildcard(check: Check, cand: Mapping[str, Any], ref: Mapping[str, Any] | None) -> bool:
    """A threshold without a config skips baseline cells where the metric means nothing there:
    ``speedup_vs_baseline`` (1 by definition) and metrics null in the baseline (acceptance)."""
    if check.selector.config is not None or not is_baseline(cand):
        return False
    if check.metric == "speedup_vs_baseline":
        return True
    return cand.get(check.metric) is None and (ref is None or ref.get(check.metric) is None)


def evaluate_cell(
    check: Check, key: CellKey, cand_cells: Cells, ref_cells: Cells | None
) -> Verdict | None:
    """One row, or None for a baseline cell a wildcard skips; GateError when it cannot be judged."""
    cand = cand_cells.get(key)
    ref = ref_cells.get(key) if ref_cells is not None else None
    if cand is None:
        raise GateError(f"cell {key} needed by {check.describe()} is missing in the candidate")
    if check.kind == "max_drop" and ref is None:
        raise GateError(f"cell {key} needed by {check.describe()} is missing in the reference")
    if skip_wildcard(check, cand, ref):
        return None
    require_ok(cand, "candidate", key, check)
    if check.kind == "max_drop" and ref is not None:
        require_ok(ref, "reference", key, check)
    measured = read_measure(cand, check.metric, "candidate", key)
    reference: Measure | None
    if check.kind == "max_drop" and ref is not None:
        reference = read_measure(ref, check.metric, "reference", key)
        limit, outcome = judge_drop(measured, reference, check.value, check.lower_is_better)
        return Verdict(check, key, measured, reference, limit, outcome)
    reference = context_measure(ref, check.metric, key)
    judge_limit = judge_floor if check.kind == "min" else judge_ceiling
    return Verdict(check, key, measured, reference, check.value, judge_limit(measured, check.value))


def require_ok(cell: Mapping[str, Any], side: str, key: CellKey, check: Check) -> None:
    """A failed cell has no trustworthy numbers; judging it either way would be a guess."""
    status = cell.get("status", "ok")
    if status != "ok":
        raise GateError(f"{side} cell {key} has status {status!r}; {check.describe()} cannot be judged")


def context_measure(ref: Mapping[str, Any] | None, metric: str, key: CellKey) -> Measure | None:
    """The reference value shown beside a floor or ceiling; such checks do not need one."""
    if ref is None or ref.get("status", "ok") != "ok":
        return None
    try:
        return read_measure(ref, metric, "reference", key)
    except GateError:
        return None


def evaluate(check: Check, cand_cells: Cells, ref_cells: Cells | None) -> list[Verdict]:
    """Apply one check to every cell it selects; raises GateError when input cannot be judged."""
    if check.kind == "max_drop" and ref_cells is None:
        raise GateError(f"{check.describe()} needs --reference")
    keys = select_cells(check, cand_cells, ref_cells)
    rows = (evaluate_cell(check, key, cand_cells, ref_cells) for key in keys)
    verdicts = [v for v in rows if v is not None]
    if not verdicts:
        raise GateError(
            f"{check.describe()}: only baseline cells match, where {check.metric} is not measured"
        )
    return verdicts


def comparability_problems(cand_meta: Mapping[str, Any], ref_meta: Mapping[str, Any]) -> list[str]:
    """What makes two runs incomparable: a different suite name or differing comparability keys."""
    problems: list[str] = []
    cand_name, ref_name = suite_name(cand_meta), suite_name(ref_meta)
    if cand_name is not None and ref_name is not None and cand_name != ref_name:
        problems.append(f"suite name {cand_name!r} vs {ref_name!r}")
    cand_comp, ref_comp = cand_meta.get("comparability"), ref_meta.get("comparability")
    if isinstance(cand_comp, Mapping) and isinstance(ref_comp, Mapping):
        cand_comp, ref_comp = flatten(cand_comp), flatten(ref_comp)
        if problems:
            cand_comp.pop("suite", None)
            ref_comp.pop("suite", None)
        differing = [
            f"{k} ({show_value(cand_comp, k)} vs {show_value(ref_comp, k)})"
            for k in sorted(set(cand_comp) | set(ref_comp))
            if k not in cand_comp or k not in ref_comp or cand_comp[k] != ref_comp[k]
        ]
        if differing:
            problems.append("comparability differs in " + ", ".join(differing))
    return problems


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested keys as dotted paths, so a message names ``configs.dspark_k3``, not all configs."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def show_value(mapping: Mapping[str, Any], key: str) -> str:
    return repr(mapping[key]) if key in mapping else "missing"


def suite_name(meta: Mapping[str, Any] | None) -> str | None:
    suite = meta.get("suite") if meta else None
    name = suite.get("name") if isinstance(suite, Mapping) else None
    return name if isinstance(name, str) else None


def suite_gate(meta: Mapping[str, Any] | None) -> Any:
    suite = meta.get("suite") if meta else None
    raw = suite.get("raw") if isinstance(suite, Mapping) else None
    return raw.get("gate") if isinstance(raw, Mapping) else None


# ------------------------------------------------------------------------------------ rendering


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
    with_conc = any(v.cell.load is not None for v in verdicts)
    header = ["Metric", "Config", "Data set"] + (["Concurrency"] if with_conc else [])
    header += ["Reference", "Candidate", "Change", "Threshold", "Verdict"]
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for v in verdicts:
        change = "—" if v.change is None else f"{v.change * 100:+.1f}%"
        row = [v.check.metric, v.cell.config, v.cell.dataset]
        if with_conc:
            row.append("—" if v.cell.load is None else
                       str(v.cell.concurrency) if v.cell.request_rate is None else v.cell.load)
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
        f"{v.check.metric} {v.cell} {fmt(v.candidate.value)} vs {fmt_threshold(v)}"
        for v in fails[:shown]
    ]
    more = f"; +{len(fails) - shown} more" if len(fails) > shown else ""
    return f"{len(fails)} regression(s): " + "; ".join(parts) + more


# ------------------------------------------------------------------------------------------- I/O


def results_path(path: Path) -> Path:
    """A run directory or a results.json path -> the results.json path."""
    return path / "results.json" if path.is_dir() else path


def load_run(path: Path) -> Run:
    """A run through the report's loader, strictly: a damaged value refuses the run, never becomes —."""
    results = results_path(Path(path))
    if not results.is_file():
        raise ResultsError(f"{results}: results file not found")
    run = read_run(results, quiet=True, strict=True)
    for problem in run.problems:
        warn(problem)
    meta = run.meta if (results.parent / "meta.json").is_file() else None
    return Run(results, index_cells(run.records, str(results)), meta)


def load_suite_gate(path: Path) -> tuple[GateSpec, str | None]:
    """The ``gate:`` section and ``name`` of a suite file; the rest is the suite loader's business."""
    from specbench.suite import read_yaml

    data = read_yaml(path)
    if not isinstance(data, Mapping):
        raise SuiteError(f"{path}: expected a mapping at the top level")
    name = data.get("name")
    return GateSpec.from_mapping(data.get("gate"), f"{path}: gate"), name if isinstance(name, str) else None


def summary_targets(explicit: Path | None) -> list[Path]:
    targets = [Path(p) for p in [os.environ.get("GITHUB_STEP_SUMMARY"), explicit] if p]
    unique: list[Path] = []
    for target in targets:
        if all(target.resolve() != u.resolve() for u in unique):
            unique.append(target)
    return unique


def append_summary(targets: Sequence[Path], text: str) -> None:
    for target in targets:
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError as err:
            raise GateError(f"{target}: cannot append the summary ({err.strerror})") from None


def warn(message: str) -> None:
    print(f"specbench gate: warning: {message}", file=sys.stderr)


def gather_checks(args: argparse.Namespace, cand: Run) -> GateSpec:
    """Suite thresholds (``--suite``, else the candidate's meta.json) overridden by CLI flags."""
    if getattr(args, "suite", None):
        base, name = load_suite_gate(args.suite)
        cand_name = suite_name(cand.meta)
        if name is not None and cand_name is not None and name != cand_name:
            raise GateError(
                f"--suite {args.suite} is suite {name!r} but the candidate ran suite {cand_name!r}"
            )
    else:
        where = f"{cand.path.parent / 'meta.json'}: suite.raw.gate"
        base = GateSpec.from_mapping(suite_gate(cand.meta), where)
    flags = cli_spec(
        getattr(args, "min", None) or [],
        getattr(args, "max", None) or [],
        getattr(args, "max_drop", None) or [],
    )
    spec = base.merged(flags)
    if not spec.checks:
        raise GateError("no thresholds: give --min/--max/--max-drop or a suite with a gate: section")
    return spec


def judge_runs(args: argparse.Namespace) -> tuple[list[Verdict], Run, Run | None]:
    cand = load_run(args.candidate)
    reference = getattr(args, "reference", None)
    if reference is not None:
        from specbench.report.history import reference_for  # a directory of runs: its latest earlier run

        reference = reference_for(reference, cand.path.parent, cand.meta)
    ref = load_run(reference) if reference is not None else None
    spec = gather_checks(args, cand)
    if ref is not None:
        if cand.meta is None or ref.meta is None:
            missing = cand.path if cand.meta is None else ref.path
            warn(f"no meta.json beside {missing}; cannot verify the runs are comparable")
        else:
            for path, meta in ((cand.path, cand.meta), (ref.path, ref.meta)):
                if not isinstance(meta.get("comparability"), Mapping):
                    warn(f"{path.parent / 'meta.json'} has no readable comparability; "
                         "cannot verify the runs are comparable")
            problems = comparability_problems(cand.meta, ref.meta)
            if problems:
                raise GateError("candidate and reference are not comparable: " + "; ".join(problems))
    ref_cells = ref.cells if ref is not None else None
    verdicts = [v for check in spec.checks for v in evaluate(check, cand.cells, ref_cells)]
    return verdicts, cand, ref


def run_cli(args: argparse.Namespace) -> int:
    """Entry point of ``specbench gate``: returns 0 pass, 1 regression, 2 unusable input."""
    targets = summary_targets(getattr(args, "summary", None))
    try:
        verdicts, cand, ref = judge_runs(args)
        markdown = render_markdown(verdicts, str(cand.path), str(ref.path) if ref else None)
        print(markdown, end="")
        append_summary(targets, markdown)
    except SpecbenchError as err:
        print(f"specbench gate: {err}", file=sys.stderr)
        try:
            append_summary(targets, f"### specbench gate: unusable input\n\n{err}\n")
        except GateError:
            pass
        return err.exit_code
    if any(v.outcome == "fail" for v in verdicts):
        print(f"specbench gate: {failure_line(verdicts)}", file=sys.stderr)
        return 1
    return 0


EPILOG = """\
thresholds (repeatable; SELECTOR is METRIC[:CONFIG][@DATASET], no CONFIG = every config):
  --min speedup_vs_baseline:dspark_k3=1.2          floor, every data set of dspark_k3
  --max latency_p95_ms:dspark_k3@math500=2000      ceiling on one cell
  --max-drop speedup_vs_baseline=5%                allowed worsening vs --reference
  for *_ms metrics and failed_requests a "drop" is an increase.

noise: with ci95 in the results, a crossed threshold fails only if the whole CI crosses it
("within noise" otherwise). exit codes: 0 pass, 1 regression, 2 unusable input. See docs/gate.md.
"""


def register(subparsers: Any) -> None:
    """Add ``gate`` to the ``specbench`` sub-commands; cli.py dispatches to ``args.func``."""
    parser = subparsers.add_parser(
        "gate",
        help="fail CI when speculative decoding gets slower or accepts less",
        description="Check a results run against floors, ceilings and allowed drops vs a reference.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("candidate", type=Path, metavar="CANDIDATE", help="run directory or results.json")
    add("--reference", "-r", type=Path, metavar="REF",
        help="run directory or results.json; or a directory of runs: its latest complete run of the candidate's suite started before it")
    add("--min", action="append", default=[], metavar="SELECTOR=VALUE", help="floor: fail below VALUE")
    add("--max", action="append", default=[], metavar="SELECTOR=VALUE", help="ceiling: fail above VALUE")
    add("--max-drop", dest="max_drop", action="append", default=[], metavar="SELECTOR=PCT%",
        help="allowed relative worsening vs --reference, e.g. 5%%")
    add("--suite", type=Path, metavar="SUITE.yaml", help="thresholds from this suite's gate: section")
    add("--summary", type=Path, metavar="PATH", help="also append the markdown table to PATH")
    parser.set_defaults(func=run_cli)
