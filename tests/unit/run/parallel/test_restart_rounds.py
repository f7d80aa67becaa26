"""load.restart in a parallel run (issue 40): one round's jobs, the GPUs' order per round, and the rounds taken one
after another with a barrier between them, on a stand-in collector (the workers' side is in
tests/integration/run/test_parallel.py)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from specbench.run.parallel.restart_rounds import round_gpus, round_jobs, run_rounds
from specbench.run.rounds import restart_rounds
from specbench.schemas.cell import Cell, LoadPoint
from specbench.suite import parse_suite
from tests.unit.suite.test_parse import valid, write


def restart_suite(tmp_path: Path, *, spec_gpus: int = 1, repeats: int = 3):
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"prompt": "hello"}\n')
    data = valid(p)
    data["configs"][0].pop("url")
    data["configs"][1].update(gpus=",".join(str(i) for i in range(spec_gpus)))
    data["configs"][1].pop("port")
    data["datasets"] = [data["datasets"][0]]
    data["load"].update(concurrency=[1, 4], restart=True, repeats=repeats)
    return parse_suite(data, write(tmp_path, data))


BASE1, BASE4 = Cell.at("baseline", "p", LoadPoint(1)), Cell.at("baseline", "p", LoadPoint(4))
SPEC1, SPEC4 = Cell.at("dspark_k3", "p", LoadPoint(1)), Cell.at("dspark_k3", "p", LoadPoint(4))


def test_a_round_starts_each_config_on_what_is_left_of_it(tmp_path):
    suite = restart_suite(tmp_path, spec_gpus=2)
    _, taken = next(restart_rounds(suite, None, {}, list))
    jobs = round_jobs(suite, taken, set(), 1)
    assert [(j.config, j.gpus, j.launched, j.only) for j in jobs] == [
        ("baseline", 1, True, {(BASE1, 0), (BASE4, 0)}), ("dspark_k3", 2, True, {(SPEC1, 0), (SPEC4, 0)})]
    # --resume: what is measured is not measured again; a config with nothing left gets no worker
    jobs = round_jobs(suite, taken, {(BASE1, 0), (BASE4, 0), (SPEC1, 0)}, 1)
    assert [(j.config, j.only) for j in jobs] == [("dspark_k3", {(SPEC4, 0)})]


def test_the_gpus_turn_by_the_baselines_count_each_round(tmp_path):
    suite = restart_suite(tmp_path)
    assert [round_gpus(suite, ["0", "1"], rep, 1) for rep in range(3)] == [["0", "1"], ["1", "0"], ["0", "1"]]
    assert round_gpus(suite, ["0", "1", "2", "3"], 1, 2) == ["2", "3", "0", "1"]  # two GPUs a server: pairs stay pairs
    assert round_gpus(suite, ["0", "1", "2", "3"], 2, 2) == ["0", "1", "2", "3"]


class Session:
    def __init__(self) -> None:
        self.measured: set[tuple[Cell, int]] = set()
        self.succeeded: list[str] = []

    def rows(self) -> list:
        return []

    def done(self) -> set[tuple[Cell, int]]:
        return set(self.measured)

    def config_succeeded(self, name: str) -> None:
        self.succeeded.append(name)

    def save_meta(self) -> None:
        pass


def collector() -> SimpleNamespace:
    return SimpleNamespace(session=Session(), failed={}, stopping=False, interrupted=False, defer_success=False)


async def test_each_round_starts_only_after_the_one_before_has_ended(tmp_path):
    """The barrier: ``launch`` is awaited round by round; a config failed in a round is left out of the later ones;
    success is said once, after the last round (a --resume's first round must not clear an earlier failure)."""
    suite = restart_suite(tmp_path)
    coll = collector()
    launched: list[tuple[int, list[str]]] = []

    async def launch(jobs, rep):
        assert coll.defer_success and not coll.session.succeeded
        assert all(rep > r for r, _ in launched)  # the round before has returned: every one of its jobs ended
        launched.append((rep, [j.config for j in jobs]))
        coll.session.measured |= {cell for j in jobs for cell in j.only}
        if rep == 1:
            coll.failed["dspark_k3"] = "worker process died"

    await run_rounds(coll, suite, 1, launch)
    assert launched == [(0, ["baseline", "dspark_k3"]), (1, ["baseline", "dspark_k3"]), (2, ["baseline"])]
    assert coll.session.succeeded == ["baseline"]


@pytest.mark.parametrize("how", ["stopping", "interrupted"])
async def test_a_stop_starts_no_further_round_and_says_no_success(tmp_path, how):
    suite = restart_suite(tmp_path)
    coll = collector()
    launched: list[int] = []

    async def launch(jobs, rep):
        launched.append(rep)
        coll.stopping = how == "stopping"  # a signal; a worker that ended interrupted (a Ray task cancelled)
        coll.interrupted = True

    await run_rounds(coll, suite, 1, launch)
    assert launched == [0] and coll.session.succeeded == []
