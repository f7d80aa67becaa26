"""The gate's pure core: the cells of a run, their measures with CIs, and a check's verdict per cell.

A crossed threshold is a regression only if the favourable end of the 95% CI crosses it too
(the noise rule of docs/gate.md); null is never read as 0, it makes the input unusable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..schemas.cell import Cell
from ..schemas.meta import RunMeta
from ..schemas.row import ResultRow
from ..suite.gate import Check, GateError, Outcome
from ..util.numbers import is_number


@dataclass(frozen=True)
class CellKey(Cell):
    """A ``Cell`` (``Cell.of_row`` is its identity) named the gate's way: ``config@dataset (concurrency 8)``,
    ``(rate 4/s)``, or no load point where the results recorded none (concurrency 0)."""

    @classmethod
    def of_row(cls, row: ResultRow) -> CellKey:
        cell = Cell.of_row(row)
        return cls(cell.config, cell.dataset, cell.concurrency, cell.request_rate)

    @property
    def load(self) -> str | None:
        if self.request_rate is not None:
            return f"rate {self.request_rate:g}/s"
        return f"concurrency {self.concurrency}" if self.concurrency else None

    def __str__(self) -> str:
        text = f"{self.config}@{self.dataset}"
        return text if self.load is None else f"{text} ({self.load})"


Cells = Mapping[CellKey, ResultRow]


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
    meta: RunMeta | None


def index_cells(rows: Sequence[ResultRow], where: str) -> dict[CellKey, ResultRow]:
    """Key rows by (run, dataset, load point); duplicates would make a verdict ambiguous."""
    cells: dict[CellKey, ResultRow] = {}
    for i, row in enumerate(rows):
        concurrency = row.concurrency
        if concurrency is not None and type(concurrency) is not int:
            raise ResultsError(f"{where}: record {i}: concurrency is not an integer: {concurrency!r}")
        key = CellKey.of_row(row)
        if key in cells:
            raise ResultsError(f"{where}: duplicate cell {key}")
        cells[key] = row
    return cells


def is_baseline(cell: ResultRow) -> bool:
    return cell.method == "baseline"


def read_measure(cell: ResultRow, metric: str, side: str, key: CellKey) -> Measure:
    """The metric (named by the user) and its ci95 from one cell; null is never read as 0, it makes
    the gate unusable."""
    if not cell.has(metric):
        raise GateError(f"{side} cell {key} has no metric {metric!r}")
    value = cell.get(metric)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise GateError(f"{metric} is null in {side} cell {key}")
    if not is_number(value):  # an infinite speedup or latency is damage, never a measurement
        finite = "finite " if isinstance(value, float) else ""
        raise GateError(f"{metric} in {side} cell {key} is not a {finite}number: {value!r}")
    return Measure(float(value), read_ci(cell, metric, side, key))


def read_ci(cell: ResultRow, metric: str, side: str, key: CellKey) -> tuple[float, float] | None:
    table = cell.ci95
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
        and all(is_number(b) for b in bounds)
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


def skip_wildcard(check: Check, cand: ResultRow, ref: ResultRow | None) -> bool:
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


def require_ok(cell: ResultRow, side: str, key: CellKey, check: Check) -> None:
    """A failed cell has no trustworthy numbers; judging it either way would be a guess."""
    if cell.cell_status != "ok":
        raise GateError(f"{side} cell {key} has status {cell.cell_status!r}; {check.describe()} cannot be judged")


def context_measure(ref: ResultRow | None, metric: str, key: CellKey) -> Measure | None:
    """The reference value shown beside a floor or ceiling; such checks do not need one."""
    if ref is None or ref.cell_status != "ok":
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


def comparability_problems(cand_meta: RunMeta, ref_meta: RunMeta) -> list[str]:
    """What makes two runs incomparable: a different suite name or differing comparability keys."""
    problems: list[str] = []
    cand_name, ref_name = suite_name(cand_meta), suite_name(ref_meta)
    if cand_name is not None and ref_name is not None and cand_name != ref_name:
        problems.append(f"suite name {cand_name!r} vs {ref_name!r}")
    if cand_meta.comparability is not None and ref_meta.comparability is not None:
        cand_comp, ref_comp = flatten(cand_meta.comparability.to_dict()), flatten(ref_meta.comparability.to_dict())
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


def suite_name(meta: RunMeta | None) -> str | None:
    return meta.suite_name if meta else None


def suite_gate(meta: RunMeta | None) -> Any:
    return meta.raw.gate if meta else None
