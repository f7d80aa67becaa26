"""The acceptance window as phases.jsonl holds it: read and written back byte-identical, whatever
version wrote the line (each engine family writes its own keys, in its own order)."""

import json

import pytest

from specbench.schemas.acceptance import AcceptanceWindow
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.record import RowError
from specbench.util.jsonio import dumps
from tests.support.paths import RUNS

VLLM_K3 = {"acceptance_rate": 0.5, "acceptance_pos_1": 0.7, "acceptance_pos_2": 0.5, "acceptance_pos_3": 0.3,
           "mean_acceptance_length": 2.5, "acceptance_per_position": [0.7, 0.5, 0.3, 0.1], "spec_drafts": 10,
           "spec_draft_tokens": 30, "spec_accepted_tokens": 15, "acceptance_error": None,
           "acceptance_pos_4": 0.1, "acceptance_source": "/metrics counters"}  # a 4th position past k=3 lands after the error
SGLANG = {"acceptance_rate": None, "acceptance_pos_1": None, "acceptance_pos_2": None, "acceptance_pos_3": None,
          "mean_acceptance_length": 3.48, "acceptance_per_position": None, "acceptance_source": "counters",
          "acceptance_error": None, "sglang_generation_tokens": 2800, "sglang_verify_calls": 800,
          "sglang_finished_requests": None}


def test_each_layout_round_trips_byte_identical():
    for layout in (VLLM_K3, SGLANG, {}, {"spec_accepted_tokens": 7}, {"acceptance_rate": 0.5, "a_future_key": [1]}):
        window = AcceptanceWindow.from_dict(layout)
        assert dumps(window.to_dict()) == dumps(layout)
        assert AcceptanceWindow.from_dict(window.to_dict()) == window


def test_fields_read_by_attribute():
    window = AcceptanceWindow.from_dict(VLLM_K3)
    assert window.draft_counts() == (10, 30, 15) and window.verify_counts() is None
    assert window.position(2) == 0.5 and window.position(4) == 0.1 and window.position(5) is None
    assert window.acceptance_per_position == (0.7, 0.5, 0.3, 0.1)
    sglang = AcceptanceWindow.from_dict(SGLANG)
    assert sglang.verify_counts() == (2800, 800) and sglang.draft_counts() is None
    assert AcceptanceWindow.from_dict({"a_future_key": [1]}).extra == {"a_future_key": [1]}
    line = {"config": "c", "dataset": "d", "concurrency": 1, "request_rate": None, "repeat": 0, "wall_s": 1.0}
    assert PhaseInfo.from_dict(line).acceptance == AcceptanceWindow()  # a line without one: null, never a dict
    problems: list[str] = []  # not an object (a hand-edited line): nothing measured, and said
    assert PhaseInfo.from_dict({**line, "acceptance": [3.0]}, "phases.jsonl", problems).acceptance == AcceptanceWindow()
    assert problems == ["phases.jsonl: acceptance: expected an object, got [3.0]; ignored"]
    with pytest.raises(RowError, match="acceptance: expected an object"):
        PhaseInfo.from_line({**line, "acceptance": [3.0]})


def test_with_error_keeps_the_key_in_its_place():
    window = AcceptanceWindow.from_dict(VLLM_K3).with_error("/metrics: connection refused")
    assert list(window.to_dict()) == list(VLLM_K3)
    assert window.to_dict()["acceptance_error"] == "/metrics: connection refused"
    assert list(AcceptanceWindow().with_error("x").to_dict()) == ["acceptance_error"]


def test_stored_phases_read_and_written_back_byte_identical():
    """phases.jsonl lines as several older versions wrote them: the fewest committed lines that together hold every
    key (and type of value) any of them has (phases_versions/), and the runs other tests read."""
    files = sorted([*(RUNS / "phases_versions").glob("*.jsonl"), *RUNS.rglob("phases.jsonl")])
    assert files
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            stored = json.loads(line)
            phase = PhaseInfo.from_dict(stored)
            assert isinstance(phase.acceptance, AcceptanceWindow)
            assert dumps(phase.to_dict()["acceptance"]) == dumps(stored["acceptance"]), path
