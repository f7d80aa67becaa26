"""Suite files: a valid suite loads into typed values; every mistake is one line naming file and key."""

import re
from pathlib import Path

import pytest
import yaml

from specbench.errors import SuiteError
from specbench.gate.judge import comparability_problems
from specbench.schemas.meta import RunMeta
from specbench.suite import LoadSpec, Suite, parse_suite, read_suite
from tests.support.paths import ROOT


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"prompt": "hello"}\n{"prompt": "world"}\n')
    return p


def valid(prompts: Path) -> dict:
    return {
        "name": "t", "model": "smol", "endpoint": "chat", "engine": "vllm",
        "configs": [
            {"name": "baseline", "url": "http://127.0.0.1:8000/"},
            {"name": "dspark_k3", "method": "dspark", "num_speculative_tokens": 3, "drafter": "d/draft",
             "speculative": {"draft_sample_method": "greedy"}, "args": ["--max-model-len", 4096], "env": {"X": 1},
             "port": 8123, "gpus": 1},
        ],
        "datasets": [{"name": "p", "path": prompts.name, "requests": 2}, "builtin"],
        "load": {"concurrency": [1, 4], "max_tokens": 64, "temperature": 0, "warmup": 0, "repeats": 2,
                 "timeout_s": 30, "top_p": 1},
        "server": {"startup_timeout_s": 60, "args": ["--seed", 1], "host": "127.0.0.1"},
    }


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def problems(tmp_path: Path, data) -> list[str]:
    path = write(tmp_path, data)
    with pytest.raises(SuiteError) as info:
        read_suite(path)
    lines = str(info.value).splitlines()
    for line in lines:
        assert line.startswith(str(path)), line  # every line names the file
    return lines


def test_valid_suite_loads_typed_values(tmp_path, prompts):
    suite = read_suite(write(tmp_path, valid(prompts)))
    assert isinstance(suite, Suite) and suite.name == "t" and suite.model == "smol" and suite.endpoint == "chat"
    base, spec = suite.configs
    assert base.url == "http://127.0.0.1:8000" and not base.launched  # trailing slash dropped
    assert spec.launched and spec.method == "dspark" and spec.num_speculative_tokens == 3
    assert spec.drafter == "d/draft" and spec.speculative == {"draft_sample_method": "greedy"}
    assert spec.args == ("--max-model-len", "4096") and spec.env == {"X": "1"} and spec.gpus == "1"
    assert spec.port == 8123 and spec.label_method == "dspark" and base.label_method == "baseline"
    assert [d.name for d in suite.datasets] == ["p", "builtin"]
    assert suite.datasets[0].path == prompts.resolve() and suite.datasets[0].requests == 2
    assert suite.load.concurrency == (1, 4) and suite.load.max_tokens == 64 and suite.load.repeats == 2
    assert isinstance(suite.load.temperature, float) and suite.load.temperature == 0.0
    assert suite.load.timeout_s == 30.0 and suite.load.top_p == 1.0
    assert suite.server.startup_timeout_s == 60.0 and suite.server.args == ("--seed", "1")
    assert suite.baseline is base


def test_defaults(tmp_path, prompts):
    data = {"name": "t", "model": "m", "configs": [{"name": "a"}], "datasets": ["builtin"]}
    suite = read_suite(write(tmp_path, data))
    assert suite.endpoint == "chat" and suite.engine == "vllm"
    assert suite.load == LoadSpec()
    assert suite.load.concurrency == (1,) and suite.load.request_rate is None
    assert suite.baseline is None


def test_request_rate_list(tmp_path, prompts):
    data = valid(prompts)
    data["load"] = {"request_rate": [0.5, 2]}
    assert read_suite(write(tmp_path, data)).load.request_rate == (0.5, 2.0)


def test_embedded_cpu_smoke_suite_loads():
    suite = read_suite(ROOT / "suites" / "cpu_smoke.yaml")
    assert [c.name for c in suite.configs] == ["baseline", "ngram_k3", "ngram_k7"]
    assert suite.baseline.name == "baseline" and suite.engine == "vllm-cpu"


def test_gpu_dummy_suite_runs_every_config_on_random_weights():
    suite = read_suite(ROOT / "suites" / "gpu_dummy_qwen3_8b.yaml")
    assert suite.dummy_configs == ["baseline", "dspark_k3"] and suite.load.ignore_eos


# ---------------------------------------------------------------- one-line errors


