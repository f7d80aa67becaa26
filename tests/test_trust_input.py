"""Issue #14, untrusted input: hostile suite files, damaged results, secrets, standard JSON.

Each test reproduces one hostile input: a suite file that would hang, crash or escape the run
directory, results or meta files damaged in every way a user or a disk can damage them, and
credentials in URLs, flags and environment variables. The expected answer is always a one-line
exit 2 naming the file (and key), a rendered ``—``, or a value that never reaches a file.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import time
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.errors import SuiteError
from specbench.suite import load_suite

PASSWORD = "hunter2-s3cret"


def _strict(text: str):
    """A parser that refuses the NaN / Infinity tokens Python's json module lets through."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"prompt": "hello"}\n{"prompt": "world"}\n')
    return p


def suite_text(prompts: Path, *, config: str = "  - name: baseline\n    url: http://127.0.0.1:9\n",
               load: str = "  max_tokens: 8\n") -> str:
    return (f"name: t\nmodel: smol\nconfigs:\n{config}datasets:\n  - name: p\n    path: {prompts}\n"
            f"load:\n{load}")


# ================================================================================ 1. suite files


BOMB = """name: bomb
model: smol
configs: [{name: baseline, url: "http://127.0.0.1:9"}]
datasets: [builtin]
load:
  extra_body:
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_alias_bomb_is_refused_at_once(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 800
    t0 = time.monotonic()
    rc, _, err = cli(capsys, "run", path, "-o", tmp_path / "out")
    assert time.monotonic() - t0 < 5
    assert rc == 2
    one_line_error(err, str(path), "load.extra_body", "alias")
    assert not (tmp_path / "out").exists()


def test_recursive_alias_is_refused(tmp_path, prompts, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, load="  max_tokens: 8\n  extra_body: &x {self: *x}\n"))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), "alias")


def test_small_anchor_reuse_still_works(tmp_path, prompts):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=(
        "  - &launch {name: baseline, args: [--max-model-len, '2048']}\n"
        "  - {<<: *launch, name: ngram, method: ngram, num_speculative_tokens: 3}\n")))
    suite = load_suite(path)
    assert [c.name for c in suite.configs] == ["baseline", "ngram"]
    assert suite.configs[1].args == ("--max-model-len", "2048")


@pytest.mark.parametrize("where,text,key", [
    ("load", "  max_tokens: 8\n  temperature: 0\n  max_tokens: 9999\n", "load.max_tokens"),
    ("top", None, "model"),
    ("nested", "  max_tokens: 8\n  extra_body:\n    top_k: 1\n    top_k: 50\n", "load.extra_body.top_k"),
])
def test_duplicate_keys_are_an_error_naming_key_file_and_line(tmp_path, prompts, capsys, where, text, key):
    path = tmp_path / "s.yaml"
    body = suite_text(prompts, load=text) if text else suite_text(prompts) + "model: other\n"
    path.write_text(body)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    line = str(info.value)
    second = [i for i, ln in enumerate(body.splitlines(), 1) if ln.strip().startswith(key.split(".")[-1] + ":")][-1]
    assert line.startswith(f"{path}:{second}:"), line  # the file and the line of the second occurrence
    assert key in line and "duplicate key" in line
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), key)


@pytest.mark.parametrize("content", [
    b"\xff\xfe\x00n\x00a\x00m\x00e\x00",  # UTF-16
    b"name: t\nmodel: \xe9t\xe9\n",  # Latin-1
    bytes(range(256)) * 4,  # binary
    b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00",  # an executable
    b"name: t\x00\nmodel: smol\n",  # NUL in otherwise valid UTF-8
])
def test_non_utf8_or_binary_suite_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "s.yaml"
    path.write_bytes(content)
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path))


def test_deep_nesting_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("name: " + "[" * 20000 + "]" * 20000 + "\n")
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path))


@pytest.mark.parametrize("url", ["http://[::1", "http://[not-ipv6]:80", "http://user:x@[::1"])
def test_malformed_url_is_one_line(tmp_path, prompts, capsys, url):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: baseline\n    url: '{url}'\n"))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), "configs[0].url")
    assert "x@" not in err  # a password in a malformed URL is not echoed either


@pytest.mark.parametrize("line,key", [
    ("timeout_s: .nan", "load.timeout_s"), ("timeout_s: .inf", "load.timeout_s"),
    ("temperature: .nan", "load.temperature"), ("temperature: .inf", "load.temperature"),
    ("top_p: -.inf", "load.top_p"), ("request_rate: [1, .nan]", "load.request_rate[1]"),
    ("extra_body: {penalty: .nan}", "load.extra_body.penalty"),
])
def test_nan_and_inf_settings_are_one_line(tmp_path, prompts, capsys, line, key):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, load=f"  max_tokens: 8\n  {line}\n"))
    rc, _, err = cli(capsys, "run", path, "-o", tmp_path / "out")
    assert rc == 2
    one_line_error(err, str(path), key, "finite")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", ".hidden", "..", "x" * 65, "sp ace", "", "tab\tx",
                                  "nul\u0000x", "ünï"])
def test_config_names_that_are_not_plain_file_names_are_refused(tmp_path, prompts, capsys, name):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: {json.dumps(name)}\n    url: http://127.0.0.1:9\n"))
    rc, _, err = cli(capsys, "run", path, "-o", tmp_path / "out")
    assert rc == 2
    one_line_error(err, str(path), "configs[0].name")
    assert not (tmp_path / "out").exists()


def test_suite_name_that_escapes_the_results_dir_is_refused(tmp_path, prompts, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts).replace("name: t\n", "name: ../../escape\n", 1))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), ".name")


@pytest.mark.parametrize("name", ["baseline", "dspark_k3", "ngram-k7", "Qwen3.8B", "x" * 64, "_a"])
def test_plain_names_are_accepted(tmp_path, prompts, name):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: {name}\n    url: http://127.0.0.1:9\n"))
    assert load_suite(path).configs[0].name == name


def test_gate_suite_file_is_read_with_the_same_bounds(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    results = tmp_path / "results.json"
    results.write_text("[]")
    t0 = time.monotonic()
    rc, _, err = cli(capsys, "gate", results, "--suite", path)
    assert time.monotonic() - t0 < 5 and rc == 2
    assert "alias" in err and "Traceback" not in err
