"""load.restart, load.target_ci and load.max_repeats: parsed values and one-line errors naming file and key."""

from pathlib import Path

import pytest

from specbench.suite import parse_suite
from tests.unit.suite.test_parse import problems, valid, write


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"prompt": "hello"}\n')
    return p


def launched(prompts):
    data = valid(prompts)
    data["configs"][0].pop("url")
    return data


@pytest.mark.parametrize(("target", "value"), [("3%", 0.03), (" 2.5% ", 0.025), (0.03, 0.03)])
def test_target_ci_as_percent_or_fraction(tmp_path, prompts, target, value):
    data = launched(prompts)
    data["load"].update(restart=True, target_ci=target, max_repeats=8)
    load = parse_suite(data, write(tmp_path, data)).load
    assert load.restart and load.target_ci == pytest.approx(value) and load.max_repeats == 8
    assert load.first_stage == 3 and load.most_repeats == 8  # repeats: 2 is raised to the minimum of 3


def test_restart_alone_keeps_repeats(tmp_path, prompts):
    data = launched(prompts)
    data["load"].update(restart=True, repeats=4)
    load = parse_suite(data, write(tmp_path, data)).load
    assert load.restart and load.target_ci is None and load.first_stage == load.most_repeats == 4


@pytest.mark.parametrize(("load", "expected"), [
    ({"restart": True, "target_ci": "3", "max_repeats": 8}, "load.target_ci: expected a relative half-width such as 3% or 0.03, got '3'"),
    ({"restart": True, "target_ci": "x%", "max_repeats": 8}, "load.target_ci: expected a relative half-width"),
    ({"target_ci": 0.03, "max_repeats": 8}, "load.target_ci: needs load.restart: true"),
    ({"restart": True, "target_ci": 0.03}, "load.target_ci: needs load.max_repeats"),
    ({"max_repeats": 8}, "load.max_repeats: only with load.target_ci"),
    ({"restart": True, "target_ci": 0.03, "max_repeats": 2}, "load.max_repeats: expected at least 3"),
    ({"restart": "yes"}, "load.restart: expected true/false"),
])
def test_bad_repeat_keys_are_one_line_each(tmp_path, prompts, load, expected):
    data = launched(prompts)
    data["load"].update(load)
    found = problems(tmp_path, data)
    assert any(expected in p and "suite.yaml" in p for p in found), found


def test_restart_refuses_a_server_given_by_url(tmp_path, prompts):
    data = valid(prompts)
    data["load"]["restart"] = True
    found = problems(tmp_path, data)
    assert any("configs[0].url: load.restart starts a fresh server per repeat" in p for p in found), found
