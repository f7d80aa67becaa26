"""Scale-out (issue #10): --parallel gpus on one machine, --ray on a local Ray cluster.

Servers are scripted test servers started through a fake engine launcher (`fake.yaml`, in a tmp
SPECBENCH_LAUNCHERS dir), so the workers themselves launch them, as with vLLM. The fake engine
reads vLLM's `--speculative-config` (pattern 1,2,k+1 with k = num_speculative_tokens, else 1) and
can kill its parent, the worker, after N requests (FAKE_KILL_PARENT_AFTER; once, FAKE_MARKER).
This machine has no GPU: SPECBENCH_GPUS names fake ones, and the Ray nodes declare fake GPUs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from specbench.errors import LaunchError, SuiteError
from specbench.run import parallel
from specbench.run.parallel import config_gpu_count, detect_gpus, node, parallel_size, plan
from specbench.run.servers import server_log_name
from specbench.schemas.phase import PhaseInfo
from specbench.suite import parse_suite, read_suite
from tests.support import suites
from tests.support.launchers import write_parallel_launcher
from tests.support.runs import run_parallel, run_suite

MAX_TOKENS = 1 + 7 * 3

@pytest.fixture
def parallel_engine(launchers: Path) -> Path:
    """The launcher folder with ``fake``: tests/support/parallel_engine.py started as vLLM would be."""
    write_parallel_launcher(launchers)
    return launchers


def write_suite(tmp_path: Path, prompts_file: Path, configs: list[dict], name: str = "suite.yaml", load: dict | None = None,
                **server) -> Path:
    return suites.write_suite(tmp_path / name, configs, name="par", endpoint="chat", engine="fake", prompts=prompts_file,
                              requests=4, server={"startup_timeout_s": 60, **server},
                              load={"concurrency": [1, 2], "max_tokens": MAX_TOKENS, "temperature": 0, "warmup": 1,
                                    **(load or {})})


BASE = {"name": "baseline"}
SPEC3 = {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3}
SPEC2 = {"name": "ngram_k2", "method": "ngram", "num_speculative_tokens": 2}
# deterministic with the scripted server: equal in a parallel and a sequential run
EXACT = ("dataset", "run", "method", "num_speculative_tokens", "requests", "output_tokens", "mean_acceptance_length",
         "acceptance_rate", "acceptance_pos_1", "spec_drafts", "spec_accepted_tokens", "status", "concurrency",
         "stream_mean_acceptance_length", "failed_requests", "engine", "server_version")


def rows_of(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())


def meta_of(out: Path) -> dict:
    return json.loads((out / "meta.json").read_text())


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_same_form(par: Path, seq: Path) -> None:
    """Same files, same rows in the same order with the same keys; equal where deterministic."""
    files = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())
    assert files(par) == files(seq)
    a, b = rows_of(par), rows_of(seq)
    assert [(r["run"], r["dataset"], r["concurrency"]) for r in a] == [(r["run"], r["dataset"], r["concurrency"]) for r in b]
    for ra, rb in zip(a, b):
        assert list(ra) == list(rb)
        assert {k: ra[k] for k in EXACT} == {k: rb[k] for k in EXACT}
        assert ra["speedup_vs_baseline"] is not None and ra["output_throughput_tps"] > 0
    assert (par / "results.md").read_text().splitlines()[0] == (seq / "results.md").read_text().splitlines()[0]
    # raw files: same lines, in arrival order instead of suite order
    key = lambda r: (r["config"], r["dataset"], r["concurrency"], r["phase"], r["prompt_id"], r["turn"], r["repeat"])
    assert sorted(map(key, jsonl(par / "requests.jsonl"))) == sorted(map(key, jsonl(seq / "requests.jsonl")))
    assert len(jsonl(par / "phases.jsonl")) == len(jsonl(seq / "phases.jsonl"))
    mp, ms = meta_of(par), meta_of(seq)
    assert set(ms) <= set(mp) and mp["comparability"] == ms["comparability"]
    assert set(mp["servers"]) == set(ms["servers"])
    for name, info in mp["servers"].items():
        assert set(info) == set(ms["servers"][name])
        assert Path(info["log"]) == par / "logs" / server_log_name(name, info["start"])  # the latest start's
        assert "$ " in Path(info["log"]).read_text()


def window(out: Path, config: str) -> tuple[float, float]:
    """perf_counter span of a config's measured requests (CLOCK_MONOTONIC: one clock per machine)."""
    recs = [r for r in jsonl(out / "requests.jsonl") if r["config"] == config and r["phase"] == "measure"]
    return min(r["send_time"] for r in recs), max(r["chunk_times"][-1] for r in recs)


