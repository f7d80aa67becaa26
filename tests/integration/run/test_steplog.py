"""The step log end to end on the vLLM-shaped fake engine (tests/support/fake_engine.py writes step-log
rows into SPECBENCH_STEPLOG_DIR, one per decode chunk): the env reaches the server, the launch folder is
named in meta.json, each timed pass is cut from it, results carry the keys and the Why table says so."""

import asyncio
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from specbench.cli import main
from specbench.hooks.site import folder_sha256
from specbench.measure.accepted import SOURCE_CHUNKS, SOURCE_STEPLOG
from tests.support.launchers import write_launcher
from tests.support.paths import PACKAGE_ENV, SUPPORT


@pytest.fixture
def fake_engine(launchers, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))  # the plugin folder: never the user's cache
    write_launcher(launchers, "fake", extends="vllm", python=sys.executable, env=PACKAGE_ENV,
                   command=["{python}", str(SUPPORT / "fake_engine.py")],
                   args=["--port", "{port}", "--host", "{host}", "--served-model-name", "{model}", "--gap", "0.004",
                         "--gap-per-draft", "0.001"])


def suite_file(tmp_path, steplog="timing"):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(3)))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "steps", "model": "smol", "engine": "fake",
        "configs": [{"name": "baseline"}, {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3},
                    {"name": "quiet", "method": "ngram", "num_speculative_tokens": 2, "steplog": "off"}],
        "datasets": [{"name": "a", "path": str(prompts)}],
        "load": {"concurrency": [1], "max_tokens": 21, "warmup": 1, "repeats": 2},
        "server": {"startup_timeout_s": 30, "steplog": steplog}}))
    return suite


async def test_step_log_reaches_the_results_and_the_why_table(tmp_path, fake_engine):
    out = tmp_path / "out"
    code = await asyncio.to_thread(main, ["run", str(suite_file(tmp_path)), "-o", str(out), "-q"])
    assert code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["servers"]["ngram_k3"]["steplog"] == "logs/steplog/ngram_k3-s0"
    assert "--cudagraph-metrics" in meta["servers"]["ngram_k3"]["argv"]
    assert "steplog" not in meta["servers"]["quiet"] and "--cudagraph-metrics" not in meta["servers"]["quiet"]["argv"]
    folder = out / "logs" / "steplog" / "ngram_k3-s0"
    assert list(folder.glob("sched-*.jsonl")) and list(folder.glob("gpu-*.jsonl"))  # the env reached the server
    plugin = meta["servers"]["ngram_k3"]["steplog_plugin"]  # built once in the cache, named by its sha256, not copied
    assert plugin == meta["servers"]["baseline"]["steplog_plugin"] and "steplog_plugin" not in meta["servers"]["quiet"]
    assert plugin["path"] == str(tmp_path / "cache" / "plugin" / plugin["sha256"][:16]) and folder_sha256(Path(plugin["path"])) == plugin["sha256"]
    assert sorted(p.name for p in (out / "logs" / "steplog").iterdir()) == ["baseline-s0", "ngram_k3-s0"]
    assert not (out / "logs" / "steplog" / "quiet-s0").exists()
    rows = {r["run"]: r for r in json.loads((out / "results.json").read_text())}
    spec, base, quiet = rows["ngram_k3"], rows["baseline"], rows["quiet"]
    # 3 prompts × 2 repeats × 20 decode chunks of 3 tokens... minus the last (21 = 1 + 6×3 + 2): 7 steps each
    assert spec["steplog_steps"] == 2 * 3 * 7 and base["steplog_steps"] == 2 * 3 * 20
    assert spec["steplog_accepted"] == spec["steplog_counter_accepted"] == spec["spec_accepted_tokens"]
    assert spec["steplog_accepted_agree"] is True and spec["steplog_hist_agree"] is True
    # accepted tokens per step from the step log's histogram (6 steps accepting 2, the last cut to 1, per request)
    assert spec["accepted_per_step"] == [0, 6, 36] and spec["accepted_per_step_source"] == SOURCE_STEPLOG
    assert quiet["accepted_per_step"] == [0, 6, 36] and quiet["accepted_per_step_source"] == SOURCE_CHUNKS
    assert spec["steplog_window"] == "/metrics scrapes" and spec["steplog_skipped_rows"] is None
    assert spec["step_source"] == "step log" and "steplog_steps" not in quiet
    assert quiet["step_source"] == "chunk gaps"  # its own server had no log: the chunks' decomposition, said
    assert spec["step_cost_ratio"] == pytest.approx(spec["steplog_step_mean_ms"] / base["steplog_step_mean_ms"])
    keys = list(rows["ngram_k3"])
    assert {k for k in keys[keys.index("steplog_steps"):] if not k.startswith("steplog_")} == {"step_source"}  # the step log's keys end the row
    md = (out / "results.md").read_text()
    why, step = md.split("Why:")[1].split("Step: the engine's own step log")
    assert "| Step source |" in why and "| a | ngram_k3 | " in why and "step log |" in why
    assert f"| {spec['steplog_tokens_per_step']:.3f} | {spec['step_cost_ratio']:.3f}x |" in why
    acc = spec["steplog_accepted"]
    assert f"| {acc} = {acc} | {acc} = {acc} |" in step.split("Per request")[0]
    # export: steps/ (one row per step of each timed pass) and outputs/, identity columns on every file
    prof = tmp_path / "prof"
    assert main(["export", str(out), "-o", str(prof), "--gpu", "H200"]) == 0
    steps = pd.read_parquet(prof / "steps")
    assert len(list((prof / "steps" / "H200" / "smol" / "a" / "ngram-k3").glob("steps-*-r[01].parquet"))) == 2  # a file per repeat
    assert len(steps[steps.drafter == "ngram"]) == spec["steplog_steps"] and set(steps.drafter) == {"none", "ngram"}
    assert set(steps.start) == {0, 1} and set(steps.c) == {1} and set(steps.gpu) == {"H200"}
    ngram = steps[steps.drafter == "ngram"]
    assert sum(sum((j - 1) * n for j, n in enumerate(h) if j) for h in ngram["hist"]) == spec["steplog_accepted"]
    assert ngram.since_prev_ms.notna().all() and ngram.t_d1.notna().all() and ngram.full_graph.isna().all()
    outputs = pd.read_parquet(prof / "outputs")
    assert len(outputs) == 3 * 6 and {"req", "question_id", "category", "prompt_tokens", "output_ids", "start", "k"} <= set(outputs)


