"""meta.json keeps its layout across the move to a typed record (issue 27, item 3): the keys of a
fresh run, a resumed one and a tune run, at every depth and in order, are those the dict-built
meta.json had (``tests/data/meta/keys_*.json``, written by commit fc59a84, the last one before
``RunMeta``; keys_tune.json since gained each launched server's ``start`` and ``server_launches`` /
``server_starts``, issue 34; new runs also write ``prompts``, issue 31, and each server's ``accelerator``, issue 38;
``notes`` and ``run_dir_notes`` became lists of notes, a code and its values, issue 41 item 3: re-recorded once, only
those two keys moved).
Values are left out (times, pids, paths); lists of objects are compared entry by entry.

To write the golden files from another checkout: ``SPECBENCH_WRITE_META_KEYS=DIR pytest this-file``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import yaml

from specbench.cli import main
from specbench.suite import read_suite
from tests.support.paths import ROOT
from tests.support.runs import run_suite
from tests.support.suites import write_fault_suite

GOLDEN = ROOT / "tests" / "data" / "meta"


def skeleton(value: Any) -> Any:
    """The keys of ``value`` in order at every depth; a scalar, null, or a list of anything but objects is one
    mark (whether a measured CI came out null is not the layout's business)."""
    if isinstance(value, dict):
        return {k: skeleton(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [skeleton(v) for v in value]
    return "·"


def check_keys(out: Path, name: str) -> None:
    meta = json.loads((out / "meta.json").read_text())
    meta["suite_file"]["git"] = None  # an object when the test's tmp dir lies in a git work tree, else null
    text = json.dumps(skeleton(meta), indent=1, ensure_ascii=False) + "\n"
    target = os.environ.get("SPECBENCH_WRITE_META_KEYS")
    if target:
        (Path(target) / f"keys_{name}.json").write_text(text)
        return
    assert text == (GOLDEN / f"keys_{name}.json").read_text()


async def test_a_fresh_run_with_a_failed_config_and_its_resume_keep_the_key_layout(tmp_path, prompts_file, scripted):
    _, url = await scripted()
    configs = [{"name": "baseline", "url": url}, {"name": "other", "url": url}, {"name": "gone", "url": "http://127.0.0.1:9"}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, concurrency=[1, 2])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    check_keys(out, "fresh")
    phases = (out / "phases.jsonl").read_text().splitlines()
    cut = json.loads(phases[-1])
    cut["interrupted"] = True  # as if Ctrl-C had cut the last cell
    (out / "phases.jsonl").write_text("\n".join(phases[:-1] + [json.dumps(cut)]) + "\n")
    with (out / "requests.jsonl").open("a") as f:
        f.write('{"torn": \n')  # a line a crash cut: quarantined, and said in run_dir_notes
    await run_suite(read_suite(suite), out, resume=True)
    check_keys(out, "resumed")


async def test_a_tune_run_keeps_the_key_layout(tmp_path, fake_engine):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(8)))
    ngram = {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3, "speculative": {"prompt_lookup_max": 4}}
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "s", "model": "smol", "engine": "fake", "configs": [{"name": "baseline"}, ngram],
        "datasets": [{"name": "p", "path": str(prompts)}], "server": {"startup_timeout_s": 30},
        "load": {"concurrency": [1, 4], "max_tokens": 13, "warmup": 1}}))
    out = tmp_path / "out"
    assert await asyncio.to_thread(main, ["tune", str(suite), "--k", "1,2", "-o", str(out), "-q"]) == 0
    check_keys(out, "tune")
