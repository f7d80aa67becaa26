"""A run with ``load.tiktoken_file``: every row carries output and prompt lengths in o200k_base tokens
(counted through real tiktoken, from the fixture encoding), each request its prompt's; without the file
the rows say why, and nothing is fetched."""

import json

import pytest

from specbench.run.o200k_file import find_o200k
from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import write_e2e_suite

O200K_KEYS = ["output_tokens_o200k", "output_throughput_o200k_tps", "o200k_per_output_token",
              "prompt_tokens_o200k_mean", "prompt_tokens_o200k_p50", "prompt_tokens_o200k_max"]


@pytest.fixture
async def urls():
    base, base_runner, base_url = await start(Script(pattern=[1], ttft_s=0.01, gap_s=0.002))
    spec, spec_runner, spec_url = await start(Script(pattern=[1, 2, 4], k=3, ttft_s=0.01, gap_s=0.002))
    yield {"baseline": base_url, "spec": spec_url}
    await base_runner.cleanup()
    await spec_runner.cleanup()


def _read(out):
    rows = json.loads((out / "results.json").read_text())
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    return rows, records, (out / "results.md").read_text()


async def test_rows_and_requests_carry_o200k_lengths(tmp_path, prompts_file, urls, o200k_file, no_network):
    suite = read_suite(write_e2e_suite(tmp_path, prompts_file, urls, tiktoken_file=str(o200k_file)))
    assert suite.load.tiktoken_file == str(o200k_file)
    assert (await run_suite(suite, tmp_path / "out")).exit_code == 0
    rows, records, md = _read(tmp_path / "out")
    enc = find_o200k(str(o200k_file))
    prompts = {i: json.loads(line)["prompt"] for i, line in enumerate(prompts_file.read_text().splitlines())}
    for row in rows:
        assert list(row)[-len(O200K_KEYS):] == O200K_KEYS and "o200k_error" not in row
        mine = [r for r in records if r["config"] == row["run"] and r["phase"] == "measure"]
        assert row["output_tokens_o200k"] == sum(enc.count(r["text"] for r in mine)) > 0
        assert row["o200k_per_output_token"] == pytest.approx(row["output_tokens_o200k"] / row["output_tokens"])
        assert row["output_throughput_o200k_tps"] == pytest.approx(
            row["output_throughput_tps"] * row["o200k_per_output_token"])
        lengths = [r["prompt_tokens_o200k"] for r in mine]
        assert lengths == enc.count(prompts[int(r["prompt_id"])] for r in mine)
        assert row["prompt_tokens_o200k_max"] == max(lengths) and row["prompt_tokens_o200k_mean"] == pytest.approx(
            sum(lengths) / len(lengths))
    assert all(r["prompt_tokens_o200k"] is None for r in records if r["phase"] == "warmup")
    assert "o200k tok/s" in md and "Prompt o200k mean/p50/max" in md


async def test_without_the_file_rows_say_why_and_nothing_is_fetched(tmp_path, prompts_file, urls, no_network):
    suite = read_suite(write_e2e_suite(tmp_path, prompts_file, urls))
    assert (await run_suite(suite, tmp_path / "out")).exit_code == 0
    rows, records, md = _read(tmp_path / "out")
    for row in rows:
        assert list(row)[-len(O200K_KEYS) - 1:] == O200K_KEYS + ["o200k_error"]
        assert all(row[k] is None for k in O200K_KEYS)
        assert row["o200k_error"].startswith("o200k_base.tiktoken not cached (") and "not downloaded mid-run" in row["o200k_error"]
    assert all(r["prompt_tokens_o200k"] is None for r in records)
    assert "o200k tok/s" not in md


def test_a_missing_tiktoken_file_is_a_suite_error(tmp_path, prompts_file):
    from specbench.errors import SuiteError

    path = write_e2e_suite(tmp_path, prompts_file, {"baseline": "http://127.0.0.1:9", "spec": "http://127.0.0.1:9"},
                           tiktoken_file="nowhere/o200k_base.tiktoken")
    with pytest.raises(SuiteError, match=r"load.tiktoken_file: file not found: .*nowhere/o200k_base.tiktoken"):
        read_suite(path)
