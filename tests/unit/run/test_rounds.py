"""load.restart's rounds: which (cell, repeat) a round measures, a round taken whole, and --resume skipping what is done."""

from pathlib import Path

import pytest

from specbench.measure.repeat_spread import RepeatPlan, add_spread, planned_counts
from specbench.run.rounds import restart_rounds, round_cells
from specbench.run.sequential import to_measure
from specbench.schemas.cell import Cell, LoadPoint
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from specbench.schemas.row import ResultRow
from specbench.suite import parse_suite
from tests.unit.suite.test_parse import valid, write


@pytest.fixture
def suite(tmp_path: Path):
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"prompt": "hello"}\n')
    data = valid(p)
    data["configs"][0].pop("url")
    data["datasets"] = [data["datasets"][0]]
    data["load"].update(concurrency=[1], restart=True, repeats=3, target_ci="3%", max_repeats=5)
    return parse_suite(data, write(tmp_path, data))


def test_first_stage_rounds_take_every_cell_then_only_the_planned(suite):
    base, spec = Cell.at("baseline", "p", LoadPoint(1)), Cell.at("dspark_k3", "p", LoadPoint(1))
    assert round_cells(suite, "dspark_k3", 2, None) == {(spec, 2)}
    assert round_cells(suite, "dspark_k3", 3, None) == set()
    assert round_cells(suite, "baseline", 3, {base: 4}) == {(base, 3)}
    assert round_cells(suite, "baseline", 4, {base: 4}) == set()


def test_resume_skips_each_cell_and_repeat_already_measured(suite):
    spec = Cell.at("dspark_k3", "p", LoadPoint(1))
    todo = to_measure(suite, "dspark_k3", ["p"], {(spec, 0)}, {(spec, 0), (spec, 1)})
    assert todo == [("p", LoadPoint(1), 1)]


def test_planned_counts_take_the_most_any_config_plans(suite):
    rows = []
    for run, reps in (("baseline", None), ("a", [1.5, 1.5, 1.5]), ("b", [1.50, 1.53, 1.47])):
        row = ResultRow.start("p", run)
        row.concurrency = 1
        row.speedup_repeats = reps
        rows.append(row)
    base = Cell.at("baseline", "p", LoadPoint(1))
    assert planned_counts(rows, "baseline", 0.03, 3, 5) == {base: 5}
    assert planned_counts(rows[:2], "baseline", 0.03, 3, 5) == {base: 3}


def test_a_relaunch_on_one_side_is_not_fresh_servers():
    """--restart-on-failure can put one pass on start 1 while the baseline stayed on start 0: not between-server."""
    phases, records = [], []
    for config, starts in (("baseline", (0, 0)), ("spec", (0, 1))):
        for rep, start in enumerate(starts):
            phases.append(PhaseInfo(config, "p", 1, None, rep, 1.0, server_start=start))
            records += [RequestRecord.from_dict({"prompt_id": str(i), "dataset": "p", "config": config, "turn": 0,
                                                 "phase": "measure", "concurrency": 1, "repeat": rep,
                                                 "output_tokens": 10 + i, "send_time": 0.0, "end_time": 1.0 + i / 10,
                                                 "chunk_times": [0.5, 1.0 + i / 10], "chunk_tokens": [1, 9 + i]})
                        for i in range(3)]
    rows = []
    for run in ("baseline", "spec"):
        row = ResultRow.start("p", run)
        row.concurrency = 1
        rows.append(row)
    add_spread(rows, phases, records, "baseline", RepeatPlan())
    assert rows[1].speedup_repeats_fresh_servers is False and rows[1].speedup_repeats == [1.0, 1.0]


def test_restart_rounds_group_each_round_and_are_made_only_when_taken(suite):
    """A parallel run takes a round's visits side by side (issue 40): every config's round r together, baseline first;
    a config failed by the time the next round is taken is left out of it, and the planning reads the rows only as the
    first round after the first stage is taken, once every config's first stage is measured."""
    base, spec = Cell.at("baseline", "p", LoadPoint(1)), Cell.at("dspark_k3", "p", LoadPoint(1))
    failed: dict[str, str] = {}
    asked: list[int] = []

    def rows() -> list[ResultRow]:
        asked.append(1)
        out = []
        for run, reps in (("baseline", None), ("dspark_k3", [1.5, 1.5, 1.5])):
            row = ResultRow.start("p", run)
            row.concurrency = 1
            row.speedup_repeats = reps
            out.append(row)
        return out

    rounds = restart_rounds(suite, None, failed, rows)
    rep, taken = next(rounds)
    assert rep == 0 and [(c.name, only) for c, only in taken] == [("baseline", {(base, 0)}), ("dspark_k3", {(spec, 0)})]
    assert [(rep, [c.name for c, _ in taken]) for rep, taken in [next(rounds), next(rounds)]] == [
        (1, ["baseline", "dspark_k3"]), (2, ["baseline", "dspark_k3"])]
    failed["dspark_k3"] = "died"
    assert not asked
    assert list(rounds) == []  # steady first stage: 3 planned, no round after it
    assert asked == [1]
    again = restart_rounds(suite, None, {"dspark_k3": "died"}, rows)
    assert [[c.name for c, _ in taken] for _, taken in list(again)[:1]] == [["baseline"]]
