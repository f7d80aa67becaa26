"""``load.prefix_cache: reset`` on scripted servers with a prefix cache: the reset is POSTed once when the server is
reached, then after each warm-up and right before each timed pass; no measured prompt is served from a cache an
earlier pass or warm-up filled (with ``keep`` the sweep's second load point re-sends cached prompts); every phase
records it, and results.md says it. With ``keep`` a cell whose timed pass re-sent prompts an earlier pass or warm-up
sent, found cached, gets a ⚠ note naming reset; with reset none does. A launched vLLM-shaped server gets
``VLLM_SERVER_DEV_MODE=1`` only with reset."""

from __future__ import annotations

import json

import pytest

from specbench.suite import read_suite
from tests.support.rundirs import cell, check_run_dir
from tests.support.runs import run_suite
from tests.support.suites import write_suite

BLOCK = 2  # prompt words per cached block: the six prompts share their first words, so a cold one has some cached
PROMPTS, WARMUP = 6, 2


def suite_on(tmp_path, prompts_file, url: str, prefix_cache: str, **top):
    return read_suite(write_suite(tmp_path, [{"name": "baseline", "url": url}], name="reset", endpoint="chat",
                                  prompts=prompts_file, **top,
                                  load={"concurrency": [1, 2], "max_tokens": 8, "temperature": 0, "warmup": WARMUP,
                                        "workload": "fixed", "prefix_cache": prefix_cache}))


def resent_notes(row: dict) -> list[dict]:
    return [n for n in row.get("notes") or [] if isinstance(n, dict) and n.get("code") == "resent_prompts"]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_reset_after_each_warmup_before_each_timed_pass(tmp_path, prompts_file, scripted, engine):
    server, url = await scripted(prefix_cache=BLOCK, reset=engine)
    out = tmp_path / "out"
    outcome = await run_suite(suite_on(tmp_path, prompts_file, url, "reset", engine=engine), out)
    assert outcome.exit_code == 0, outcome.failed_configs
    # reached: one reset; then per load point: its warm-up, a reset, its timed pass
    warmup, timed = ["request"] * WARMUP, ["request"] * PROMPTS
    assert server.events == ["reset"] + (warmup + ["reset"] + timed) * 2
    rows, records, phases, meta = check_run_dir(out)
    assert [p["prefix_cache_reset"] for p in phases] == [True, True]
    measured = [r for r in records if r["phase"] == "measure"]
    # nothing a warm-up or the first pass sent is found: each prompt finds only the blocks it shares with a prompt of
    # its own pass sent before it (the first one nothing)
    first = [r["cached_tokens"] for r in measured if r["concurrency"] == 1]
    second = [r["cached_tokens"] for r in measured if r["concurrency"] == 2]
    assert first[0] == 0 and all(c < r["prompt_tokens"] / 2 for c, r in zip(first + second, measured))
    assert cell(rows, "baseline", 1)["cached_requests"] == cell(rows, "baseline", 2)["cached_requests"] == 0
    assert meta["comparability"]["prefix_cache"] == "reset"
    md = " ".join((out / "results.md").read_text().split())
    assert "prefix cache emptied after each warm-up, right before each timed pass (load.prefix_cache reset" in md


async def test_keep_sends_no_reset_and_the_second_pass_finds_its_prompts_cached(tmp_path, prompts_file, scripted):
    """Today's behaviour, and why reset exists: the second load point's prompts were all sent by the first."""
    server, url = await scripted(prefix_cache=BLOCK, reset="vllm")
    out = tmp_path / "out"
    assert (await run_suite(suite_on(tmp_path, prompts_file, url, "keep"), out)).exit_code == 0
    assert server.resets == 0
    rows, _, phases, meta = check_run_dir(out)
    assert all("prefix_cache_reset" not in p for p in phases) and "prefix_cache" not in meta["comparability"]
    assert cell(rows, "baseline", 2)["cached_requests"] == PROMPTS
    assert "load.prefix_cache reset" not in (out / "results.md").read_text()


async def test_keep_notes_the_cells_whose_prompts_an_earlier_pass_sent_and_reset_none(tmp_path, prompts_file, scripted):
    """C=1 re-sends the two prompts its warm-up sent, C=2 all six the first pass sent: found cached, each cell says so
    (how many, their cached share) and names the remedy; after a reset nothing sent before a pass is found."""
    rows, second, md = {}, {}, {}
    for prefix_cache in ("keep", "reset"):
        _, url = await scripted(prefix_cache=BLOCK, reset="vllm")
        out = tmp_path / prefix_cache
        assert (await run_suite(suite_on(tmp_path, prompts_file, url, prefix_cache), out)).exit_code == 0
        rows[prefix_cache], records, _, _ = check_run_dir(out)
        second[prefix_cache] = [r for r in records if r["phase"] == "measure" and r["concurrency"] == 2]
        md[prefix_cache] = " ".join((out / "results.md").read_text().split())
    assert all(r["cached_tokens"] < r["prompt_tokens"] / 2 for r in second["reset"])  # cold, and nothing noted
    assert not any(resent_notes(cell(rows["reset"], "baseline", c)) for c in (1, 2)) and "re-sent" not in md["reset"]
    [first], [again] = (resent_notes(cell(rows["keep"], "baseline", c)) for c in (1, 2))
    assert first["values"]["resent"] == WARMUP and first["values"]["requests"] == PROMPTS
    share = sum(r["cached_tokens"] for r in second["keep"]) / sum(r["prompt_tokens"] for r in second["keep"])
    assert again["values"] == {"resent": PROMPTS, "requests": PROMPTS, "cached_share": pytest.approx(share)}
    assert (f"⚠ baseline / prompts / C=2: {PROMPTS} of the {PROMPTS} timed requests re-sent a prompt an earlier pass or "
            f"warm-up on the same server start had sent, and the server served {share:.0%} of their prompt tokens from "
            "its prefix cache (load.prefix_cache keep): their TTFT is a cached prompt's; load.prefix_cache: reset for "
            "cold prompts") in md["keep"]


@pytest.mark.parametrize("prefix_cache, env", [("reset", "1"), ("keep", None)])
async def test_a_launched_vllm_gets_dev_mode_only_for_reset(tmp_path, prompts_file, fake_engines, prefix_cache, env):
    """The ``fake`` engine (the scripted server, extending the vllm launcher) mounts /reset_prefix_cache only with
    VLLM_SERVER_DEV_MODE=1, as vLLM does."""
    suite = read_suite(write_suite(tmp_path, [{"name": "baseline"}], name="reset", engine="fake", endpoint="chat",
                                   prompts=prompts_file, server={"startup_timeout_s": 60},
                                   load={"concurrency": 1, "max_tokens": 8, "warmup": 1, "prefix_cache": prefix_cache}))
    out = tmp_path / "out"
    outcome = await run_suite(suite, out)
    assert outcome.exit_code == 0, outcome.failed_configs
    _, _, phases, meta = check_run_dir(out)
    assert meta["servers"]["baseline"]["env"].get("VLLM_SERVER_DEV_MODE") == env
    assert [p.get("prefix_cache_reset") for p in phases] == [True if env else None]
    assert json.loads((out / "meta.json").read_text())["servers"]["baseline"]["launched"] is True
