"""A metric's typed group becomes row keys through one helper, which refuses a name the row lacks."""

from dataclasses import dataclass

import pytest

from specbench.measure.acceptance import StreamSummary
from specbench.measure.telemetry import TelemetrySummary
from specbench.schemas.row import FIELD_SET, ResultRow, row_keys


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
