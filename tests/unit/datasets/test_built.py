"""The sets built to a length (specbench/datasets/generate.py): shared_prefix, long_context and the
system_tokens system prompt. Pinned bytes (sha256) and exact o200k lengths on the shipped sets with the
real o200k_base file (skipped without them); the rules and every bad input on the schema fixtures in
tests/data/prompt_sources with ``tokenizer: chars``, which need neither."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from specbench.datasets import DatasetSpec, check_available, load_prompts
from specbench.datasets.generate import CLOSER, CONTEXT_HEAD, JOIN, SYSTEM_HEAD
from specbench.errors import DatasetError, SuiteError
from specbench.run.o200k_file import find_o200k
from specbench.schemas.request import Prompt
from specbench.suite import read_suite
from tests.support.paths import DATA, SHARED

SOURCES = DATA / "prompt_sources"
SHIPPED = SHARED / "datasets"
O200K_FILE = SHARED / "tiktoken" / "o200k_base.tiktoken"
needs_shipped = pytest.mark.skipif(not (SHIPPED / "spec_bench.jsonl").is_file() or not O200K_FILE.is_file(),
                                   reason=f"no shipped sets or o200k_base.tiktoken under {SHARED}")
WHERE = "suites/x.yaml: datasets[0]"


@pytest.fixture(autouse=True)
def no_data_dir(monkeypatch):
    monkeypatch.delenv("SPECBENCH_DATA_DIR", raising=False)


def spec(entry: dict) -> DatasetSpec:
    return DatasetSpec.from_mapping(entry, WHERE, SOURCES)


def chars(entry: dict, data_dir: Path = SOURCES) -> list[Prompt]:
    return load_prompts(spec({"tokenizer": "chars", **entry}), data_dir)


def shipped(entry: dict) -> list[Prompt]:
    return load_prompts(spec(entry), SHIPPED, find_o200k(str(O200K_FILE)))


def sha256(prompts: list[Prompt]) -> str:
    sent = [[p.id, list(p.turns), p.system, p.group, p.group_first] for p in prompts]
    return hashlib.sha256(json.dumps(sent, ensure_ascii=False).encode()).hexdigest()


def count(text: str) -> int:
    encoding = find_o200k(str(O200K_FILE)).encoding
    assert encoding is not None
    return len(encoding.encode_ordinary(text))


def prefix_of(p: Prompt) -> str:
    return p.turns[0][: p.turns[0].index(CLOSER) + len(CLOSER)]


# ---------------------------------------------------------------- pinned bytes, exact lengths


@needs_shipped
def test_shared_prefix_bytes_are_pinned_and_each_prefix_is_exactly_its_length():
    prompts = shipped({"name": "shared_prefix", "groups": 8, "per_group": 8, "prefix_tokens": 1024, "seed": 0})
    assert sha256(prompts) == "024074dafa55ad1003768a99fdd356fe397f401c0bbb179694dc6eff442e2715"
    assert len(prompts) == 64 and len({p.turns[0] for p in prompts}) == 64
    assert {count(prefix_of(p)) for p in prompts} == {1024}
    assert len({prefix_of(p) for p in prompts}) == 8  # one prefix a group, none shared across groups
    assert prompts[0].turns[0].startswith(CONTEXT_HEAD) and prompts[0].turns[0].endswith(BOXED_END)


BOXED_END = "put your final answer within \\boxed{}."  # the questions are GSM8K's, its default recipe


@needs_shipped
@pytest.mark.parametrize("length", [1024, 4096, 16384, 32768])
def test_long_context_prompts_count_exactly_their_length(length):
    prompts = shipped({"name": "long_context", "input_tokens": length, "requests": 16, "seed": 0})
    assert [count(p.turns[0]) for p in prompts] == [length] * 16
    assert len({p.turns[0][:200] for p in prompts}) == 16  # each starts with its own document


@needs_shipped
def test_long_context_and_system_tokens_bytes_are_pinned():
    long = shipped({"name": "long_context", "input_tokens": 4096, "requests": 16, "seed": 0})
    assert sha256(long) == "9523db7a5d2a5d722e3ef8f247145d321fab089a2f8ae227716c7b4ed4b69bf8"
    math = shipped({"name": "math500", "system_tokens": 2048, "requests": 20})
    assert sha256(math) == "dede62ca3ec646fa4c1facbf121118ee31844474ef031112448d3430f6d96b4d"
    assert {p.system for p in math} == {math[0].system} and count(math[0].system or "") == 2048
    assert (math[0].system or "").startswith(SYSTEM_HEAD) and math[0].turns == shipped({"name": "math500", "requests": 1})[0].turns
    chat = shipped({"name": "mt_bench", "system_tokens": 1000, "seed": 3, "text_from": "problems"})
    assert count(chat[0].system or "") == 1000 and len(chat[0].turns) == 2


# ---------------------------------------------------------------- the rules, on the fixtures


def test_shared_prefix_groups_orders_and_first_members():
    entry = {"name": "shared_prefix", "groups": 3, "per_group": 2, "prefix_tokens": 64}
    interleaved = chars(entry)
    assert [p.id for p in interleaved] == ["g0-0", "g1-0", "g2-0", "g0-1", "g1-1", "g2-1"]
    assert [(p.group, p.group_first) for p in interleaved[:4]] == [("g0", True), ("g1", True), ("g2", True), ("g0", False)]
    grouped = chars({**entry, "order": "grouped"})
    assert [p.id for p in grouped] == ["g0-0", "g0-1", "g1-0", "g1-1", "g2-0", "g2-1"]
    assert {p.id: p.turns for p in grouped} == {p.id: p.turns for p in interleaved}  # the same prompts, reordered
    shuffled = chars({**entry, "order": "shuffle"})
    assert sorted(p.turns for p in shuffled) == sorted(p.turns for p in grouped)
    assert [p.group_first for p in shuffled] == [p.group not in {q.group for q in shuffled[:i]} for i, p in enumerate(shuffled)]
    for p in interleaved:
        prefix = prefix_of(p)
        assert len(prefix) == 64 * 4 and prefix.startswith(CONTEXT_HEAD)  # 4 characters a token, the closer's 28 included
        assert p.turns[0][len(prefix):].startswith(JOIN) and p.dataset == "shared_prefix"
    assert len({prefix_of(p) for p in interleaved}) == 3 and len({p.turns[0] for p in interleaved}) == 6


def test_shared_prefix_is_the_same_every_time_and_moves_with_the_seed():
    entry = {"name": "shared_prefix", "groups": 2, "per_group": 3, "prefix_tokens": 80, "order": "shuffle"}
    assert chars(entry) == chars(entry)
    assert sha256(chars(entry)) != sha256(chars({**entry, "seed": 1}))
    assert sha256(chars(entry)) == "dcc98deca72868c2e611d816b503b62bcc50bc3d379f928a417f4cb123981be7"


def test_long_context_and_text_sources_on_the_fixtures():
    prompts = chars({"name": "long_context", "input_tokens": 300, "requests": 4, "text_from": "problems",
                     "questions": "math500"})
    assert [p.id for p in prompts] == ["0", "1", "2", "3"] and all(p.group is None for p in prompts)
    assert {-(-len(p.turns[0]) // 4) for p in prompts} == {300}
    convs = chars({"name": "long_context", "input_tokens": 200, "requests": 2, "text_from": "sharegpt"})
    assert "User: " in convs[0].turns[0] and "Assistant: " in convs[0].turns[0]
    assert sha256(prompts) == "690512a5d4512afc317e7e2035ef41d7214fcf4aab333840bfe04d09da061963"


def test_a_built_set_checks_the_sets_it_reads_before_any_server(tmp_path):
    shutil.copy(SOURCES / "spec_bench.jsonl", tmp_path)
    check_available(spec({"name": "shared_prefix"}), SOURCES)
    with pytest.raises(DatasetError, match="^data set 'gsm8k' is not available: no gsm8k.jsonl or gsm8k.parquet in data dir"):
        check_available(spec({"name": "shared_prefix"}), tmp_path)
    with pytest.raises(DatasetError, match="^data set 'sharegpt' is not available: .* or run `specbench setup sharegpt`"):
        check_available(spec({"name": "gsm8k", "system_tokens": 100, "text_from": "sharegpt"}), tmp_path)


# ---------------------------------------------------------------- bad inputs: one line naming the key


@pytest.mark.parametrize("entry, message", [
    ({"name": "shared_prefix", "prefix_tokens": 10}, "prefix_tokens: must be an integer from 64 to 1048576, got 10"),
    ({"name": "shared_prefix", "groups": 0}, "groups: must be an integer from 1 to 100000, got 0"),
    ({"name": "shared_prefix", "per_group": "8"}, "per_group: must be an integer from 1 to 100000, got '8'"),
    ({"name": "shared_prefix", "requests": 4}, "requests: unknown key for data set 'shared_prefix' (allowed: name, source, seed,"),
    ({"name": "shared_prefix", "order": "random"}, "order: must be one of interleaved, grouped, shuffle, got 'random'"),
    ({"name": "shared_prefix", "questions": "ultrachat"}, "questions: must be one of gsm8k, math500,"),
    ({"name": "long_context", "requests": 4}, "input_tokens: required for long_context"),
    ({"name": "long_context", "input_tokens": 4096}, "requests: required for long_context"),
    ({"name": "long_context", "input_tokens": 2_000_000, "requests": 1}, "input_tokens: must be an integer from 64 to 1048576"),
    ({"name": "gsm8k", "system": "Be brief.", "system_tokens": 100}, "system_tokens: give system (a text) or system_tokens"),
    ({"name": "gsm8k", "text_from": "problems"}, "text_from: only with system_tokens"),
    ({"name": "gsm8k", "tokenizer": "chars"}, "tokenizer: only where tokens are counted"),
    ({"name": "math500", "system_tokens": 100, "text_from": "novels"}, "text_from: must be one of articles, problems, sharegpt"),
])
def test_bad_keys_are_one_line_naming_the_key(entry, message):
    with pytest.raises(SuiteError) as err:
        spec(entry)
    assert str(err.value).startswith(f"{WHERE}.{message}") and "\n" not in str(err.value)


@pytest.mark.parametrize("entry, message", [
    ({"name": "shared_prefix", "groups": 9}, "groups: groups = 9 needs 9 documents, there are 6"),
    ({"name": "shared_prefix", "groups": 3, "per_group": 6}, "groups: groups × per_group = 18 needs 18 questions (gsm8k), there are 16"),
    ({"name": "shared_prefix", "groups": 2, "prefix_tokens": 4000},
     "prefix_tokens: 4000 tokens (4 characters a token) is more text than text_from: articles holds"),
    ({"name": "long_context", "input_tokens": 64, "requests": 6, "questions": "spec_bench"},
     "input_tokens: 64 leaves no room for text before question"),
    ({"name": "long_context", "input_tokens": 100, "requests": 7}, "requests: requests = 7 needs 7 documents, there are 6"),
    ({"name": "gsm8k", "system_tokens": 5000}, "system_tokens: 5000 tokens (4 characters a token) is more text than"),
])
def test_what_the_data_cannot_give_is_one_line_naming_the_key(entry, message):
    with pytest.raises(DatasetError) as err:
        chars(entry)
    assert str(err.value).startswith(f"data set '{entry['name']}': {message}") and "\n" not in str(err.value)


def test_a_built_prompt_longer_than_a_launched_config_context_is_refused_at_parse_time(tmp_path):
    suite = {"name": "s", "model": "m", "load": {"max_tokens": 200},
             "server": {"args": ["--max-model-len", "4096"]},
             "configs": [{"name": "baseline"}, {"name": "big", "args": ["--max-model-len=65536"]},
                         {"name": "remote", "url": "http://127.0.0.1:9"}],
             "datasets": ["gsm8k", {"name": "sp", "source": "shared_prefix", "prefix_tokens": 4000},
                          {"name": "lc", "source": "long_context", "input_tokens": 32768, "requests": 2},
                          {"name": "m", "source": "math500", "system_tokens": 3000}]}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    with pytest.raises(SuiteError) as err:
        read_suite(path)
    assert str(err.value).splitlines() == [
        f"{path}: datasets[1].prefix_tokens: 4000 tokens + load.max_tokens 200 exceed config 'baseline''s context "
        "(--max-model-len 4096)",
        f"{path}: datasets[2].input_tokens: 32768 tokens + load.max_tokens 200 exceed config 'baseline''s context "
        "(--max-model-len 4096)",
    ]  # 'big' holds them all (its flag comes last); 'remote' is not launched: its server enforces its own
    suite["load"]["max_tokens"] = 96
    suite["datasets"] = suite["datasets"][:2] + suite["datasets"][3:]
    path.write_text(yaml.safe_dump(suite))
    assert [d.name for d in read_suite(path).datasets] == ["gsm8k", "sp", "m"]
