"""Two runs of a suite, cell by cell and metric by metric: better, worse or within noise, by the
gate's own noise rule (``judge.judge_drop``) applied both ways."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ResultsError
from ..schemas.cell import Cell
from ..schemas.row import ResultRow
from ..suite.gate import GateError, lower_is_better
from ..util.numbers import is_number
from .judge import Measure, judge_drop, read_ci

#: (results.json key, label) of the metrics compared between two runs of a suite
RUN_METRICS: tuple[tuple[str, str], ...] = (
    ("speedup_vs_baseline", "Speedup"),
    ("mean_acceptance_length", "Accept len"),
    ("tpot_mean_ms", "TPOT mean ms"),
    ("ttft_p95_ms", "TTFT p95 ms"),
    ("output_throughput_tps", "Output tok/s"),
)

ChangeVerdict = str  # "better" | "worse" | "within noise" | "not measured" | "not comparable"
BASELINE_ITSELF = "the baseline: 1.0 by definition"


@dataclass(frozen=True)
class MetricChange:
    metric: str
    old: Measure | None
    new: Measure | None
    verdict: ChangeVerdict
    why: str = ""

    @property
    def vacuous(self) -> bool:
        """Nothing to say: null in both runs, or the baseline's own speedup (1.0 by definition)."""
        return self.old is None and self.new is None or self.why == BASELINE_ITSELF

    @property
    def point_only(self) -> bool:
        """Judged on point values: neither run has a CI for this metric."""
        return (self.old is None or self.old.ci is None) and (self.new is None or self.new.ci is None)

    @property
    def change(self) -> float | None:
        """Relative change new vs old, or None when either is missing or old is 0."""
        if self.old is None or self.new is None or self.old.value == 0:
            return None
        return (self.new.value - self.old.value) / abs(self.old.value)


@dataclass(frozen=True)
class CellChange:
    cell: Cell
    metrics: tuple[MetricChange, ...]


@dataclass(frozen=True)
class RunComparison:
    """Every cell of two runs: compared where both have it, listed where only one has it."""

    cells: tuple[CellChange, ...]
    only_old: tuple[Cell, ...]
    only_new: tuple[Cell, ...]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells:
            for m in c.metrics:
                out[m.verdict] = out.get(m.verdict, 0) + 1
        return out


def change_verdict(old: Measure, new: Measure, metric: str, tolerance: float = 0.0) -> ChangeVerdict:
    """The gate's noise rule (``gate.judge_drop``, allowed drop ``tolerance``), applied both ways.

    Worse: the gate would fail ``new`` against ``old`` (the point moved the wrong way by more than
    the tolerance and the favourable end of new's CI does not reach old's). Better: the same with
    the runs swapped. Anything else, identical values included, is within noise. Without
    intervals this is a plain comparison of point values, as in the gate.
    """
    lower = lower_is_better(metric)
    if judge_drop(new, old, tolerance, lower)[1] == "fail":
        return "worse"
    if judge_drop(old, new, tolerance, lower)[1] == "fail":
        return "better"
    return "within noise"


def _measure(row: ResultRow, metric: str, cell: Cell, where: str) -> Measure | None:
    value = row.get(metric)
    if not is_number(value):
        return None
    try:
        ci = read_ci(row, metric, where, cell)
    except GateError as err:
        raise ResultsError(str(err)) from None
    return Measure(float(value), ci)


def _metric_change(old_row: ResultRow, new_row: ResultRow, metric: str, cell: Cell, where: tuple[str, str],
                   tolerance: float) -> MetricChange:
    old, new = _measure(old_row, metric, cell, where[0]), _measure(new_row, metric, cell, where[1])
    if metric == "speedup_vs_baseline" and all(r.method == "baseline" and r.get(metric) in (1.0, None)
                                               for r in (old_row, new_row)):
        return MetricChange(metric, old, new, "not measured", BASELINE_ITSELF)
    bad = [f"{side} cell {r.status}" for side, r in (("old", old_row), ("new", new_row))
           if r.cell_status != "ok"]
    if bad:
        return MetricChange(metric, old, new, "not comparable", ", ".join(bad))
    if old is None or new is None:
        missing = [side for side, m in (("old", old), ("new", new)) if m is None]
        return MetricChange(metric, old, new, "not measured", "null in " + " and ".join(missing))
    return MetricChange(metric, old, new, change_verdict(old, new, metric, tolerance))


def compare_runs(old: Sequence[ResultRow], new: Sequence[ResultRow], where: tuple[str, str] = ("old", "new"),
                 metrics: Sequence[str] = tuple(m for m, _ in RUN_METRICS), tolerance: float = 0.0) -> RunComparison:  # type: ignore[name-defined]  # mypy misreads a generator in a default
    """Per cell of two runs of one suite: each metric old → new with its CI and a verdict.

    ``where`` names the two runs in error messages (a malformed ``ci95`` is a ResultsError);
    ``tolerance`` is the relative change (0.05 = 5%) below which a move is never better or worse.
    """
    old_cells = {Cell.of_row(r): r for r in old}
    new_cells = {Cell.of_row(r): r for r in new}
    both = [c for c in new_cells if c in old_cells]
    changes = tuple(CellChange(c, tuple(_metric_change(old_cells[c], new_cells[c], m, c, where, tolerance)
                                          for m in metrics))
                    for c in both)
    return RunComparison(changes, tuple(c for c in old_cells if c not in new_cells),
                         tuple(c for c in new_cells if c not in old_cells))
