"""Prompt-set loaders against the real local copies (exact text, counts, categories, ids),
plus schema fixtures for UltraChat / SPEED-Bench, suite-entry validation, one-line errors and
the prompt token counter."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from specbench.datasets import REGISTRY, DatasetSpec, check_available, load_prompts
from specbench.datasets.recipes import BOXED_SUFFIX
from specbench.datasets.rows import SPEED_PLACEHOLDER
from specbench.errors import DatasetError, SuiteError
from tests.support import tokens
from tests.support.paths import DATA, ROOT

SHARED = Path(os.environ.get("SPECBENCH_SHARED") or ROOT.parent / "shared" / "datasets")
FIXTURES = DATA
WHERE = "suites/x.yaml: datasets[0]"

needs_shared = pytest.mark.skipif(not (SHARED / "gsm8k.jsonl").is_file(), reason=f"no shared datasets at {SHARED}")


@pytest.fixture(autouse=True)
def offline_env(monkeypatch, tmp_path):
    """No test may reach the network or see a real HF cache or a user data dir."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    for key in ("SPECBENCH_DATA_DIR", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(key, raising=False)


def spec(entry, base_dir: Path = FIXTURES) -> DatasetSpec:
    return DatasetSpec.from_mapping(entry, WHERE, base_dir)


def load(entry, data_dir: Path | None = SHARED):
    return load_prompts(spec(entry), data_dir)


def shared_row(name: str, index: int = 0) -> dict:
    with open(SHARED / name, encoding="utf-8") as f:
        return json.loads(f.readlines()[index])


# ---------------------------------------------------------------- named sets on the real copies


@needs_shared
def test_gsm8k_all_rows_boxed_by_default():
    prompts = load("gsm8k")
    first = shared_row("gsm8k.jsonl")["question"]
    assert len(prompts) == 1319
    assert first.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert prompts[0].turns == (first + "\nPlease reason step by step, and put your final answer within \\boxed{}.",)
    assert (prompts[0].id, prompts[-1].id, prompts[0].dataset, prompts[0].category) == ("0", "1318", "gsm8k", None)
    assert load({"name": "gsm8k", "recipe": "plain", "requests": 1})[0].turns == (first,)


@needs_shared
def test_math500_subjects_and_ids():
    prompts = load("math500")
    assert len(prompts) == 500
    assert Counter(p.category for p in prompts) == {
        "Algebra": 124, "Intermediate Algebra": 97, "Prealgebra": 82, "Number Theory": 62,
        "Precalculus": 56, "Geometry": 41, "Counting & Probability": 38,
    }
    assert prompts[0].id == "test/precalculus/807.json"
    assert prompts[0].turns[0] == shared_row("math500.jsonl")["problem"] + BOXED_SUFFIX
    geometry = load({"name": "math500", "categories": ["Geometry"]})
    assert len(geometry) == 41 and {p.category for p in geometry} == {"Geometry"}


@needs_shared
def test_humaneval_recipes_exact_text():
    raw = shared_row("humaneval.jsonl")["prompt"]
    default = load("humaneval")
    assert len(default) == 164 and default[0].id == "HumanEval/0" and default[-1].id == "HumanEval/163"
    assert default[0].turns[0] == (
        "Write a solution to the following problem and make sure that it passes the tests:\n```python\n" + raw + "\n```"
    )
    assert load({"name": "humaneval", "recipe": "eagle", "requests": 1})[0].turns[0] == "Complete the code I provided." + raw
    assert load({"name": "humaneval", "recipe": "plain", "requests": 1})[0].turns[0] == raw


@needs_shared
def test_mbpp_sanitized_default_is_test_split_of_257():
    prompts = load("mbpp")
    ids = [int(p.id) for p in prompts]
    assert len(prompts) == 257 and min(ids) >= 11 and max(ids) <= 510
    row = next(json.loads(line) for line in open(SHARED / "mbpp_sanitized.jsonl") if json.loads(line)["task_id"] == ids[0])
    assert prompts[0].turns == (row["prompt"],)


@needs_shared
def test_mbpp_full_500_and_with_tests_text():
    prompts = load({"name": "mbpp", "variant": "full", "recipe": "with_tests"})
    assert len(prompts) == 500 and prompts[0].id == "11" and prompts[-1].id == "510"
    row = shared_row("mbpp.jsonl")
    assert prompts[0].turns[0] == (
        "You are an expert Python programmer, and here is your task: "
        "Write a python function to remove first and last occurrence of a given character from the string."
        " Your code should pass these tests:\n\n" + "\n".join(row["test_list"])
    )
    assert load({"name": "mbpp", "variant": "full", "requests": 1})[0].turns == (row["text"],)


