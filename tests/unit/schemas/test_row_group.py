"""Metric groups: each results key declared once, in one group, with its meaning; the row is composed of
the groups and writes its keys in their declaration order, whatever order they were set in."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from specbench.schemas import (
    row_acceptance,
    row_baseline,
    row_cache,
    row_cell,
    row_latency,
    row_quality,
    row_steady,
    row_steplog,
)
from specbench.schemas.row import FIELD_NAMES, GROUPS, REFERENCE_KEYS, ResultRow, own_names
from specbench.schemas.row_group import MetricGroup, written
from specbench.schemas.row_latency import SharedReads
from specbench.schemas.row_quality import Accuracy, TelemetrySummary

MODULES = (row_acceptance, row_baseline, row_cache, row_cell, row_latency, row_quality, row_steady, row_steplog)


def _groups_declared() -> set[type]:
    return {v for m in MODULES for v in vars(m).values()
            if isinstance(v, type) and issubclass(v, MetricGroup) and v is not MetricGroup}


def test_every_group_declared_is_part_of_the_row():
    """A group ``ResultRow`` does not inherit would set attributes no key writes: every one is a base."""
    assert _groups_declared() == set(GROUPS)


def test_every_key_is_declared_once_with_its_meaning():
    owned = [name for g in GROUPS for name in own_names(g)]
    assert sorted(owned) == sorted(FIELD_NAMES) and len(owned) == len(set(owned))
    specs = ResultRow.specs()
    assert [k for k in FIELD_NAMES if not specs[k].doc] == []
    assert set(REFERENCE_KEYS) <= set(FIELD_NAMES)


def test_a_group_is_set_once_by_its_constructor():
    group = SharedReads(3, 0.5)
    with pytest.raises(FrozenInstanceError, match="SharedReads.shared_read_chunks"):
        group.shared_read_chunks = 4
    assert group.shared_read_chunks == 3


def test_groups_set_their_fields_and_a_when_set_field_only_with_a_value():
    group = TelemetrySummary(energy_j=5.0, telemetry_error="x")
    assert list(written(group)) == ["energy_j", "joules_per_output_token", "gpu_util_mean_pct", "gpu_mem_used_max_mib",
                                    "sm_clock_mean_mhz", "telemetry_gpus", "telemetry_error"]
    assert "accuracy_error" not in written(Accuracy(accuracy=0.5))
    row = ResultRow.start("d", "c")
    row.add(Accuracy(accuracy=None, accuracy_error="why"))
    row.add(group)
    assert row.energy_j == 5.0 and row.accuracy_error == "why" and not row.unknown
    assert "grade_network_guard" not in row.keys() and row.has("accuracy_ungraded")


def test_keys_are_written_in_declaration_order_whatever_the_order_they_were_set_in():
    """Moving a call that sets keys no longer moves the bytes of results.json."""
    row = ResultRow.start("d", "c")
    row.add(TelemetrySummary(energy_j=5.0))
    row.set("zz_newer", 1)
    row.set("acceptance_pos_5", 0.1)
    row.set("acceptance_pos_4", 0.2)
    row.add(SharedReads(3, 0.5))
    row.slo_attainment = 0.9
    out = list(row.to_dict())
    assert out[:len(REFERENCE_KEYS)] == REFERENCE_KEYS
    assert out[len(REFERENCE_KEYS):] == ["acceptance_pos_4", "acceptance_pos_5", "shared_read_chunks", "shared_read_share",
                                         "slo_attainment", *written(TelemetrySummary()), "zz_newer"]
    assert list(row.to_dict(reference_first=False)) == ["dataset", "run", *out[len(REFERENCE_KEYS):]]


def test_docs_records_documents_every_results_key():
    from specbench.schemas.docs import records_markdown

    page = records_markdown()
    assert [k for k in FIELD_NAMES if f"| `{k}` |" not in page] == []