def test_unknown_top_key(tmp_path, prompts):
    data = valid(prompts)
    data["concurency"] = 4
    lines = problems(tmp_path, data)
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 'suite.yaml'}.concurency: unknown key")
    assert "allowed:" in lines[0] and "configs" in lines[0]


def test_unknown_config_key(tmp_path, prompts):
    data = valid(prompts)
    data["configs"][1]["drafter_path"] = "x"
    (line,) = problems(tmp_path, data)
    assert "configs[1].drafter_path: unknown key" in line and "drafter" in line


def test_unknown_load_key(tmp_path, prompts):
    data = valid(prompts)
    data["load"]["max_token"] = 10
    (line,) = problems(tmp_path, data)
    assert "load.max_token: unknown key" in line and "max_tokens" in line


def test_unknown_server_key(tmp_path, prompts):
    data = valid(prompts)
    data["server"]["pyhton"] = "/x"
    (line,) = problems(tmp_path, data)
    assert "server.pyhton: unknown key" in line


@pytest.mark.parametrize("section, key, value, expect", [
    ("load", "max_tokens", "64", "load.max_tokens: expected an integer, got '64'"),
    ("load", "ignore_eos", "yes", "load.ignore_eos: expected true/false, got 'yes'"),
    ("load", "max_tokens", True, "load.max_tokens: expected an integer, got True"),
    ("config", "num_speculative_tokens", 2.5, "configs[1].num_speculative_tokens: expected an integer, got 2.5"),
    ("config", "args", "--x", "configs[1].args: expected a list, got '--x'"),
    ("config", "baseline", "no", "configs[1].baseline: expected true/false, got 'no'"),
    ("top", "model", 7, ".model: expected a string, got 7"),
    ("top", "configs", {"name": "a"}, ".configs: expected a list"),
])
def test_wrong_type(tmp_path, prompts, section, key, value, expect):
    data = valid(prompts)
    target = {"load": data["load"], "config": data["configs"][1], "top": data}[section]
    target[key] = value
    lines = problems(tmp_path, data)
    assert len(lines) == 1 and expect in lines[0], lines


def test_missing_required_keys(tmp_path):
    lines = problems(tmp_path, {"endpoint": "chat"})
    assert len(lines) == 4
    for key in ("name", "model", "configs", "datasets"):
        assert any(l.endswith(f".{key}: required key missing") for l in lines), key


def test_config_without_name(tmp_path, prompts):
    data = valid(prompts)
    data["configs"].append({"url": "http://127.0.0.1:9000"})
    (line,) = problems(tmp_path, data)
    assert line.endswith("configs[2].name: required key missing")


@pytest.mark.parametrize("url, expect", [
    ("localhost:8000", "not an http(s) URL: 'localhost:8000'"),
    ("ftp://host/x", "not an http(s) URL"),
    ("http://", "not an http(s) URL"),
    ("http://host:99999", "bad port in URL 'http://host:99999'"),
    ("http://host:abc", "bad port in URL"),
])
def test_bad_url(tmp_path, prompts, url, expect):
    data = valid(prompts)
    data["configs"][0]["url"] = url
    (line,) = problems(tmp_path, data)
    assert "configs[0].url: " + expect in line


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_bad_port(tmp_path, prompts, port):
    data = valid(prompts)
    data["configs"][1]["port"] = port
    (line,) = problems(tmp_path, data)
    assert f"configs[1].port: expected 1-65535, got {port}" in line


def test_duplicate_config_names(tmp_path, prompts):
    data = valid(prompts)
    data["configs"][1]["name"] = "baseline"
    (line,) = problems(tmp_path, data)
    assert "configs: name 'baseline' used more than once" in line


def test_k_without_method(tmp_path, prompts):
    data = valid(prompts)
    del data["configs"][1]["method"]
    (line,) = problems(tmp_path, data)
    assert "configs[1].method: required when num_speculative_tokens is given" in line


def test_k_must_be_positive(tmp_path, prompts):
    data = valid(prompts)
    data["configs"][1]["num_speculative_tokens"] = 0
    (line,) = problems(tmp_path, data)
    assert "configs[1].num_speculative_tokens: expected a positive integer, got 0" in line


def test_config_datasets_restricts_a_config_to_named_data_sets(tmp_path, prompts):
    data = valid(prompts)
    data["configs"][1]["datasets"] = ["builtin"]
    base, spec = read_suite(write(tmp_path, data)).configs
    assert spec.datasets == ("builtin",) and spec.runs_on("builtin") and not spec.runs_on("p")
    assert base.datasets is None and base.runs_on("p")  # no datasets: key = every data set