@needs_shared
def test_mbpp_full_falls_back_to_the_complete_file_filtered_to_test_split(tmp_path):
    shutil.copy(SHARED / "mbpp_full.jsonl", tmp_path)
    prompts = load({"name": "mbpp", "variant": "full"}, tmp_path)
    assert [p.id for p in prompts] == [str(i) for i in range(11, 511)]


@needs_shared
def test_mt_bench_two_turns_by_default_eight_categories_of_ten():
    prompts = load("mt_bench")
    assert len(prompts) == 80 and prompts[0].id == "81"
    assert Counter(p.category for p in prompts) == {c: 10 for c in
        ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")}
    assert all(len(p.turns) == 2 for p in prompts)
    assert prompts[0].turns[1] == "Rewrite your previous response. Start every sentence with the letter A."
    one = load({"name": "mt_bench", "turns": 1})
    assert [p.turns for p in one] == [p.turns[:1] for p in prompts]


@needs_shared
def test_spec_bench_six_subtasks_of_80_and_category_filter():
    prompts = load("spec_bench")
    assert len(prompts) == 480
    assert Counter(p.category for p in prompts) == {
        s: 80 for s in ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
    }
    assert Counter(len(p.turns) for p in prompts) == {1: 400, 2: 80}
    assert [p.turns for p in prompts[:80]] == [p.turns for p in load("mt_bench")]
    writing = load({"name": "spec_bench", "categories": ["writing"]})
    assert len(writing) == 10 and {p.category for p in writing} == {"mt_bench"}
    mixed = load({"name": "spec_bench", "categories": ["translation", "rag"], "turns": 1})
    assert len(mixed) == 160 and {p.category for p in mixed} == {"translation", "rag"}


def test_builtin_set_is_bundled_and_balanced():
    prompts = load_prompts(spec("builtin"))
    assert len(prompts) == 24 and len({p.id for p in prompts}) == 24
    assert Counter(p.category for p in prompts) == {"math": 8, "code": 8, "chat": 8}
    assert all(len(p.turns) == 1 and 0 < len(p.turns[0]) < 400 for p in prompts)
    assert [p.category for p in load_prompts(spec({"name": "builtin", "categories": "code"}))] == ["code"] * 8


# ---------------------------------------------------------------- schema fixtures (not real data)


def test_ultrachat_fixture_first_user_turn_and_more_turns(tmp_path):
    prompts = load("ultrachat", FIXTURES)
    rows = [json.loads(line) for line in open(FIXTURES / "ultrachat_200k_test_sft.jsonl")]
    assert [p.id for p in prompts] == [r["prompt_id"] for r in rows]
    assert [p.turns for p in prompts] == [(r["prompt"],) for r in rows]
    three = load({"name": "ultrachat", "turns": 3}, FIXTURES)
    assert [len(p.turns) for p in three] == [2, 1, 3]
    assert three[2].turns[1] == "Give me two more."

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ultrachat_200k_test_sft.parquet")
    assert load("ultrachat", tmp_path) == prompts


def test_speed_bench_fixture_categories_turns_and_parquet(tmp_path):
    prompts = load("speed_bench", FIXTURES)
    assert [p.id for p in prompts] == [f"speed-q-000{i}" for i in range(1, 7)]
    assert Counter(p.category for p in prompts)["coding"] == 2
    assert prompts[2].turns == ("Write a short email inviting a colleague to a team lunch on Friday.", "Now make it more formal.")
    assert [p.id for p in load({"name": "speed_bench", "categories": ["sql"]}, FIXTURES)] == ["speed-q-0006"]

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in open(FIXTURES / "speed_bench_qualitative.jsonl")]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "speed_bench_throughput_1k.parquet")
    assert load({"name": "speed_bench", "config": "throughput_1k"}, tmp_path) == prompts
    with pytest.raises(DatasetError, match="speed_bench_qualitative.jsonl or speed_bench_qualitative.parquet"):
        check_available(spec("speed_bench"), tmp_path)


