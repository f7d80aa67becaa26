"""One typed results row: a cell's numbers as results.json holds them, composed of the metric groups.

Each key is declared once, as a field of its metric group in ``schemas/row_*.py`` (``row_group.MetricGroup``:
its meaning, unit and range in ``key(...)``); the measure (or grade) function returns that group, and
``ResultRow.add`` sets its keys. ``ResultRow`` inherits every group, so a group's field *is* the row's field:
a misspelt name is a type error, never an unknown key. Adding a metric: one field in its group (a new
group: also one base of ``ResultRow``), the function that fills it, and, to show it, one column entry in
``report/columns.py`` that names the field (its definition and unit come from the field).

A row carries only the keys set on it (a comparison key only where there is a baseline, a step-log key only
with a step log; a ``key(omit_none=True)`` field only with a value); ``to_dict`` writes them in one order,
whatever order they were set or read in: the reference table's keys first (``REFERENCE_KEYS``), then the
acceptance positions beyond the third, then every other field in declaration order (the groups' order
below), then the keys this version does not know (from a newer or older specbench, or another tool: kept in
``unknown`` and written back, in the order read).

``row_read.read_row`` is the only way a row is read from a file. What cannot be a row (not an object, no
``run``/``dataset``) is a one-line ``ResultsError``; a value of the wrong type or outside its field's range,
and NaN/±Infinity anywhere, become ``None`` (the cell renders ``—``), each said as one line naming file,
record and key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, ClassVar

from .record import Record, plain
from .row_acceptance import (
    AcceptanceChecks,
    AcceptedPerStep,
    Agreement,
    CounterAcceptance,
    RequestAcceptance,
    StreamSummary,
)
from .row_baseline import Decomposition, Fidelity, PairedSpeedup, RepeatSpread, SlowerShare
from .row_cache import CacheSplit
from .row_cell import Categories, CellIdentity, CellLoad, CellServer, CellStatus, CellThroughput, RepeatStats
from .row_group import MetricGroup, written
from .row_latency import ClientLag, FromSchedule, LatencyStats, SharedReads, TokenAgreement
from .row_quality import (
    Accuracy,
    CostSummary,
    CostVsBaseline,
    O200kLengths,
    PairedAccuracy,
    SloAttainment,
    SloCapacity,
    TelemetrySummary,
)
from .row_steady import SteadyWindow
from .row_steplog import ServerBatch, StallStats, SteadyWarmup, StepDecomposition, StepLogSource, StepStats, TokenLogStats
from .run_files import RESULTS

#: the reference table's keys, first and in this order in every row
REFERENCE_KEYS = [
    "dataset", "run", "method", "num_speculative_tokens", "requests", "output_tokens",
    "request_throughput_rps", "output_throughput_tps", "speedup_vs_baseline",
    "latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
    "ttft_mean_ms", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms",
    "itl_mean_ms", "itl_p50_ms", "itl_p95_ms", "itl_p99_ms",
    "tpot_mean_ms", "tpot_p50_ms", "tpot_p95_ms",
    "acceptance_rate", "acceptance_pos_1", "acceptance_pos_2", "acceptance_pos_3", "mean_acceptance_length",
]

REFERENCE_SET = frozenset(REFERENCE_KEYS)
#: acceptance positions beyond the reference's three (K > 3): keys no field declares, written after them
EXTRA_POSITION = re.compile(r"^acceptance_pos_(\d+)$")


# Python takes a dataclass's fields from its last base up, so the groups are listed last first: the row's
# fields run from CellIdentity to FromSchedule (GROUPS), the order results.json writes them in after the
# reference keys. Record comes first, so its __setattr__ (which tracks the keys a row carries) is the row's.
@dataclass(eq=False)
class ResultRow(Record, FromSchedule, SteadyWarmup, StallStats, TokenLogStats, StepDecomposition, StepLogSource, ServerBatch,
                StepStats, RepeatSpread, O200kLengths, AcceptedPerStep, CacheSplit, SteadyWindow, SloCapacity, CostVsBaseline,
                PairedAccuracy, SlowerShare, CostSummary,
                TelemetrySummary, Accuracy, RequestAcceptance, SloAttainment, Decomposition, Fidelity, PairedSpeedup,
                Categories, RepeatStats, CellServer, CellStatus, AcceptanceChecks, Agreement, StreamSummary,
                CounterAcceptance, CellLoad, ClientLag, TokenAgreement, SharedReads, LatencyStats, CellThroughput,
                CellIdentity):
    """One cell's numbers (config × data set × load point), an element of results.json's list: the keys of its
    metric groups, each written once that group was measured. Built by the run stage (``measure.summarize_cell``,
    then the groups against the baseline, quality, step log); read leniently (``row_read.read_row``), since results
    files come from other tools and versions too: a key this version does not know is kept and written back."""

    FILE: ClassVar[str] = f"{RESULTS} row"
    KEEP_NONE: ClassVar[bool] = True

    @classmethod
    def start(cls, dataset: str, run: str) -> ResultRow:
        """A row carrying only ``dataset`` and ``run``; each key set afterwards joins it."""
        row = cls.empty()
        row.dataset, row.run = dataset, run
        return row

    @property
    def cell_status(self) -> Any:
        """``status``; a row without the key (from another tool) counts as "ok", a null one does not."""
        return self.status if self.has("status") else "ok"

    def add(self, group: MetricGroup) -> None:
        """A metric group's keys set on the row; a field written only when set (``key(omit_none=True)``) that the
        group left None leaves the row as it was."""
        for name, value in written(group).items():
            setattr(self, name, value)

    def keys(self) -> list[str]:
        """The keys the row carries, in results.json's order (see the module's docstring)."""
        carried = self.__dict__.get("_keys", {})
        specs = self.specs()
        extra = [k for k in carried if k not in specs and k in self.unknown]
        positions = sorted((k for k in extra if EXTRA_POSITION.match(k)), key=lambda k: int(k.rsplit("_", 1)[1]))
        return ([k for k in REFERENCE_KEYS if k in carried] + positions
                + [k for k in specs if k in carried and k not in REFERENCE_SET]
                + [k for k in extra if k not in positions])

    def to_dict(self, reference_first: bool = True) -> dict[str, Any]:
        """The results.json object, in ``keys()``'s order: every reference key (null when unset), then every
        other key the row carries. ``reference_first=False``: only the keys carried."""
        out = {k: self.get(k) for k in REFERENCE_KEYS} if reference_first else {}
        out.update({k: plain(self.get(k)) for k in self.keys() if k not in out})  # notes are records
        return out


FIELD_NAMES = list(ResultRow.specs())
FIELD_SET = frozenset(FIELD_NAMES)
#: the row's metric groups, in declaration order
GROUPS: tuple[type[MetricGroup], ...] = tuple(
    c for c in reversed(ResultRow.__mro__) if issubclass(c, MetricGroup) and c not in (MetricGroup, ResultRow))


def own_names(group: type[MetricGroup]) -> tuple[str, ...]:
    """The keys a group declares itself (a ``StepDecomposition`` adds ``step_source`` to ``Decomposition``'s)."""
    inherited = {f.name for base in group.__mro__[1:] if is_dataclass(base) for f in fields(base)}
    return tuple(n for n in group.names() if n not in inherited)