@pytest.mark.parametrize("value, expect", [
    (["nope"], "configs[1].datasets: no data set 'nope' in this suite (data sets: p, builtin)"),
    ([], "configs[1].datasets: expected a non-empty list of data set names, got []"),
    (["p", 3], "configs[1].datasets: expected a non-empty list of data set names, got ['p', 3]"),
    (["p", "p"], "configs[1].datasets: data set 'p' named more than once"),
    ("p", "configs[1].datasets: expected a list"),
])
def test_config_datasets_must_name_suite_data_sets(tmp_path, prompts, value, expect):
    data = valid(prompts)
    data["configs"][1]["datasets"] = value
    (line,) = problems(tmp_path, data)
    assert expect in line


def test_missing_dataset_file(tmp_path, prompts):
    data = valid(prompts)
    data["datasets"][0]["path"] = "nope.jsonl"
    (line,) = problems(tmp_path, data)
    assert "datasets[0].path: file not found" in line and str(tmp_path / "nope.jsonl") in line


def test_bad_load_values(tmp_path, prompts):
    data = valid(prompts)
    data["load"].update(concurrency=[1, 0], max_tokens=0, warmup=-1, temperature=-0.5, timeout_s=0)
    lines = problems(tmp_path, data)
    assert len(lines) == 5
    assert any("load.concurrency: expected a positive integer or a list of them, got [1, 0]" in l for l in lines)
    assert any("load.max_tokens: expected a positive integer, got 0" in l for l in lines)
    assert any("load.warmup: expected 0-100000 requests" in l and l.endswith("got -1") for l in lines)
    assert any("load.temperature: expected 0 or more" in l for l in lines)
    assert any("load.timeout_s: expected a positive number" in l for l in lines)


def test_bad_endpoint(tmp_path, prompts):
    data = valid(prompts)
    data["endpoint"] = "responses"
    (line,) = problems(tmp_path, data)
    assert ".endpoint: expected one of chat, completions, got 'responses'" in line


def test_bad_yaml_names_line(tmp_path):
    text = "name: t\nmodel: smol\nconfigs:\n  - name: a\n    url: [http://x\ndatasets: [builtin]\n"
    lines = problems(tmp_path, text)
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 'suite.yaml'}:6: not valid YAML")


def test_bad_yaml_indentation_line(tmp_path):
    (line,) = problems(tmp_path, "name: t\nmodel: smol\n  configs: 1\n")
    assert line.startswith(f"{tmp_path / 'suite.yaml'}:3: not valid YAML")


def test_not_a_mapping(tmp_path):
    (line,) = problems(tmp_path, "- a\n- b\n")
    assert "expected a mapping, got list" in line
    (line,) = problems(tmp_path, "")
    assert "expected a mapping, got NoneType" in line


def test_missing_suite_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(SuiteError, match="suite file not found") as info:
        read_suite(path)
    assert str(info.value) == f"{path}: suite file not found"


def test_many_problems_reported_together(tmp_path, prompts):
    data = valid(prompts)
    data["bogus"] = 1
    data["configs"][0]["colour"] = "red"
    data["configs"][1]["port"] = 70000
    data["configs"].append({"name": "dspark_k3", "url": "ftp://x"})
    data["datasets"][0]["path"] = "missing.jsonl"
    data["load"]["foo"] = 1
    lines = problems(tmp_path, data)
    expected = [".bogus: unknown key", "configs[0].colour: unknown key", "configs[1].port: expected 1-65535",
                "configs[2].url: not an http(s) URL", "configs: name 'dspark_k3' used more than once",
                "datasets[0].path: file not found", "load.foo: unknown key"]
    assert len(lines) == len(expected)
    for fragment in expected:
        assert sum(fragment in l for l in lines) == 1, fragment


def test_parse_suite_direct(prompts):
    with pytest.raises(SuiteError) as info:
        parse_suite({"name": "t"}, Path("x.yaml"))
    assert str(info.value).splitlines() == ["x.yaml.model: required key missing", "x.yaml.configs: required key missing",
                                            "x.yaml.datasets: required key missing"]


# ---------------------------------------------------------------- baseline and comparability


