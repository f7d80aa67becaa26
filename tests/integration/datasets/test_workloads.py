"""The built sets and ShareGPT end to end on the vLLM-shaped fake engine (tests/support/fake_engine.py):
a suite with shared_prefix, long_context, a system_tokens set and multi-turn ShareGPT runs, every prompt
is sent in the set's order, meta.json holds the hash of what was loaded, and with the real o200k_base
file each long prompt is recorded at exactly its length; without the file it stops before any server."""

import asyncio
import json

import pytest
import yaml

from specbench.cli import main
from specbench.datasets import DatasetSpec, load_prompts
from specbench.run.prompt_prints import prompts_sha256
from tests.support.paths import DATA, SHARED

SOURCES = DATA / "prompt_sources"
O200K_FILE = SHARED / "tiktoken" / "o200k_base.tiktoken"
DATASETS = [
    {"name": "sp", "source": "shared_prefix", "groups": 2, "per_group": 2, "prefix_tokens": 64, "tokenizer": "chars"},
    {"name": "lc", "source": "long_context", "input_tokens": 200, "requests": 2, "tokenizer": "chars"},
    {"name": "chat", "source": "sharegpt", "turns": "all", "lengths": "none", "requests": 3},
    {"name": "gsm", "source": "gsm8k", "requests": 2, "system_tokens": 64, "tokenizer": "chars"},
]


def suite_file(tmp_path, datasets, **load):
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump({
        "name": "workloads", "model": "smol", "engine": "fake", "data_dir": str(SOURCES),
        "configs": [{"name": "baseline"}, {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3}],
        "datasets": datasets, "load": {"concurrency": [1], "max_tokens": 8, "warmup": 0, **load},
        "server": {"startup_timeout_s": 600}}))  # the timeout: a guard
    return path


def records(out):
    return [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]


async def test_built_sets_and_sharegpt_run_against_the_fake_engine(tmp_path, fake_engine):
    out = tmp_path / "out"
    code = await asyncio.to_thread(main, ["run", str(suite_file(tmp_path, DATASETS)), "-o", str(out), "-q"])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    assert sorted((r["run"], r["dataset"]) for r in rows) == sorted(
        (c, d["name"]) for c in ("baseline", "ngram_k3") for d in DATASETS)
    sent = [(r["config"], r["dataset"], r["prompt_id"], r["turn"]) for r in records(out) if r["phase"] == "measure"]
    base = [(d, p, t) for c, d, p, t in sent if c == "baseline"]
    assert [p for d, p, t in base if d == "sp"] == ["g0-0", "g1-0", "g0-1", "g1-1"]  # each group's first, then the rest
    assert [p for d, p, t in base if d == "lc"] == ["0", "1"]
    assert [(p, t) for d, p, t in base if d == "chat"] == [("tk3Ab9Q_0", 0), ("tk3Ab9Q_0", 1), ("Pz81LmC_0", 0),
                                                           ("Hn5Ys2K_0", 0)]  # the model's own answer fed back
    assert all(r["error"] is None for r in records(out))
    meta = json.loads((out / "meta.json").read_text())
    for d in DATASETS:
        loaded = load_prompts(DatasetSpec.from_mapping(d, "x", tmp_path), SOURCES)
        assert meta["prompts"][d["name"]]["sha256"] == prompts_sha256(loaded)


@pytest.mark.skipif(not O200K_FILE.is_file(), reason=f"no o200k_base.tiktoken at {O200K_FILE}")
async def test_long_prompts_are_recorded_at_exactly_their_o200k_length(tmp_path, fake_engine):
    out = tmp_path / "out"
    datasets = [{"name": "lc", "source": "long_context", "input_tokens": 256, "requests": 3},
                {"name": "sp", "source": "shared_prefix", "groups": 2, "per_group": 2, "prefix_tokens": 128}]
    suite = suite_file(tmp_path, datasets, tiktoken_file=str(O200K_FILE))
    assert await asyncio.to_thread(main, ["run", str(suite), "-o", str(out), "-q"]) == 0
    lengths = {(r["dataset"], r["prompt_id"]): r["prompt_tokens_o200k"] for r in records(out) if r["config"] == "baseline"}
    assert [n for (d, _), n in lengths.items() if d == "lc"] == [256, 256, 256]
    assert all(n > 128 for (d, _), n in lengths.items() if d == "sp")


async def test_o200k_asked_for_without_the_file_stops_before_any_server(tmp_path, fake_engine, capsys):
    datasets = [{"name": "lc", "source": "long_context", "input_tokens": 256, "requests": 3}]
    code = await asyncio.to_thread(main, ["run", str(suite_file(tmp_path, datasets)), "-o", str(tmp_path / "out"), "-q"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("specbench: data set 'lc': tokenizer: o200k counts o200k_base tokens, but o200k_base.tiktoken "
                              "not cached")
    assert not (tmp_path / "out" / "requests.jsonl").exists()
