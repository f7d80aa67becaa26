"""Lengths in o200k_base tokens (specbench/measure/o200k.py): counted through real tiktoken from a local
file only, found where tiktoken itself caches it, never fetched, and missing with its reason otherwise."""

import hashlib
import tempfile

import pytest
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

from specbench.measure import o200k as mo
from specbench.measure.summarize import add_o200k, summarize_cell
from specbench.run import o200k_file as of
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import Prompt, RequestRecord
from specbench.schemas.row_group import written
from tests.support.o200k import write_encoding


def test_counts_run_through_real_tiktoken_with_o200k_bases_pattern(o200k_file, no_network):
    enc = of.find_o200k(str(o200k_file))
    assert enc.error is None and enc.path == str(o200k_file)
    assert enc.encoding.name == "o200k_base"
    assert enc.count(["the cat", "the dog", "", "<|endoftext|>"]) == [2, 5, 0, 13]  # special-token text is text
    settings = mo.offline(openai_public.o200k_base, load_tiktoken_bpe=lambda blobpath, expected_hash=None: {})()
    assert enc.encoding._pat_str == settings["pat_str"] and enc.encoding._special_tokens == settings["special_tokens"]


def test_the_file_named_is_tiktokens_own_o200k_base():
    captured = {}

    def capture(blobpath, expected_hash=None):
        captured.update(url=blobpath, sha256=expected_hash)
        return {b"a": 0}

    mo.offline(openai_public.o200k_base, load_tiktoken_bpe=capture)()
    assert captured == {"url": mo.O200K_URL, "sha256": of.O200K_SHA256}


