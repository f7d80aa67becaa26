"""A metric's typed group becomes row keys through one helper, which refuses a name the row lacks."""

from dataclasses import dataclass, field, fields

import pytest

from specbench.grade.grading import Accuracy, PairedAccuracy
from specbench.measure.acceptance import Agreement, StreamSummary
from specbench.measure.compare import Decomposition, Fidelity, PairedSpeedup
from specbench.measure.keepup import TokenAgreement
from specbench.measure.latency import LatencyStats, SharedReads
from specbench.measure.per_request import RequestAcceptance, SlowerShare
from specbench.measure.steplog import StepDecomposition, StepStats
from specbench.measure.telemetry import CostSummary, TelemetrySummary
from specbench.run.steplog import StepLogSource
from specbench.schemas.row import FIELD_SET, WHEN_SET, ResultRow, row_keys


@dataclass
class Misspelt:
    stream_stepz: int | None = None


def test_a_group_field_the_row_lacks_raises():
    with pytest.raises(TypeError, match="Misspelt: not a ResultRow field: stream_stepz"):
        row_keys(Misspelt())


def test_groups_set_their_fields_in_order():
    group = TelemetrySummary(energy_j=5.0, telemetry_error="x")
    assert list(row_keys(group)) == ["energy_j", "joules_per_output_token", "gpu_util_mean_pct", "gpu_mem_used_max_mib",
                                     "sm_clock_mean_mhz", "telemetry_gpus", "telemetry_error"]
    row = ResultRow.start("d", "c")
    row.update(row_keys(group))
    assert row.energy_j == 5.0 and row.telemetry_error == "x" and not row.unknown
    assert set(StreamSummary.__dataclass_fields__) <= FIELD_SET


@pytest.mark.parametrize("group", [Accuracy, Agreement, CostSummary, Decomposition, Fidelity, LatencyStats, PairedAccuracy,
                                   PairedSpeedup, RequestAcceptance, SharedReads, SlowerShare, StepDecomposition,
                                   StepLogSource, StepStats, StreamSummary, TelemetrySummary, TokenAgreement])
def test_every_metric_group_names_only_row_fields(group):
    assert {f.name for f in fields(group)} <= FIELD_SET


@dataclass(frozen=True)
class WithError:
    accuracy: float | None
    accuracy_error: str | None = field(default=None, metadata=WHEN_SET)


def test_a_when_set_field_is_written_only_with_a_value():
    assert row_keys(WithError(None)) == {"accuracy": None}
    row = ResultRow.start("d", "c")
    row.add(WithError(0.5, "why"))
    assert row.keys() == ["dataset", "run", "accuracy", "accuracy_error"] and row.accuracy_error == "why"