def test_baseline_by_name_or_flag(tmp_path, prompts):
    data = valid(prompts)
    assert read_suite(write(tmp_path, data)).baseline.name == "baseline"
    data["configs"][0]["name"] = "plain"
    assert read_suite(write(tmp_path, data)).baseline is None
    data["configs"][0]["baseline"] = True
    assert read_suite(write(tmp_path, data)).baseline.name == "plain"
    # an explicit flag wins over the name
    data["configs"].append({"name": "baseline", "url": "http://127.0.0.1:9"})
    assert read_suite(write(tmp_path, data)).baseline.name == "plain"


def test_comparability_changes_with_max_tokens(tmp_path, prompts):
    data = valid(prompts)
    first = read_suite(write(tmp_path, data)).comparability().to_dict()
    assert read_suite(write(tmp_path, data)).comparability().to_dict() == first  # deterministic
    data["load"]["max_tokens"] = 65
    second = read_suite(write(tmp_path, data)).comparability().to_dict()
    assert second["max_tokens"] == 65 and first["max_tokens"] == 64
    assert {k for k in first if first[k] != second[k]} == {"max_tokens"}


def test_comparability_fingerprints_configs_and_datasets(tmp_path, prompts):
    data = valid(prompts)
    first = read_suite(write(tmp_path, data)).comparability().to_dict()
    assert set(first["configs"]) == {"baseline", "dspark_k3"} and set(first["datasets"]) == {"p", "builtin"}
    data["configs"][1]["num_speculative_tokens"] = 7
    data["datasets"][0]["requests"] = 1
    second = read_suite(write(tmp_path, data)).comparability().to_dict()
    assert first["configs"]["baseline"] == second["configs"]["baseline"]
    assert first["configs"]["dspark_k3"] != second["configs"]["dspark_k3"]
    assert first["datasets"]["p"] != second["datasets"]["p"]
    assert first["datasets"]["builtin"] == second["datasets"]["builtin"]
    # load shape is not part of it (more load points may be added on resume)
    data["load"]["concurrency"] = [1, 4, 16]
    assert read_suite(write(tmp_path, data)).comparability().to_dict() == second


@pytest.mark.parametrize("change", ["extra_body", "model_path", "engine"])
def test_comparability_covers_request_body_weights_and_engine(tmp_path, prompts, change):
    data = valid(prompts)
    first = read_suite(write(tmp_path, data)).comparability()
    if change == "extra_body":
        data["load"]["extra_body"] = {"top_k": 1}
    elif change == "model_path":
        data["server"]["model_path"] = "/models/other-weights"
    else:
        data["engine"] = "sglang"
    assert read_suite(write(tmp_path, data)).comparability() != first


def test_load_format_dummy_suite_wide_and_per_config(tmp_path, prompts):
    """server.load_format applies to every launched config; a config's own key wins; a config at a url
    is not launched, so only its own key (how that server was started) says it."""
    data = valid(prompts)
    real = read_suite(write(tmp_path, data))
    assert [c.load_format for c in real.configs] == ["auto", "auto"] and real.dummy_configs == []
    assert "load_format" not in real.comparability().to_dict()  # runs from before the key stay comparable
    data["server"]["load_format"] = "dummy"
    data["configs"].append({"name": "real", "load_format": "auto"})
    suite = read_suite(write(tmp_path, data))
    assert [(c.name, c.load_format) for c in suite.configs] == [("baseline", "auto"), ("dspark_k3", "dummy"), ("real", "auto")]
    assert suite.server.load_format == "dummy" and suite.dummy_configs == ["dspark_k3"]
    assert suite.comparability().load_format == "dummy"
    data["configs"][0]["load_format"] = "dummy"
    assert read_suite(write(tmp_path, data)).dummy_configs == ["baseline", "dspark_k3"]


@pytest.mark.parametrize("where", ["server", "config"])
def test_unknown_load_format_is_one_line_naming_file_and_key(tmp_path, prompts, where):
    data = valid(prompts)
    if where == "server":
        data["server"]["load_format"] = "safetensors"
        key = "server.load_format"
    else:
        data["configs"][1]["load_format"] = "random"
        key = "configs[1].load_format"
    lines = problems(tmp_path, data)
    assert len(lines) == 1 and key in lines[0] and "expected one of auto, dummy" in lines[0]


def test_dummy_and_real_runs_are_not_comparable(tmp_path, prompts):
    data = valid(prompts)
    real = read_suite(write(tmp_path, data)).comparability()
    data["server"]["load_format"] = "dummy"
    dummy = read_suite(write(tmp_path, data)).comparability()
    assert comparability_problems(RunMeta(comparability=dummy), RunMeta(comparability=real)) == [
        "comparability differs in load_format ('dummy' vs missing)"]


