"""The gate's pure core: the cells of a run, their measures with CIs, and a check's verdict per cell.

A crossed threshold is a regression only if the favourable end of the 95% CI crosses it too
(the noise rule of docs/gate.md); null is never read as 0, it makes the input unusable.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..schemas.cell import Cell
from ..schemas.meta import Comparability, RunMeta
from ..schemas.row import ResultRow
from ..schemas.row_read import in_bounds
from ..suite.gate import Check, GateError, Outcome
from ..util.numbers import is_number

Cells = Mapping[Cell, ResultRow]


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
    cell: Cell
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
    """A loaded run: its rows by cell and its meta.json (None for old runs without one)."""

    path: Path
    cells: Cells
    meta: RunMeta | None


def index_cells(rows: Sequence[ResultRow], where: str) -> dict[Cell, ResultRow]:
    """Key rows by their cell (config, data set, load point); duplicates would make a verdict ambiguous."""
    cells: dict[Cell, ResultRow] = {}
    for i, row in enumerate(rows):
        concurrency = row.concurrency
        if concurrency is not None and type(concurrency) is not int:
            raise ResultsError(f"{where}: record {i}: concurrency is not an integer: {concurrency!r}")
        cell = Cell.of_row(row)
        if cell in cells:
            raise ResultsError(f"{where}: duplicate cell {cell}")
        cells[cell] = row
    return cells


def is_baseline(row: ResultRow) -> bool:
    return row.method == "baseline"


def read_measure(row: ResultRow, metric: str, side: str, cell: Cell) -> Measure:
    """The metric (named by the user) and its ci95 from one cell's row; null is never read as 0, it
    makes the gate unusable."""
    if not row.has(metric):
        raise GateError(f"{side} cell {cell} has no metric {metric!r}")
    value = row.get(metric)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise GateError(f"{metric} is null in {side} cell {cell}")
    if not is_number(value):  # an infinite speedup or latency is damage, never a measurement
        finite = "finite " if isinstance(value, float) else ""
        raise GateError(f"{metric} in {side} cell {cell} is not a {finite}number: {value!r}")
    outside = in_bounds(metric, value)
    if outside:  # a negative speedup or latency: no threshold can be judged against it
        raise GateError(f"{metric} in {side} cell {cell} is {value!r}: expected {outside}")
    return Measure(float(value), read_ci(row, metric, side, cell))


def read_ci(row: ResultRow, metric: str, side: str, cell: Cell) -> tuple[float, float] | None:
    table = row.ci95
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise GateError(f"{side} cell {cell}: ci95 is not a mapping")
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
        raise GateError(f"{side} cell {cell}: ci95.{metric} is not [low, high]: {bounds!r}")
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


def select_cells(check: Check, cand: Cells, ref: Cells | None) -> list[Cell]:
    """Matching cells in results order; a drop check also needs every matching reference cell."""
    pool = list(cand) + (list(ref) if check.kind == "max_drop" and ref is not None else [])
    cells = [c for c in dict.fromkeys(pool) if check.selector.matches(c)]
    if not cells:
        scope = f"config {check.selector.config!r}" if check.selector.config else "any config"
        if check.selector.dataset:
            scope += f" on data set {check.selector.dataset!r}"
        where = "candidate or reference" if check.kind == "max_drop" and ref else "candidate"
        raise GateError(f"{check.describe()}: no cell for {scope} in the {where}")
    return cells


def skip_wildcard(check: Check, cand: ResultRow, ref: ResultRow | None) -> bool:
    """A threshold without a config skips baseline cells where the metric means nothing there:
    ``speedup_vs_baseline`` (1 by definition) and metrics null in the baseline (acceptance)."""
    if check.selector.config is not None or not is_baseline(cand):
        return False
    if check.metric == "speedup_vs_baseline":
        return True
    return cand.get(check.metric) is None and (ref is None or ref.get(check.metric) is None)


def evaluate_cell(
    check: Check, cell: Cell, cand_cells: Cells, ref_cells: Cells | None
) -> Verdict | None:
    """One row, or None for a baseline cell a wildcard skips; GateError when it cannot be judged."""
    cand = cand_cells.get(cell)
    ref = ref_cells.get(cell) if ref_cells is not None else None
    if cand is None:
        raise GateError(f"cell {cell} needed by {check.describe()} is missing in the candidate")
    if check.kind == "max_drop" and ref is None:
        raise GateError(f"cell {cell} needed by {check.describe()} is missing in the reference")
    if skip_wildcard(check, cand, ref):
        return None
    require_ok(cand, "candidate", cell, check)
    if check.kind == "max_drop" and ref is not None:
        require_ok(ref, "reference", cell, check)
    measured = read_measure(cand, check.metric, "candidate", cell)
    reference: Measure | None
    if check.kind == "max_drop" and ref is not None:
        reference = read_measure(ref, check.metric, "reference", cell)
        limit, outcome = judge_drop(measured, reference, check.value, check.lower_is_better)
        return Verdict(check, cell, measured, reference, limit, outcome)
    reference = context_measure(ref, check.metric, cell)
    judge_limit = judge_floor if check.kind == "min" else judge_ceiling
    return Verdict(check, cell, measured, reference, check.value, judge_limit(measured, check.value))


def require_ok(row: ResultRow, side: str, cell: Cell, check: Check) -> None:
    """A failed cell has no trustworthy numbers; judging it either way would be a guess."""
    if row.cell_status != "ok":
        raise GateError(f"{side} cell {cell} has status {row.cell_status!r}; {check.describe()} cannot be judged")


def context_measure(ref: ResultRow | None, metric: str, cell: Cell) -> Measure | None:
    """The reference value shown beside a floor or ceiling; such checks do not need one."""
    if ref is None or ref.cell_status != "ok":
        return None
    try:
        return read_measure(ref, metric, "reference", cell)
    except GateError:
        return None


def evaluate(check: Check, cand_cells: Cells, ref_cells: Cells | None) -> list[Verdict]:
    """Apply one check to every cell it selects; raises GateError when input cannot be judged."""
    if check.kind == "max_drop" and ref_cells is None:
        raise GateError(f"{check.describe()} needs --reference")
    rows = (evaluate_cell(check, cell, cand_cells, ref_cells) for cell in select_cells(check, cand_cells, ref_cells))
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
        differing = [str(d) for d in differences(cand_meta.comparability, ref_meta.comparability)
                     if not (problems and d.key == "suite")]
        if differing:
            problems.append("comparability differs in " + ", ".join(differing))
    return problems


@dataclass(frozen=True)
class Difference:
    """A comparability key whose value differs between two runs, nested keys dotted so that a message
    names ``configs.dspark_k3``, not all configs; each value as shown (``missing`` where a run lacks it)."""

    key: str
    candidate: str
    reference: str

    def __str__(self) -> str:
        return f"{self.key} ({self.candidate} vs {self.reference})"


def differences(cand: Comparability, ref: Comparability) -> list[Difference]:
    """The differing keys of two runs' comparability, in key order."""
    cand_leaves, ref_leaves = dict(_leaves(cand.to_dict())), dict(_leaves(ref.to_dict()))
    return [Difference(k, _shown(cand_leaves, k), _shown(ref_leaves, k))
            for k in sorted(set(cand_leaves) | set(ref_leaves))
            if k not in cand_leaves or k not in ref_leaves or cand_leaves[k] != ref_leaves[k]]


def _leaves(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _shown(leaves: Mapping[str, Any], key: str) -> str:
    return repr(leaves[key]) if key in leaves else "missing"


def suite_name(meta: RunMeta | None) -> str | None:
    return meta.suite_name if meta else None


def suite_gate(meta: RunMeta | None) -> Any:
    return meta.raw.gate if meta else None