# ---- planning ---------------------------------------------------------------------------------


def test_parallel_size_reads_vllm_and_sglang_flags():
    assert parallel_size([]) is None
    assert parallel_size(["--tensor-parallel-size", "4"]) == 4
    assert parallel_size(["-tp", "2", "--pipeline-parallel-size=2"]) == 4
    assert parallel_size(["--tp", "8", "--dp", "2"]) == 16
    assert parallel_size(["--tp", "8", "--dp", "2", "--enable-dp-attention"]) == 8
    assert parallel_size(["--tp-size", "2", "--tp-size", "4"]) == 4  # last wins, as in argparse
    assert parallel_size(["--max-model-len", "4096", "--distributed-executor-backend", "ray"]) is None
    with pytest.raises(SuiteError, match="--tensor-parallel-size expects an integer"):
        parallel_size(["--tensor-parallel-size", "two"])


def test_gpu_count_per_config(tmp_path, prompts_file, parallel_engine):
    suite = read_suite(write_suite(tmp_path, prompts_file, [
        BASE, {**SPEC3, "args": ["--tensor-parallel-size", "2"]}, {**SPEC2, "gpus": "3,5,7"},
        {"name": "remote", "url": "http://127.0.0.1:9"}], args=["-tp", "1"]))
    counts = {c.name: config_gpu_count(suite, c, 1) for c in suite.configs}
    assert counts == {"baseline": 1, "ngram_k3": 2, "ngram_k2": 3, "remote": 0}
    jobs = plan(suite, {"baseline": []}, 1)
    assert [j.config for j in jobs] == ["baseline", "ngram_k3", "ngram_k2", "remote"]
    assert [j.exclusive for j in jobs][-1] == {"url"}
    # a config whose every cell is done is not started again
    done = [PhaseInfo("baseline", "prompts", c, None, 0, 1.0) for c in (1, 2)]
    assert [j.config for j in plan(suite, {"baseline": done}, 1)] == ["ngram_k3", "ngram_k2", "remote"]


def test_plan_counts_only_the_data_sets_a_config_runs_on(tmp_path, prompts_file, parallel_engine):
    datasets = [{"name": "a", "path": str(prompts_file)}, {"name": "b", "path": str(prompts_file)}]
    path = suites.write_suite(tmp_path / "s.yaml", [BASE, {**SPEC3, "datasets": ["b"]}], name="par", engine="fake",
                              datasets=datasets, load={"concurrency": [1, 2]})
    suite = read_suite(path)
    spec = suite.configs[1]
    assert parallel.planning.cells_left(suite, spec, []) == 2  # b at C=1 and C=2; a is not its to measure
    done = [PhaseInfo("ngram_k3", "b", c, None, 0, 1.0) for c in (1, 2)]
    assert [j.config for j in plan(suite, {"ngram_k3": done}, 1)] == ["baseline"]  # --resume: nothing left of it


def test_detect_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECBENCH_GPUS", "0, 1,2,3")
    assert detect_gpus() == ["0", "1", "2", "3"]
    monkeypatch.setenv("SPECBENCH_GPUS", "")
    with pytest.raises(LaunchError, match="names no GPU"):
        detect_gpus()
    monkeypatch.delenv("SPECBENCH_GPUS")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert detect_gpus() == ["4", "5"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aa)'\n"
                                     "echo '  MIG 1g.10gb Device 0: (UUID: MIG-bb)'\necho 'GPU 1: NVIDIA H100 (UUID: GPU-cc)'\n")
    (fake / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    assert detect_gpus() == ["0", "1"]
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(LaunchError, match="SPECBENCH_GPUS"):
        detect_gpus()


def test_gpus_per_server_from_suite_or_argument(tmp_path, prompts_file, parallel_engine):
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE]))
    assert parallel.suite_gpus_per_server(suite) == 1
    assert parallel.suite_gpus_per_server(suite, 4) == 4
    raw = yaml.safe_load(write_suite(tmp_path, prompts_file, [BASE]).read_text())
    raw["server"]["gpus_per_server"] = 2
    try:
        suite = parse_suite(raw, tmp_path / "s.yaml")
    except SuiteError:
        pytest.skip("suite.py does not know server.gpus_per_server yet")
    assert parallel.suite_gpus_per_server(suite) == 2


