"""load.restart, load.target_ci and the heterogeneity flag end to end, on an engine whose speed is set
per server start and per pass (tests/support/variance_engine.py), launched through a launcher YAML
so each restart is a new process; sequentially, and with --parallel gpus on fake GPU ids (issue 40)."""

from __future__ import annotations

import asyncio
import json
import math
import sys

import pytest

from specbench.cli import main
from specbench.measure.compare import t975
from specbench.report.notes import sentence
from specbench.schemas.row_read import rows_from
from tests.support.launchers import write_launcher
from tests.support.paths import PACKAGE_ENV, SUPPORT
from tests.support.suites import write_suite

REQUESTS = 6


@pytest.fixture
def engine(launchers, tmp_path):
    """The launcher ``fake``; returns the schedule file the test fills."""
    schedule = tmp_path / "schedule.json"
    write_launcher(launchers, "fake", extends="vllm", python=sys.executable,
                   env={**PACKAGE_ENV, "FAKE_SCHEDULE": str(schedule), "FAKE_PASS_REQUESTS": str(REQUESTS)},
                   command=["{python}", str(SUPPORT / "variance_engine.py")],
                   args=["--port", "{port}", "--host", "{host}", "--served-model-name", "{model}"])
    return schedule


def run(tmp_path, prompts_file, schedule, speeds: dict, parallel: bool = False, **load):
    schedule.write_text(json.dumps(speeds))
    configs = [{"name": "baseline", "env": {"FAKE_CONFIG": "baseline"}},
               {"name": "spec", "method": "ngram", "num_speculative_tokens": 1, "env": {"FAKE_CONFIG": "spec"}}]
    suite = write_suite(tmp_path / "suite.yaml", configs, name="variance", prompts=prompts_file, requests=REQUESTS,
                        engine="fake", server={"startup_timeout_s": 30},
                        load={"concurrency": 2, "max_tokens": 12, "warmup": 0, **load})
    out = tmp_path / "out"
    code = main(["run", str(suite), "--output", str(out), "--quiet", *(["--parallel", "gpus"] if parallel else [])])
    phases = [json.loads(line) for line in (out / "phases.jsonl").read_text().splitlines()]
    requests = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    rows = {r["run"]: r for r in json.loads((out / "results.json").read_text())}
    return code, out, phases, requests, rows


def hand_speedups(phases, requests) -> list[float]:
    """Per repeat: Σ output tokens ÷ wall time of the pass, spec over baseline (the results' arithmetic by hand)."""
    tps = {}
    for p in phases:
        tokens = sum(r["output_tokens"] for r in requests
                     if r["config"] == p["config"] and r["repeat"] == p["repeat"] and r["phase"] == "measure" and r["error"] is None)
        tps[(p["config"], p["repeat"])] = tokens / p["wall_s"]
    reps = sorted({rep for _, rep in tps})
    return [tps[("spec", i)] / tps[("baseline", i)] for i in reps]


def t_interval(values: list[float]) -> tuple[float, float]:
    """The Student-t interval of the log speedups, exponentiated, worked by hand."""
    logs = [math.log(v) for v in values]
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return math.exp(mean - half), math.exp(mean + half)


STEADY = {"baseline": [[0.02]], "spec": [[0.02]]}


async def test_restart_runs_every_repeat_on_its_own_server_start_interleaved(tmp_path, prompts_file, engine):
    code, out, phases, requests, rows = await asyncio.to_thread(run, tmp_path, prompts_file, engine, STEADY,
                                                                repeats=3, restart=True)
    assert code == 0
    assert [(p["config"], p["repeat"], p["server_start"]) for p in phases] == [
        (c, rep, rep) for rep in range(3) for c in ("baseline", "spec")]  # repeat-major, interleaved
    meta = json.loads((out / "meta.json").read_text())
    for config in ("baseline", "spec"):
        starts = meta["server_starts"][config]
        assert [s["start"] for s in starts] == [0, 1, 2] and len({s["pid"] for s in starts}) == 3
        assert [s["log"].rsplit("/", 1)[1] for s in starts] == [f"{config}.log", f"{config}.start1.log",
                                                                 f"{config}.start2.log"]
        assert len((engine.parent / f"schedule.json.{config}.starts").read_text().splitlines()) == 3
    spec = rows["spec"]
    speedups = hand_speedups(phases, requests)
    assert spec["speedup_repeats"] == pytest.approx(speedups, rel=1e-9)
    assert spec["ci95"]["speedup_vs_baseline"] == pytest.approx(list(t_interval(speedups)), rel=1e-9)
    assert spec["speedup_ci_method"] == "Student-t on the log scale over 3 paired server starts"
    assert spec["speedup_repeats_fresh_servers"] is True
    assert spec["speedup_varies"] is False and "varies between" not in (out / "results.md").read_text()
    assert list(spec)[-4:] == ["speedup_repeats", "speedup_repeats_fresh_servers", "speedup_between_p", "speedup_varies"]