async def test_steps_level_and_overwrite_start_the_folders_afresh(tmp_path, fake_engine):
    """``steps``: scheduler rows only, the step time from their wall clock; ``--overwrite`` removes logs/, so
    the new run's starts count from s0 again."""
    out = tmp_path / "out"
    (out / "logs" / "steplog" / "ngram_k3-s0").mkdir(parents=True)
    (out / "meta.json").write_text("{}")  # a run was here
    (out / "logs" / "steplog" / "ngram_k3-s0" / "sched-1.jsonl").write_text("stale\n")
    code = await asyncio.to_thread(main, ["run", str(suite_file(tmp_path, "steps")), "-o", str(out), "-q",
                                          "--overwrite"])
    assert code == 0
    folder = out / "logs" / "steplog" / "ngram_k3-s0"
    assert list(folder.glob("sched-*.jsonl")) and not list(folder.glob("gpu-*.jsonl"))
    assert not (folder / "sched-1.jsonl").exists() and not (out / "logs" / "steplog" / "ngram_k3-s1").exists()
    spec = {r["run"]: r for r in json.loads((out / "results.json").read_text())}["ngram_k3"]
    assert spec["steplog_step_clock"] == "scheduler wall" and spec["steplog_step_mean_ms"] > 0
    assert spec["steplog_fwd_ms"] is None and spec["steplog_accepted_agree"] is True
    assert spec["steplog_skipped_rows"] is None and spec["step_source"] == "step log"


async def test_steady_warm_up_repeats_passes_until_one_holds_no_one_time_event(tmp_path, fake_engine):
    """Issue 39 item 3 on the fake engine: its first 7 requests each log a one-time compile; 3 prompts a pass, so
    passes see 3, 3, 1 and then 0 one-time events and the warm-up stops after the 4th. A config whose compiles
    never end stops at the cap and says so; the baseline keeps its own warm-up of 1 request."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(3)))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "steady", "model": "smol", "engine": "fake",
        "configs": [{"name": "baseline", "warmup": 1},
                    {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3,
                     "env": {"FAKE_ONE_TIME_REQUESTS": "7"}},
                    {"name": "ngram_k2", "method": "ngram", "num_speculative_tokens": 2,
                     "env": {"FAKE_ONE_TIME_REQUESTS": "1000"}}],
        "datasets": [{"name": "a", "path": str(prompts)}],
        "load": {"concurrency": [1], "max_tokens": 9, "warmup": "steady", "warmup_max_passes": 5},
        "server": {"startup_timeout_s": 30, "steplog": "steps"}}))
    out = tmp_path / "out"
    assert await asyncio.to_thread(main, ["run", str(suite), "-o", str(out), "-q"]) == 0
    rows = {r["run"]: r for r in json.loads((out / "results.json").read_text())}
    assert rows["ngram_k3"]["warmup_steady_events"] == [[3, 3, 1, 0]] and rows["ngram_k3"]["warmup_steady"] is True
    assert rows["ngram_k3"]["warmup_steady_passes"] == [4] and rows["ngram_k3"]["steplog_one_time_events"] == 0
    assert rows["ngram_k2"]["warmup_steady_events"] == [[3, 3, 3, 3, 3]] and rows["ngram_k2"]["warmup_steady"] is False
    assert rows["ngram_k2"]["steplog_one_time_events"] == 3  # the timed pass still compiled: counted there too
    assert "warmup_steady" not in rows["baseline"]
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    warm = {c: sum(1 for r in records if r["config"] == c and r["phase"] == "warmup") for c in rows}
    assert warm == {"baseline": 1, "ngram_k3": 12, "ngram_k2": 15}
    md = (out / "results.md").read_text()
    assert "steady warm-up: 4 warm-up pass(es) per repeat; the last held no one-time event" in md
    assert "steady warm-up stopped at its cap (5 passes per repeat) with one-time events still in the last (3)" in md


def test_steady_warm_up_without_a_step_log_is_refused(tmp_path):
    from specbench.errors import SuiteError
    from specbench.suite import parse_suite

    with pytest.raises(SuiteError, match=r"configs\[0\]: warmup steady needs the step log"):
        parse_suite({"name": "s", "model": "m", "configs": [{"name": "b"}], "datasets": [{"name": "gsm8k"}],
                     "load": {"warmup": "steady"}}, tmp_path / "s.yaml")