async def test_unknown_mode_and_engine_without_gpu_env(tmp_path, prompts_file, parallel_engine, monkeypatch):
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE]))
    with pytest.raises(SuiteError, match="must be one of gpus, ray"):
        await run_parallel(suite, tmp_path / "x", mode="slurm")
    (parallel_engine / "cpu.yaml").write_text(yaml.safe_dump({"extends": "fake", "name": "cpu", "gpu_env": None}))
    monkeypatch.setenv("SPECBENCH_GPUS", "0")
    suite = read_suite(write_suite(tmp_path, prompts_file, [{**BASE, "engine": "cpu"}]))
    with pytest.raises(SuiteError, match="has no gpu_env"):
        await run_parallel(suite, tmp_path / "y", mode="gpus")


def test_stale_claims_and_scratch_dirs_of_dead_workers_are_swept(tmp_path, monkeypatch):
    import subprocess
    import tempfile

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    monkeypatch.setattr(node, "PORT_DIR", tmp_path / "ports")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    port, claim = node.claim_port("127.0.0.1")
    assert claim.read_text() == str(os.getpid())
    (tmp_path / "ports" / "1").write_text(str(dead_pid))
    (tmp_path / f"specbench-w{dead_pid}-baseline-abc").mkdir()
    (tmp_path / f"specbench-w{os.getpid()}-baseline-def").mkdir()
    node.sweep_stale()
    assert claim.exists() and not (tmp_path / "ports" / "1").exists()
    assert [p.name for p in tmp_path.glob("specbench-w*")] == [f"specbench-w{os.getpid()}-baseline-def"]


# ---- --parallel gpus --------------------------------------------------------------------------


async def test_gpus_mode_runs_configs_side_by_side_on_disjoint_gpus(tmp_path, prompts_file, parallel_engine, monkeypatch):
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1,2,3")
    monkeypatch.setenv("FAKE_GAP", "0.02")  # phases long enough to overlap clearly
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, SPEC3]))
    events = []
    outcome = await run_parallel(suite, tmp_path / "par", mode="gpus", progress=lambda e, **k: events.append((e, k)),
                                 gpus_per_server=2)
    assert outcome.exit_code == 0, outcome.failed_configs
    meta = meta_of(tmp_path / "par")
    cvd = {name: meta["servers"][name]["env"]["CUDA_VISIBLE_DEVICES"] for name in ("baseline", "ngram_k3")}
    sets = [set(v.split(",")) for v in cvd.values()]
    assert all(len(s) == 2 for s in sets) and not sets[0] & sets[1] and sets[0] | sets[1] == {"0", "1", "2", "3"}
    assert {n: c["gpus"] for n, c in meta["parallel"]["configs"].items()} == cvd
    assert meta["parallel"]["mode"] == "gpus" and meta["failed_configs"] == {}
    ports = {meta["servers"][n]["url"] for n in cvd}
    assert len(ports) == 2
    (a0, a1), (b0, b1) = window(tmp_path / "par", "baseline"), window(tmp_path / "par", "ngram_k3")
    assert a0 < b1 and b0 < a1, "the two configs did not run at the same time"
    assert [e for e, _ in events].count("cell_done") == 4
    assert {k["config"] for e, k in events if e == "server"} == {"baseline", "ngram_k3"}

    seq = await run_suite(suite, tmp_path / "seq")
    assert seq.exit_code == 0
    assert_same_form(tmp_path / "par", tmp_path / "seq")
    assert [(r.run, r.concurrency) for r in outcome.rows] == [(r.run, r.concurrency) for r in seq.rows]