@pytest.mark.parametrize(("restart", "parallel"), [(True, False), (False, False), (True, True)])
async def test_the_flag_appears_when_passes_disagree(tmp_path, prompts_file, engine, restart, parallel, monkeypatch):
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")  # with --parallel gpus: each round's two starts side by side
    slow_second = [[0.02], [0.06], [0.02]] if restart else [[0.02, 0.06, 0.02]]
    code, out, phases, requests, rows = await asyncio.to_thread(
        run, tmp_path, prompts_file, engine, {"baseline": [[0.02]], "spec": slow_second}, parallel, repeats=3,
        restart=restart)
    assert code == 0
    spec = rows["spec"]
    assert spec["speedup_varies"] is True and spec["speedup_between_p"] < 0.05
    speedups = hand_speedups(phases, requests)
    where = "servers" if restart else "passes"
    shown = f"varies between {where}: {min(speedups):.2f}–{max(speedups):.2f}×"
    assert shown in (out / "results.md").read_text()
    assert spec["ci95"]["speedup_vs_baseline"] == pytest.approx(list(t_interval(speedups)), rel=1e-9)
    assert spec["speedup_ci_method"] == f"Student-t on the log scale over 3 paired {'server starts' if restart else 'repeats'}"


async def test_steady_passes_on_one_server_are_not_flagged(tmp_path, prompts_file, engine):
    code, out, phases, requests, rows = await asyncio.to_thread(run, tmp_path, prompts_file, engine, STEADY, repeats=3)
    assert code == 0
    assert {p["server_start"] for p in phases} == {0}
    assert rows["spec"]["speedup_varies"] is False and rows["spec"]["speedup_repeats_fresh_servers"] is False


SPREAD_OUT = {"baseline": [[0.02]], "spec": [[0.02], [0.03], [0.015], [0.025], [0.02]]}


@pytest.mark.parametrize(("speeds", "target", "expect_met", "parallel"), [
    (STEADY, 0.5, True, False),  # the first stage is narrow enough (machine noise on 2 busy cores reached ±8 %): stop at 3
    (SPREAD_OUT, 0.03, False, False),  # spread: up to the cap
    (SPREAD_OUT, 0.03, False, True),  # --parallel gpus: the count planned from every config's first stage (a barrier)
])
async def test_adaptive_repeats_stop_where_the_two_stage_rule_says(tmp_path, prompts_file, engine, speeds, target, expect_met,
                                                                   parallel, monkeypatch):
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")
    code, out, phases, requests, rows = await asyncio.to_thread(
        run, tmp_path, prompts_file, engine, speeds, parallel, repeats=2, restart=True, target_ci=f"{target:.0%}",
        max_repeats=5)
    assert code == 0
    spec = rows["spec"]
    speedups = hand_speedups(phases, requests)
    first = speedups[:3]  # repeats: 2 is raised to the minimum first stage of 3
    mean = sum(first) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in first) / 2)
    planned = min(5, max(3, math.ceil((t975(2) * sd / (target * mean)) ** 2 - 1e-9)))
    assert len(speedups) == spec["repeats"] == planned
    assert planned == (3 if expect_met else 5)
    assert spec["repeats_target"] == pytest.approx(target) and spec["repeats_target_met"] is expect_met
    note = f"{planned} repeats on server starts; target ±{target:.1%}: {'met' if expect_met else 'not met'}"
    assert any(sentence(n).startswith(note) for n in rows_from([spec])[0].notes)
    assert note in (out / "results.md").read_text()