@pytest.mark.parametrize("env_name", ["TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", None])
def test_the_cache_file_is_where_tiktoken_itself_reads_it(tmp_path, monkeypatch, no_network, env_name):
    """tiktoken's own read_file_cached finds what cache_file names (a wrong name would make it fetch)."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    if env_name:
        monkeypatch.setenv(env_name, str(tmp_path))
        folder = tmp_path
    else:
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        folder = tmp_path / "data-gym-cache"
    import os

    path = of.cache_file(os.environ)
    assert path.parent == folder and path.name == hashlib.sha1(mo.O200K_URL.encode()).hexdigest()
    folder.mkdir(exist_ok=True)
    path.write_bytes(b"cached bytes")
    assert tiktoken.load.read_file_cached(mo.O200K_URL) == b"cached bytes"


def test_found_in_a_fake_cache_dir(tmp_path, monkeypatch, no_network):
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path)}
    monkeypatch.setattr(of, "O200K_SHA256", write_encoding(of.cache_file(env)))
    found = of.find_o200k(None, env)
    assert found.error is None and found.count(["the cat"]) == [2] and found.path == str(of.cache_file(env))
    monkeypatch.setattr(of, "O200K_SHA256", "0" * 64)  # given by SPECBENCH_TIKTOKEN_FILE: that file wins, and is checked
    other = of.find_o200k(None, {**env, of.ENV: str(of.cache_file(env))})
    assert other.encoding is None and other.error.startswith(f"{of.ENV} {of.cache_file(env)}: not o200k_base.tiktoken")


def test_without_the_file_nothing_is_fetched_and_the_row_says_why(tmp_path, no_network):
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "empty")}
    missing = of.find_o200k(None, env)
    assert missing.encoding is None and missing.count(["x"]) is None
    assert missing.error == (f"o200k_base.tiktoken not cached ({of.cache_file(env)}) and no load.tiktoken_file or "
                             f"{of.ENV}: not downloaded mid-run")
    assert "tiktoken's cache is off" in of.find_o200k(None, {"TIKTOKEN_CACHE_DIR": ""}).error
    summary = written(mo.o200k_summary([_rec("p", "abc", 3)], [([_rec("p", "abc", 3)], 1.0)], missing))
    assert summary["o200k_error"] == missing.error
    assert {k: v for k, v in summary.items() if k != "o200k_error"} == dict.fromkeys(
        ["output_tokens_o200k", "output_throughput_o200k_tps", "o200k_per_output_token",
         "prompt_tokens_o200k_mean", "prompt_tokens_o200k_p50", "prompt_tokens_o200k_max"])


def test_a_file_that_is_not_o200k_is_refused_with_its_path(tmp_path):
    path = tmp_path / "other.tiktoken"
    write_encoding(path)
    found = of.find_o200k(str(path))
    assert found.encoding is None and found.error.startswith(f"load.tiktoken_file {path}: not o200k_base.tiktoken (sha256 ")
    assert of.find_o200k(str(tmp_path / "nope")).error == f"load.tiktoken_file {tmp_path / 'nope'}: No such file or directory"


def _reads_elsewhere(blobpath):
    return helper(blobpath)


def helper(blobpath):
    return blobpath


def test_tiktoken_code_that_could_reach_the_file_another_way_is_not_run():
    with pytest.raises(RuntimeError, match="it calls helper"):
        mo.offline(_reads_elsewhere, load_tiktoken_bpe=lambda *a: {})


def _rec(prompt_id, text, tokens, *, turn=0, repeat=0, prompt_o200k=None, error=None):
    return RequestRecord(prompt_id=prompt_id, dataset="d", config="c", turn=turn, repeat=repeat, text=text,
                         output_tokens=tokens, chunk_times=[1.0], send_time=0.5, error=error,
                         prompt_tokens_o200k=prompt_o200k, concurrency=1)


def test_summary_numbers(o200k_file):
    enc = of.find_o200k(str(o200k_file))
    r0 = [_rec("a", "the cat", 4, prompt_o200k=10), _rec("b", "the dog", 6, prompt_o200k=20),
          _rec("c", "the", 1, error="HTTP 500")]
    r1 = [_rec("a", "the", 2, repeat=1, prompt_o200k=10), _rec("b", "the cat", 2, repeat=1, prompt_o200k=30)]
    out = written(mo.o200k_summary(r0 + r1, [(r0, 2.0), (r1, 1.0)], enc))
    assert out["output_tokens_o200k"] == 2 + 5 + 1 + 2  # the failed request adds nothing
    assert out["output_throughput_o200k_tps"] == pytest.approx(((2 + 5) / 2.0 + (1 + 2) / 1.0) / 2)
    assert out["o200k_per_output_token"] == pytest.approx(10 / 14)
    assert (out["prompt_tokens_o200k_mean"], out["prompt_tokens_o200k_p50"], out["prompt_tokens_o200k_max"]) == (17.5, 15.0, 30)
    assert "o200k_error" not in out
    assert mo.o200k_summary([_rec("a", "x", 1)], [([_rec("a", "x", 1)], 1.0)], enc).o200k_error.startswith(
        "prompt lengths: the requests carry none")


def test_prompt_lengths_count_every_message_a_turn_sent(o200k_file):
    enc = of.find_o200k(str(o200k_file))
    prompt = Prompt(id="mt", dataset="d", turns=("the cat", "the"), system="the")
    first, second = _rec("mt", "the dog", 5), _rec("mt", "x", 1, turn=1)
    other_repeat = _rec("mt", "the", 1, turn=1, repeat=1)  # its first turn is not in this pass: no count
    mo.prompt_lengths(enc, [prompt], [first, second, other_repeat])
    assert first.prompt_tokens_o200k == 1 + 2  # system + turn 0
    assert second.prompt_tokens_o200k == 1 + 2 + 5 + 1  # + the first answer + turn 1
    assert other_repeat.prompt_tokens_o200k is None
    mo.prompt_lengths(mo.O200k(error="no file"), [prompt], [r := _rec("mt", "a", 1)])
    assert r.prompt_tokens_o200k is None


def test_rows_get_the_keys_last_and_only_from_add_o200k(o200k_file):
    """summarize_cell writes none of them (so every row written before serialises as it did); add_o200k
    appends them after every other key."""
    records = [_rec("a", "the cat", 4, prompt_o200k=3)]
    phase = PhaseInfo(config="c", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=2.0)
    row = summarize_cell([phase], records, method="baseline", k=None)
    before = list(row.to_dict())
    assert not any("o200k" in k for k in before)
    add_o200k([row], [phase], records, of.find_o200k(str(o200k_file)))
    keys = list(row.to_dict())
    assert keys[: len(before)] == before and keys[len(before):] == [
        "output_tokens_o200k", "output_throughput_o200k_tps", "o200k_per_output_token",
        "prompt_tokens_o200k_mean", "prompt_tokens_o200k_p50", "prompt_tokens_o200k_max"]
    assert row.output_throughput_o200k_tps == 1.0