async def test_gpus_mode_a_killed_worker_fails_only_its_cells_and_resume_reruns_them(tmp_path, prompts_file, parallel_engine,
                                                                                    monkeypatch):
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")
    marker = tmp_path / "crashed"
    crashy = {**SPEC2, "env": {"FAKE_KILL_PARENT_AFTER": "7", "FAKE_MARKER": str(marker)}}
    wide = {**SPEC3, "args": ["--tensor-parallel-size", "2"]}  # both GPUs: runs alone
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, crashy, wide], steplog="steps"))
    out = tmp_path / "run"
    outcome = await run_parallel(suite, out, mode="gpus")
    assert marker.exists()
    assert set(outcome.failed_configs) == {"ngram_k2"} and outcome.exit_code == 1
    assert "worker process died (signal 9)" in outcome.failed_configs["ngram_k2"]
    meta = meta_of(out)
    assert set(meta["failed_configs"]) == {"ngram_k2"}
    assert meta["servers"]["ngram_k3"]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    cells = [(r["run"], r["concurrency"]) for r in rows_of(out)]
    # the first phase of ngram_k2 (5 requests) was streamed before the kill at request 8
    assert cells == [("baseline", 1), ("ngram_k2", 1), ("ngram_k3", 1), ("baseline", 2), ("ngram_k3", 2)]
    # the orphaned server was stopped by the worker's watchdog
    crashed_pid = meta["servers"]["ngram_k2"]["pid"]
    for _ in range(60):
        if not Path(f"/proc/{crashed_pid}").exists() or "Z" in Path(f"/proc/{crashed_pid}/stat").read_text().split()[2]:
            break
        await asyncio.sleep(0.5)
    else:
        pytest.fail("the crashed worker's server is still running")

    resumed = await run_parallel(suite, out, mode="gpus", resume=True)
    assert resumed.exit_code == 0, resumed.failed_configs
    assert meta_of(out)["failed_configs"] == {}
    assert all(r["status"] == "ok" for r in rows_of(out))
    phases = jsonl(out / "phases.jsonl")
    assert len(phases) == 6 and len({(p["config"], p["concurrency"]) for p in phases}) == 6
    assert [(r["run"], r["concurrency"]) for r in rows_of(out)] == [
        ("baseline", 1), ("ngram_k2", 1), ("ngram_k3", 1), ("baseline", 2), ("ngram_k2", 2), ("ngram_k3", 2)]
    assert meta_of(out)["parallel"]["configs"].keys() == {"ngram_k2"}  # only it had cells left
    assert_starts_numbered_across_the_resume(out, "ngram_k2")


def assert_starts_numbered_across_the_resume(out: Path, crashed: str, first_log: bool = True) -> None:
    """Issue 38 item 8: a resumed worker's server start is the config's second, as in a sequential run: its own
    number in meta.json, its own log and step-log folder, named by the phases it measured (``first_log``: the
    crashed start's log is in the run directory; a lost Ray worker's stays on its node)."""
    meta = meta_of(out)
    assert meta["server_launches"] == {"baseline": 1, "ngram_k3": 1, crashed: 2}
    assert [s["start"] for s in meta["server_starts"][crashed]] == [0, 1] and meta["servers"][crashed]["start"] == 1
    assert meta["servers"][crashed]["steplog"] == f"logs/steplog/{crashed}-s1"
    assert Path(meta["servers"][crashed]["log"]) == out / "logs" / f"{crashed}.start1.log"
    assert "$ " in (out / "logs" / f"{crashed}.start1.log").read_text()
    assert (out / "logs" / f"{crashed}.log").exists() == first_log
    by_load = {p["concurrency"]: p for p in jsonl(out / "phases.jsonl") if p["config"] == crashed}
    assert (by_load[1]["server_start"], by_load[2]["server_start"]) == (0, 1)
    assert (by_load[1]["steplog"], by_load[2]["steplog"]) == (f"logs/steplog/{crashed}-s0", f"logs/steplog/{crashed}-s1")
    for s in (0, 1):
        assert list((out / "logs" / "steplog" / f"{crashed}-s{s}").glob("sched-*.jsonl"))
    rows = rows_of(out)
    assert all(r["steplog_steps"] > 0 and r.get("steplog_error") is None for r in rows), [
        (r["run"], r.get("steplog_steps"), r.get("steplog_error")) for r in rows]


async def test_gpus_mode_config_larger_than_the_machine_fails_alone(tmp_path, prompts_file, parallel_engine, monkeypatch):
    monkeypatch.setenv("SPECBENCH_GPUS", "0")
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, {**SPEC3, "args": ["--tensor-parallel-size", "2"]}]))
    outcome = await run_parallel(suite, tmp_path / "o", mode="gpus")
    assert outcome.failed_configs == {"ngram_k3": "config 'ngram_k3' needs 2 GPUs; this machine has 1 (0)"}
    assert [r.run for r in outcome.rows] == ["baseline", "baseline"]