def test_steplog_suite_wide_and_per_config(tmp_path, prompts):
    """server.steplog applies to every launched config, a config's own key wins; a config at a url is off."""
    data = valid(prompts)
    assert [c.steplog for c in read_suite(write(tmp_path, data)).configs] == ["off", "off"]
    data["server"]["steplog"] = "timing"
    data["configs"].append({"name": "quiet", "steplog": "off"})
    data["configs"].append({"name": "steps", "steplog": "steps"})
    suite = read_suite(write(tmp_path, data))
    assert [(c.name, c.steplog) for c in suite.configs] == [("baseline", "off"), ("dspark_k3", "timing"),
                                                           ("quiet", "off"), ("steps", "steps")]


@pytest.mark.parametrize("where", ["server", "config", "url"])
def test_bad_steplog_is_one_line_naming_file_and_key(tmp_path, prompts, where):
    data = valid(prompts)
    if where == "server":
        data["server"]["steplog"] = "token"
        key, why = "server.steplog", "expected one of off, steps, timing, tokens"
    elif where == "config":
        data["configs"][1]["steplog"] = "on"
        key, why = "configs[1].steplog", "expected one of off, steps, timing, tokens"
    else:
        data["configs"][0]["steplog"] = "steps"
        key, why = "configs[0].steplog", "only a server specbench launches"
    lines = problems(tmp_path, data)
    assert len(lines) == 1 and key in lines[0] and why in lines[0] and "suite.yaml" in lines[0]


def test_workload_per_stream_sends_a_set_number_of_waves(tmp_path, prompts):
    """``{per_stream: K, at_least: M}``: K × C prompts per load point, at least M, never more than the set has."""
    data = valid(prompts)
    data["load"]["workload"] = {"per_stream": 2, "at_least": 4}
    load = read_suite(write(tmp_path, data)).load
    assert [load.prompts_at(c, 100) for c in (1, 16, 64)] == [4, 32, 100]
    assert LoadSpec().prompts_at(64, 100) == 100 and LoadSpec(workload="profilings").prompts_at(64, 300) == 220


@pytest.mark.parametrize("workload, expect", [
    ({"per_stream": 0}, "load.workload.per_stream: expected an integer 1-10000, got 0"),
    ({"at_least": 2}, "load.workload.per_stream: required"),
    ({"per_stream": 1, "waves": 2}, "load.workload.waves: unknown key (expected per_stream, at_least)"),
    ({"per_stream": True}, "load.workload.per_stream: expected an integer"),
    ("waves", "load.workload: expected one of fixed, profilings or {per_stream: K, at_least: M}, got 'waves'"),
])
def test_bad_workload_is_one_line_naming_the_key(tmp_path, prompts, workload, expect):
    data = valid(prompts)
    data["load"]["workload"] = workload
    with pytest.raises(SuiteError, match=re.escape("suite.yaml: " + expect)):
        read_suite(write(tmp_path, data))


def test_prefix_cache_keep_by_default_reset_when_asked_and_in_comparability_only_then(tmp_path, prompts):
    data = valid(prompts)
    kept = read_suite(write(tmp_path, data))
    assert kept.load.prefix_cache == "keep"
    assert "prefix_cache" not in kept.comparability().to_dict()  # runs from before the key kept the cache too
    data["load"]["prefix_cache"] = "keep"
    assert read_suite(write(tmp_path, data)).comparability() == kept.comparability()
    data["load"]["prefix_cache"] = "reset"
    reset = read_suite(write(tmp_path, data))
    assert reset.load.prefix_cache == "reset" and reset.comparability().prefix_cache == "reset"
    assert comparability_problems(RunMeta(comparability=reset.comparability()), RunMeta(comparability=kept.comparability())) == [
        "comparability differs in prefix_cache ('reset' vs missing)"]


@pytest.mark.parametrize("value, expect", [("flush", "got 'flush'"), (True, "expected a string, got True"),
                                           ("Reset", "got 'Reset'")])
def test_bad_prefix_cache_is_one_line_naming_the_key(tmp_path, prompts, value, expect):
    data = valid(prompts)
    data["load"]["prefix_cache"] = value
    lines = problems(tmp_path, data)
    assert len(lines) == 1 and "load.prefix_cache" in lines[0] and expect in lines[0], lines
    if isinstance(value, str):
        assert "expected one of keep, reset" in lines[0]