def test_speed_bench_placeholder_rows_are_rejected(tmp_path):
    rows = [json.loads(line) for line in open(FIXTURES / "speed_bench_qualitative.jsonl")]
    rows[3]["turns"] = [SPEED_PLACEHOLDER]
    (tmp_path / "speed_bench_qualitative.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(load({"name": "speed_bench", "requests": 3}, tmp_path)) == 3  # rows after the chosen ones are not read
    with pytest.raises(DatasetError) as err:
        load({"name": "speed_bench", "requests": 4}, tmp_path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path / 'speed_bench_qualitative.jsonl'}:4: SPEED-Bench row speed-q-0004")
    assert "prepare_data.py" in msg and "NVIDIA" in msg


# ---------------------------------------------------------------- plain files


def test_plain_file_entry_prompt_messages_and_turns_fields():
    entry = spec({"name": "prompts", "path": "prompts.jsonl", "requests": 4})
    assert (entry.source, entry.path) == ("file", FIXTURES / "prompts.jsonl")
    prompts = load_prompts(entry)
    assert [p.id for p in prompts] == ["p1", "p2", "p3", "p4"]
    assert prompts[0].turns == ("Say hello in French.",) and prompts[0].category == "chat"
    assert prompts[2].turns == ("What colour is the sky on a clear day?", "And grass?")
    assert prompts[2].system == "You answer in one word."
    assert prompts[3].turns == ("What is 6 times 7?", "Now divide that by 2.")
    forced = load_prompts(spec({"name": "prompts", "path": "prompts.jsonl", "system": "Be brief.", "turns": 1}))
    assert {p.system for p in forced} == {"Be brief."} and forced[3].turns == ("What is 6 times 7?",)


def test_file_field_options_and_index_ids(tmp_path):
    (tmp_path / "q.jsonl").write_text(
        '{"q": "first?", "kind": "a"}\n\n{"q": "second?", "kind": "b"}\n'
    )
    prompts = load_prompts(spec({"name": "mine", "path": "q.jsonl", "field": "q", "category_field": "kind"}, tmp_path))
    assert [(p.id, p.turns, p.category) for p in prompts] == [("0", ("first?",), "a"), ("1", ("second?",), "b")]


def test_registry_set_from_explicit_path(tmp_path):
    (tmp_path / "my_gsm.jsonl").write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    prompts = load_prompts(spec({"name": "gsm8k", "path": "my_gsm.jsonl"}, tmp_path))
    assert prompts[0].turns == ("1+1?" + BOXED_SUFFIX,)


# ---------------------------------------------------------------- selection


@needs_shared
def test_selection_first_and_seeded_shuffle_are_deterministic():
    first = load({"name": "gsm8k", "requests": 10})
    assert [p.id for p in first] == [str(i) for i in range(10)]
    shuffled = [p.id for p in load({"name": "gsm8k", "requests": 10, "selection": "shuffle", "seed": 7})]
    again = [p.id for p in load({"name": "gsm8k", "requests": 10, "selection": "shuffle", "seed": 7})]
    other = [p.id for p in load({"name": "gsm8k", "requests": 10, "selection": "shuffle", "seed": 8})]
    assert shuffled == again and shuffled != [p.id for p in first] and shuffled != other
    expected = [str(i) for i in range(1319)]
    random.Random(7).shuffle(expected)
    assert shuffled == expected[:10]
    longer = [p.id for p in load({"name": "gsm8k", "requests": 20, "selection": "shuffle", "seed": 7})]
    assert longer[:10] == shuffled


def test_requests_beyond_rows_is_an_error():
    with pytest.raises(DatasetError, match="requests 30 exceeds the 24 rows"):
        load_prompts(spec({"name": "builtin", "requests": 30}))


# ---------------------------------------------------------------- suite-entry validation


@pytest.mark.parametrize(
    ("entry", "prefix"),
    [
        ({"name": "gsm8k", "bogus": 1}, f"{WHERE}.bogus: unknown key"),
        ({"name": "gsm8k", "variant": "full"}, f"{WHERE}.variant: unknown key for data set 'gsm8k'"),
        ({"name": "gsm8k", "requests": "ten"}, f"{WHERE}.requests: must be a positive integer"),
        ({"name": "gsm8k", "requests": 0}, f"{WHERE}.requests: must be a positive integer"),
        ({"name": "gsm8k", "seed": True}, f"{WHERE}.seed: must be an integer"),
        ({"name": "gsm8k", "selection": "random"}, f"{WHERE}.selection: must be one of first, shuffle"),
        ({"name": "gsm8k", "recipe": "eagle"}, f"{WHERE}.recipe: must be one of boxed, plain"),
        ({"name": "nosuch"}, f"{WHERE}.name: unknown data set 'nosuch'"),
        ({"name": "x", "source": "nosuch"}, f"{WHERE}.source: unknown data set 'nosuch'"),
        ({"name": "x", "path": "missing.jsonl"}, f"{WHERE}.path: file not found"),
        ({"name": "x", "path": "prompts.txt"}, f"{WHERE}.path: unsupported file type '.txt'"),
        ({"name": "x", "source": "file"}, f"{WHERE}.path: required"),
        ({"name": "mbpp", "variant": "tiny"}, f"{WHERE}.variant: must be one of sanitized, full"),
        ({"name": "mt_bench", "turns": 0}, f"{WHERE}.turns: must be a positive integer"),
        ({"name": "mt_bench", "categories": ["poetry"]}, f"{WHERE}.categories: unknown categories poetry"),
        ({"name": "speed_bench", "config": "throughput_4k"}, f"{WHERE}.config: must be one of qualitative"),
        ({"source": "gsm8k"}, f"{WHERE}: missing key 'name'"),
        (["gsm8k"], f"{WHERE}: expected a mapping"),
    ],
)
def test_from_mapping_errors_name_the_key(entry, prefix):
    with pytest.raises(SuiteError) as err:
        spec(entry)
    assert str(err.value).startswith(prefix) and "\n" not in str(err.value)


def test_from_mapping_defaults_and_describe():
    s = spec({"name": "easy", "source": "mbpp", "requests": 5})
    assert (s.name, s.source, s.selection, s.seed, s.recipe, s.options) == ("easy", "mbpp", "first", 0, None, {})
    assert s.effective_recipe == "plain" and s.effective_options["variant"] == "sanitized"
    assert s.describe().options == {"variant": "sanitized"}
    assert spec("mt_bench") == spec({"name": "mt_bench"})
    assert set(REGISTRY) >= {"builtin", "gsm8k", "math500", "humaneval", "mbpp", "mt_bench", "ultrachat",
                             "speed_bench", "spec_bench", "file"}


# ---------------------------------------------------------------- availability and malformed data


def test_missing_data_offline_is_one_line_naming_both_remedies():
    s = spec("gsm8k")
    for call in (lambda: check_available(s, None), lambda: load_prompts(s, None)):
        with pytest.raises(DatasetError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("data set 'gsm8k' is not available")
        for needle in ("gsm8k.jsonl", "data_dir", "SPECBENCH_DATA_DIR", "openai/gsm8k", "HF_HUB_OFFLINE", "Hugging Face"):
            assert needle in msg


def test_spec_bench_has_no_hub_copy(tmp_path):
    with pytest.raises(DatasetError, match=f"no spec_bench.jsonl or spec_bench.parquet in data dir {tmp_path}"):
        check_available(spec("spec_bench"), tmp_path)


def test_unreachable_hub_fails_fast(monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(DatasetError, match="the Hugging Face hub is not reachable"):
        check_available(spec("humaneval"), None)


def test_hub_used_only_without_local_copy(monkeypatch, tmp_path):
    import datasets as hf_datasets

    calls = []

    def fake_load_dataset(hf_id, config=None, split=None):
        calls.append((hf_id, config, split))
        return [{"question": "2+2?", "answer": "#### 4"}, {"question": "3+3?", "answer": "#### 6"}]

    monkeypatch.setattr(hf_datasets, "load_dataset", fake_load_dataset)
    (tmp_path / "hf_home" / "hub" / "datasets--openai--gsm8k").mkdir(parents=True)
    check_available(spec("gsm8k"), None)
    prompts = load_prompts(spec({"name": "gsm8k", "recipe": "plain"}), None)
    assert calls == [("openai/gsm8k", "main", "test")]
    assert [(p.id, p.turns) for p in prompts] == [("0", ("2+2?",)), ("1", ("3+3?",))]

    def broken(*args, **kwargs):
        raise ConnectionError("Couldn't reach\nthe hub")

    monkeypatch.setattr(hf_datasets, "load_dataset", broken)
    with pytest.raises(DatasetError, match="from the hub failed \\(Couldn't reach the hub\\)") as err:
        load_prompts(spec("gsm8k"), None)
    assert "\n" not in str(err.value)
    check_available(spec("builtin"), None)


@needs_shared
def test_env_data_dir_and_available(monkeypatch):
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(SHARED))
    check_available(spec("mt_bench"))
    assert len(load_prompts(spec({"name": "mt_bench", "requests": 3}))) == 3


@pytest.mark.parametrize(
    ("content", "suffix"),
    [
        ('{"prompt": "ok"}\n{"prompt": "ok2"}\n{"prompt": broken}\n', ":3: not valid JSON"),
        ('{"prompt": "ok"}\n{"text": "no prompt"}\n', ":2: missing field 'prompt'"),
        ('{"prompt": "ok"}\n["a list"]\n', ":2: expected a JSON object, got list"),
        ('{"prompt": ""}\n', ":1: field 'prompt' must be a non-empty string"),
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', ":2: duplicate id 'a'"),
        ('{"turns": ["x", 3]}\n', ":1: field 'turns' must be a non-empty list of non-empty strings"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, content, suffix):
    path = tmp_path / "prompts.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError) as err:
        load_prompts(spec({"name": "prompts", "path": "prompts.jsonl"}, tmp_path))
    assert str(err.value).startswith(f"{path}{suffix}") and "\n" not in str(err.value)


def test_jsonl_lines_end_at_newline_only(tmp_path):
    """U+2028, U+2029 and U+0085 are valid unescaped inside a JSON string; a JSONL line ends at \\n only
    (CRLF files too), so such rows load whole, each with its own line number."""
    texts = ["one\u2028two", "three\u2029four", "five\u0085six"]
    rows = "".join(json.dumps({"id": f"r{i}", "prompt": t}, ensure_ascii=False) + ("\r\n" if i else "\n")
                   for i, t in enumerate(texts))
    (tmp_path / "p.jsonl").write_text(rows + "\n  \n", encoding="utf-8", newline="")
    prompts = load_prompts(spec({"name": "p", "path": "p.jsonl"}, tmp_path))
    assert [(p.id, p.turns) for p in prompts] == [(f"r{i}", (t,)) for i, t in enumerate(texts)]
    (tmp_path / "bad.jsonl").write_text(rows + '{"prompt": \u2028}\n', encoding="utf-8", newline="")
    with pytest.raises(DatasetError, match=r"bad.jsonl:4: not valid JSON"):
        load_prompts(spec({"name": "bad", "path": "bad.jsonl"}, tmp_path))


@pytest.mark.parametrize(("name", "content"), [("p.jsonl", ""), ("p.jsonl", "\n \n\t\r\n"), ("p.json", "[]")])
def test_a_prompt_file_without_rows_is_an_error_naming_the_file(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    with pytest.raises(DatasetError) as err:
        load_prompts(spec({"name": "p", "path": name}, tmp_path))
    assert str(err.value) == f"{tmp_path / name}: the file holds no rows"


def test_an_empty_parquet_file_is_an_error_naming_the_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": pa.array([], pa.string())}), tmp_path / "p.parquet")
    with pytest.raises(DatasetError, match=r"p.parquet: the file holds no rows$"):
        load_prompts(spec({"name": "p", "path": "p.parquet"}, tmp_path))


@needs_shared
def test_malformed_row_in_named_set(tmp_path):
    (tmp_path / "math500.jsonl").write_text('{"problem": "1+1", "subject": "Algebra", "unique_id": "a"}\n{"problem": "2+2"}\n')
    with pytest.raises(DatasetError, match=r"math500.jsonl:2: missing field 'subject'"):
        load("math500", tmp_path)


# ---------------------------------------------------------------- prompt token counts


def test_tiktoken_file_detection_without_network(monkeypatch, tmp_path):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens.o200k_cache_file() is None
    assert tokens.PromptTokenCounter().source is None
    cached = tmp_path / tokens.hashlib.sha1(tokens.O200K_URL.encode()).hexdigest()
    cached.write_bytes(b"not the real encoding")
    assert tokens.o200k_cache_file() is None
    assert tokens.o200k_cache_file(sha256=tokens.hashlib.sha256(b"not the real encoding").hexdigest()) == cached
    assert tokens.o200k_cache_file({"TIKTOKEN_CACHE_DIR": ""}) is None


async def test_counter_without_tiktoken_or_server(monkeypatch, tmp_path):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert await tokens.PromptTokenCounter().count("hello") == (None, None)


async def _serve(handler) -> TestServer:
    app = web.Application()
    app.router.add_post("/tokenize", handler)
    server = TestServer(app)
    await server.start_server()
    return server


async def test_counter_uses_server_tokenize(monkeypatch, tmp_path):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    seen = []

    async def tokenize(request):
        body = await request.json()
        seen.append(body)
        return web.json_response({"count": len(body["prompt"].split()), "tokens": [], "max_model_len": 2048})

    server = await _serve(tokenize)
    try:
        async with ClientSession() as session:
            counter = tokens.PromptTokenCounter(session, f"{server.make_url('')}/v1", "m1", use_tiktoken=True)
            assert counter.source == "server:/tokenize"
            assert await counter.count("one two three") == (3, "server:/tokenize")
    finally:
        await server.close()
    assert seen == [{"prompt": "one two three", "model": "m1"}]


async def test_counter_disables_a_failing_tokenize(monkeypatch, tmp_path):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    calls = []

    async def missing(request):
        calls.append(1)
        return web.Response(status=404)

    server = await _serve(missing)
    try:
        async with ClientSession() as session:
            counter = tokens.PromptTokenCounter(session, str(server.make_url("")))
            assert await counter.count("a") == (None, None)
            assert await counter.count("b") == (None, None)
    finally:
        await server.close()
    assert calls == [1] and "HTTP 404" in counter.last_error and counter.source is None


# ---------------------------------------------------------------- read only as far as needed (issue 31, item 5)


def lines(n: int) -> str:
    return "".join(json.dumps({"id": f"q{i}", "prompt": f"question {i}", "category": f"c{i % 2}"}) + "\n" for i in range(n))


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_first_n_reads_no_further_than_the_rows_it_takes(tmp_path, suffix):
    """Rows after the needed ones are never parsed: invalid JSON (or an unreadable parquet batch) there is not seen."""
    path = tmp_path / f"p.{suffix}"
    if suffix == "jsonl":
        path.write_text(lines(3) + "{not json\n" + "\xff garbage\n" * 3)
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        rows = [json.loads(line) for line in lines(2500).splitlines()]
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1024)
        data, last = bytearray(path.read_bytes()), pq.ParquetFile(path).metadata.row_group(2)
        for column in range(last.num_columns):  # the last row group's page headers: garbage, never read for 3 rows
            start = last.column(column).data_page_offset
            data[start:start + 16] = b"\xff" * 16
        path.write_bytes(bytes(data))
    prompts = load_prompts(spec({"name": "p", "path": path.name, "requests": 3}, tmp_path))
    assert [p.id for p in prompts] == ["q0", "q1", "q2"]


def test_a_bad_line_within_the_needed_rows_still_fails_naming_file_and_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(lines(1) + "{not json\n" + lines(5))
    with pytest.raises(DatasetError) as err:
        load_prompts(spec({"name": "p", "path": "p.jsonl", "requests": 3}, tmp_path))
    assert str(err.value).startswith(f"{path}:2: not valid JSON") and "\n" not in str(err.value)
    path.write_bytes(lines(1).encode() + b'{"prompt": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"p.jsonl:2: not valid UTF-8"):
        load_prompts(spec({"name": "p", "path": "p.jsonl", "requests": 2}, tmp_path))


def test_categories_read_on_until_each_asked_for_is_seen(tmp_path):
    """Three prompts of c0 come first, but a category asked for that the file lacks is still an error."""
    rows = [{"id": f"a{i}", "prompt": "x", "category": "c0"} for i in range(3)] + [{"id": "b", "prompt": "y", "category": "c1"}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    entry = {"name": "p", "path": "p.jsonl", "requests": 3, "category_field": "category"}
    assert [p.id for p in load_prompts(spec({**entry, "categories": ["c0", "c1"]}, tmp_path))] == ["a0", "a1", "a2"]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError, match="no rows in categories c2"):
        load_prompts(spec({**entry, "categories": ["c0", "c2"]}, tmp_path))


def test_shuffle_and_all_still_read_every_row(tmp_path):
    (tmp_path / "p.jsonl").write_text(lines(5) + "{not json\n")
    for extra in ({"selection": "shuffle", "seed": 3}, {"requests": "all"}):
        with pytest.raises(DatasetError, match=r"p.jsonl:6: not valid JSON"):
            load_prompts(spec({"name": "p", "path": "p.jsonl", "requests": 3, **extra}, tmp_path))
    (tmp_path / "p.jsonl").write_text(lines(50))
    ids = [f"q{i}" for i in range(50)]
    random.Random(3).shuffle(ids)
    chosen = load_prompts(spec({"name": "p", "path": "p.jsonl", "requests": 3, "selection": "shuffle", "seed": 3}, tmp_path))
    assert [(p.id, p.turns, p.category) for p in chosen] == [(i, (f"question {i[1:]}",), f"c{int(i[1:]) % 2}") for i in ids[:3]]