async def test_cli_parallel_gpus(tmp_path, prompts_file, parallel_engine, monkeypatch):
    from specbench.cli import build_parser, main

    if "--parallel" not in build_parser()._subparsers._group_actions[0].choices["run"].format_help():
        pytest.skip("specbench run has no --parallel option yet")
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")
    suite = write_suite(tmp_path, prompts_file, [BASE, SPEC3])
    out = tmp_path / "cli"
    code = await asyncio.to_thread(main, ["run", str(suite), "--parallel", "gpus", "--output", str(out), "--quiet"])
    assert code == 0
    meta = meta_of(out)
    assert meta["parallel"]["mode"] == "gpus" and len(rows_of(out)) == 4
    assert {meta["servers"][n]["env"]["CUDA_VISIBLE_DEVICES"] for n in ("baseline", "ngram_k3")} == {"0", "1"}


# ---- load.restart in parallel (issue 40) -------------------------------------------------------

RESTART = {"restart": True, "repeats": 3}


def starts_of(out: Path, config: str) -> list[dict]:
    return meta_of(out)["server_starts"][config]


def assert_fresh_start_per_round(out: Path, configs: tuple[str, ...], rounds: int) -> None:
    """One server start per config and round, numbered by round: meta.json, its log, the phases it measured."""
    meta = meta_of(out)
    assert meta["server_launches"] == {c: rounds for c in configs}
    for config in configs:
        starts = starts_of(out, config)
        assert [s["start"] for s in starts] == list(range(rounds)) and len({s["pid"] for s in starts}) == rounds
        for s in starts:
            log = out / "logs" / server_log_name(config, s["start"])
            assert Path(s["log"]) == log and "$ " in log.read_text()
    phases = jsonl(out / "phases.jsonl")
    assert sorted((p["config"], p["repeat"], p["server_start"]) for p in phases) == sorted(
        (c, rep, rep) for c in configs for rep in range(rounds) for _ in (1, 2))  # two load points per round


def assert_rounds_do_not_overlap(out: Path, rounds: int) -> None:
    """Every phase of round r ended before any phase of round r+1 began (the phases' own /metrics scrape times)."""
    phases = jsonl(out / "phases.jsonl")
    for rep in range(rounds - 1):
        ended = max(p["scraped_after"] for p in phases if p["repeat"] == rep)
        assert ended < min(p["scraped_before"] for p in phases if p["repeat"] == rep + 1), rep


def assert_between_start_ci(rows: list[dict], rounds: int) -> None:
    for row in rows:
        if row["run"] != "baseline":
            assert len(row["speedup_repeats"]) == rounds and row["speedup_repeats_fresh_servers"] is True
            assert row["speedup_ci_method"] == f"Student-t on the log scale over {rounds} paired server starts"
            assert row["speedup_varies"] in (True, False) and row["ci95"]["speedup_vs_baseline"]


async def test_gpus_mode_restart_runs_each_round_side_by_side_on_fresh_starts(tmp_path, prompts_file, parallel_engine,
                                                                              monkeypatch):
    """Issue 40: round r of every config at once, each on its own GPU, the next round only after every config ended
    this one; the same files and keys as a sequential restart run."""
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")
    monkeypatch.setenv("FAKE_STARTS", str(tmp_path / "starts.jsonl"))
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, SPEC3], load=RESTART))
    events = []
    outcome = await run_parallel(suite, tmp_path / "par", mode="gpus", progress=lambda e, **k: events.append((e, k)))
    assert outcome.exit_code == 0, outcome.failed_configs
    out = tmp_path / "par"
    assert_fresh_start_per_round(out, ("baseline", "ngram_k3"), 3)
    assert_rounds_do_not_overlap(out, 3)
    # both configs' workers of a round were started before any of its cells was measured: side by side
    assert [e for e, _ in events if e in ("server", "cell_done")] == (["server"] * 2 + ["cell_done"] * 4) * 3
    # each round on disjoint GPUs, the order turned each round so each config's starts visit both GPUs
    gpus = {c: [s["env"]["CUDA_VISIBLE_DEVICES"] for s in starts_of(out, c)] for c in ("baseline", "ngram_k3")}
    assert gpus == {"baseline": ["0", "1", "0"], "ngram_k3": ["1", "0", "1"]}
    # the engine's own record: each round's servers started only after every phase of the round before had ended
    pids = {s["pid"]: s["start"] for c in gpus for s in starts_of(out, c)}
    started = [(pids[e["pid"]], e["t"]) for e in jsonl(tmp_path / "starts.jsonl")]
    assert sorted(rep for rep, _ in started) == [0, 0, 1, 1, 2, 2]
    phases = jsonl(out / "phases.jsonl")
    for rep, t in started:
        assert all(p["scraped_after"] < t for p in phases if p["repeat"] < rep)
    assert_between_start_ci(rows_of(out), 3)
    assert meta_of(out)["failed_configs"] == {}

    seq = await run_suite(suite, tmp_path / "seq")
    assert seq.exit_code == 0
    assert_same_form(out, tmp_path / "seq")
    assert_between_start_ci(rows_of(tmp_path / "seq"), 3)


async def test_gpus_mode_restart_a_killed_worker_fails_only_its_config_and_resume_completes_it(
        tmp_path, prompts_file, parallel_engine, monkeypatch):
    """The worker of round 0 dies after its C=1 cell: only its config fails (no later round of it), and --resume
    measures exactly its missing (cell, repeat)s, each round on a fresh start numbered on."""
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")
    marker = tmp_path / "crashed"
    crashy = {**SPEC2, "env": {"FAKE_KILL_PARENT_AFTER": "7", "FAKE_MARKER": str(marker)}}
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, crashy], load={"restart": True, "repeats": 2}))
    out = tmp_path / "run"
    outcome = await run_parallel(suite, out, mode="gpus")
    assert marker.exists() and set(outcome.failed_configs) == {"ngram_k2"} and outcome.exit_code == 1
    assert "worker process died (signal 9)" in outcome.failed_configs["ngram_k2"]
    assert set(meta_of(out)["failed_configs"]) == {"ngram_k2"}
    measured = sorted((p["config"], p["concurrency"], p["repeat"], p["server_start"]) for p in jsonl(out / "phases.jsonl"))
    assert measured == [("baseline", 1, 0, 0), ("baseline", 1, 1, 1), ("baseline", 2, 0, 0), ("baseline", 2, 1, 1),
                        ("ngram_k2", 1, 0, 0)]

    resumed = await run_parallel(suite, out, mode="gpus", resume=True)
    assert resumed.exit_code == 0, resumed.failed_configs
    meta = meta_of(out)
    assert meta["failed_configs"] == {} and meta["server_launches"] == {"baseline": 2, "ngram_k2": 3}
    assert [s["start"] for s in meta["server_starts"]["ngram_k2"]] == [0, 1, 2]
    spec = {(p["concurrency"], p["repeat"]): p["server_start"] for p in jsonl(out / "phases.jsonl") if p["config"] == "ngram_k2"}
    assert spec == {(1, 0): 0, (2, 0): 1, (1, 1): 2, (2, 1): 2}  # round 0's missing cell on start 1, round 1 on start 2
    assert len(jsonl(out / "phases.jsonl")) == 8
    assert all(r["status"] == "ok" for r in rows_of(out))
    assert_between_start_ci(rows_of(out), 2)


# ---- --ray ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster():
    """Head without GPUs + one node with 4 fake GPUs, all on 127.0.0.1 (about 25 s to start here)."""
    saved = {k: os.environ.get(k) for k in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_USAGE_STATS_ENABLED")}
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback addresses only; read when ray is imported
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'specbench[ray]'")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    gpu_node = cluster.add_node(num_cpus=3, num_gpus=4)
    cluster.wait_for_nodes()
    yield {"address": cluster.address, "gpu_node": gpu_node.node_id}
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


async def test_ray_mode_matches_a_sequential_run(tmp_path, prompts_file, parallel_engine, ray_cluster):
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, SPEC3, {**SPEC2, "args": ["--tensor-parallel-size", "2"]}]))
    outcome = await run_parallel(suite, tmp_path / "par", mode="ray", address=ray_cluster["address"])
    assert outcome.exit_code == 0, outcome.failed_configs
    meta = meta_of(tmp_path / "par")
    placed = meta["parallel"]["configs"]
    assert {c["node"] for c in placed.values()} == {ray_cluster["gpu_node"]}  # the only node with GPUs
    gpus = {n: meta["servers"][n]["env"]["CUDA_VISIBLE_DEVICES"] for n in placed}
    assert sorted(len(v.split(",")) for v in gpus.values()) == [1, 1, 2]
    assert meta["parallel"]["cluster_resources"]["GPU"] == 4
    seq = await run_suite(suite, tmp_path / "seq")
    assert seq.exit_code == 0
    assert_same_form(tmp_path / "par", tmp_path / "seq")


async def test_ray_mode_a_killed_worker_fails_only_its_cells_and_resume_reruns_them(tmp_path, prompts_file, parallel_engine,
                                                                                   ray_cluster):
    marker = tmp_path / "crashed"
    crashy = {**SPEC2, "env": {"FAKE_KILL_PARENT_AFTER": "7", "FAKE_MARKER": str(marker)}}
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, SPEC3, crashy], steplog="steps"))
    out = tmp_path / "run"
    outcome = await run_parallel(suite, out, mode="ray", address=ray_cluster["address"])
    assert marker.exists()
    assert set(outcome.failed_configs) == {"ngram_k2"} and outcome.exit_code == 1
    error = outcome.failed_configs["ngram_k2"]
    assert "Ray worker lost" in error and "WorkerCrashedError" in error
    left = Path(re.search(r"its server log stays on that node: ([^)]+)\)", error)[1])
    assert left.exists() and "$ " in left.read_text()  # for the post-mortem, on the worker's node
    left.unlink()
    on_node = Path(re.search(r"its step log, copied back up to its last measured cell, stays there too: ([^)]+)\)", error)[1])
    assert on_node.name == "ngram_k2-s0" and list(on_node.glob("sched-*.jsonl"))
    shutil.rmtree(on_node)
    assert set(meta_of(out)["failed_configs"]) == {"ngram_k2"}
    cells = [(r["run"], r["concurrency"]) for r in rows_of(out)]
    assert cells == [("baseline", 1), ("ngram_k3", 1), ("ngram_k2", 1), ("baseline", 2), ("ngram_k3", 2)]
    assert (out / "logs" / "baseline.log").exists()  # shipped back from the worker's node
    # the step log came back with each cell, the lost worker's measured cell too (issue 38 item 8)
    for r in rows_of(out):
        assert r["steplog_steps"] > 0 and r.get("steplog_error") is None, (r["run"], r.get("steplog_error"))
    assert not list((Path(left).parent / "steplog").glob("baseline-s*"))  # removed from the node once copied

    resumed = await run_parallel(suite, out, mode="ray", address=ray_cluster["address"], resume=True)
    assert resumed.exit_code == 0, resumed.failed_configs
    assert meta_of(out)["failed_configs"] == {}
    assert len(jsonl(out / "phases.jsonl")) == 6
    assert len(rows_of(out)) == 6 and all(r["status"] == "ok" for r in rows_of(out))
    assert_starts_numbered_across_the_resume(out, "ngram_k2", first_log=False)


async def test_ray_mode_without_ray_says_how_to_install(tmp_path, prompts_file, parallel_engine, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE]))
    with pytest.raises(LaunchError, match=r"pip install 'specbench\[ray\]'"):
        await run_parallel(suite, tmp_path / "o", mode="ray", address="auto")


async def test_ray_mode_restart_runs_the_rounds_on_fresh_starts(tmp_path, prompts_file, parallel_engine, ray_cluster):
    """Issue 40 with --ray: each round a Ray task per config, the next round after every task of this one ended."""
    suite = read_suite(write_suite(tmp_path, prompts_file, [BASE, SPEC3], load={"restart": True, "repeats": 2}))
    outcome = await run_parallel(suite, tmp_path / "par", mode="ray", address=ray_cluster["address"])
    assert outcome.exit_code == 0, outcome.failed_configs
    out = tmp_path / "par"
    assert_fresh_start_per_round(out, ("baseline", "ngram_k3"), 2)  # each start's log shipped back under its name
    assert_rounds_do_not_overlap(out, 2)
    assert_between_start_ci(rows_of(out), 2)
    assert meta_of(out)["failed_configs"] == {}
