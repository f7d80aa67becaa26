"""`specbench whatif` end to end on the vLLM-shaped fake engine (tests/support/fake_engine.py): the
break-even acceptance length per load on a known cost model, and `specbench profile` → `specbench whatif
SUITE --profile`, which serves synthetic_acceptance_rates as a step cycle whose per-position counters read
the rates back exactly."""

import asyncio
import hashlib
import json
import re

import pytest
import yaml

from specbench.cli import main
from specbench.measure.break_even import verdict, whatif_curves
from specbench.schemas.meta import RunMeta
from specbench.schemas.profile_file import FORMAT
from specbench.schemas.row_read import rows_from
from tests.support.suites import known_cost_suite


async def test_whatif_end_to_end_finds_the_break_even_per_load(tmp_path, fake_engine):
    # n-gram K=7, its drafter 3 tokens a step; a step costs 20 + 3.25·7·batch ms (batch 1 at C=1, 4 at C=4), the
    # baseline's 20 ms; 24 decode tokens a request (500 ms for the baseline: at most 8 requests/s, so a starved client
    # can keep up). Speedup ≈ 500 ÷ (20 + 24/L · step): at C=1 0.71 / 1.41 / 3.4 at L = 1.5 / 3 / 8 (break-even
    # ≈ 2.1), at C=4 0.28 / 0.55 / 1.42 (≈ 5.4). Every point is ≥ 29 % from 1.0, so a busy machine (a slower client,
    # late wake-ups: the same time added to both sides) moves the break-even but never across a grid point.
    ngram = {"name": "ngram_k7", "method": "ngram", "num_speculative_tokens": 7, "speculative": {"prompt_lookup_max": 4},
             "args": ["--gap-per-draft", "0.00325"]}
    suite = known_cost_suite(tmp_path, ngram, [1, 4], server_args=["--gap", "0.02", "--ttft", "0.02"])
    out = tmp_path / "out"
    code = await asyncio.to_thread(main, ["whatif", suite, "--lengths", "1.5,3,8", "-o", str(out), "-q"])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    meta = json.loads((out / "meta.json").read_text())
    assert {r["run"] for r in rows} == {"baseline", "ngram_k7", "ngram_k7_al1.5", "ngram_k7_al3", "ngram_k7_al8"}
    argv = meta["servers"]["ngram_k7_al3"]["argv"]
    assert json.loads(argv[argv.index("--speculative-config") + 1])["synthetic_acceptance_length"] == 3.0
    curves = {c.load.value: c for c in whatif_curves(rows_from(rows), RunMeta.from_dict(meta))}
    assert set(curves) == {1, 4}
    for c in curves.values():  # 24 decode tokens: every synthetic length divides them, so counters see it exactly
        assert [p.measured for p in c.points] == pytest.approx([1.5, 3.0, 8.0])
    assert 1.5 < curves[1].break_even < 3.0 < curves[4].break_even < 8.0  # more load, more acceptance needed
    assert verdict(curves[1]).endswith("has 3.00 → wins") and verdict(curves[4]).endswith("has 3.00 → loses")
    md = (out / "results.md").read_text()
    assert "What-if: speedup vs acceptance length" in md and "has 3.00 → loses" in md
    assert main(["report", str(out), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    assert 'id="fig-whatif"' in (tmp_path / "r.html").read_text()


async def test_whatif_profile_replays_each_data_set_at_its_own_rates(tmp_path, fake_engine, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(3)))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "plan", "model": "smol", "engine": "fake",
        "configs": [{"name": "baseline"}, {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3}],
        "datasets": [{"name": "a", "path": str(prompts)}, {"name": "b", "path": str(prompts)},
                     {"name": "c", "path": str(prompts)}],
        "load": {"concurrency": [1, 2], "max_tokens": 21, "warmup": 0}, "server": {"startup_timeout_s": 600}}))
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"format": FORMAT, "profiles": [
        {"config": "eagle_k3", "dataset": "a", "num_speculative_tokens": 3, "acceptance_per_position": [0.75, 0.5, 0.25],
         "concurrency": 1, "speedup_vs_baseline": 1.5},
        {"config": "eagle_k3", "dataset": "b", "num_speculative_tokens": 3, "acceptance_per_position": [0.5, 0.4, 0.1]}]}))
    out = tmp_path / "out"
    code = await asyncio.to_thread(main, ["whatif", str(suite), "--profile", str(profile), "--no-real", "-o", str(out), "-q"])
    assert code == 0
    meta = json.loads((out / "meta.json").read_text())
    rows = json.loads((out / "results.json").read_text())
    cells = sorted((r["run"], r["dataset"], r["concurrency"]) for r in rows)
    assert cells == sorted([(cfg, d, c) for cfg, ds in (("baseline", "ab"), ("ngram_k3_profile_a", "a"), ("ngram_k3_profile_b", "b"))
                            for d in ds for c in (1, 2)])  # c is not in the profile: not measured at all
    argv = meta["servers"]["ngram_k3_profile_b"]["argv"]
    sent = json.loads(argv[argv.index("--speculative-config") + 1])
    assert sent == {"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                    "synthetic_acceptance_rates": [0.5, 0.4, 0.1]}
    plan = meta["whatif"]
    assert plan["profile"]["sha256"] == hashlib.sha256(profile.read_bytes()).hexdigest()
    assert plan["profile"]["path"] == str(profile.resolve()) and plan["skipped_datasets"] == ["c"]
    assert plan["configs"]["ngram_k3_profile_a"]["acceptance_per_position"] == [0.75, 0.5, 0.25]
    by = {(r["run"], r["concurrency"]): r for r in rows}
    for c in (1, 2):  # the replay's counters read the profile back
        assert by[("ngram_k3_profile_a", c)]["acceptance_per_position"] == pytest.approx([0.75, 0.5, 0.25])
        assert by[("ngram_k3_profile_b", c)]["mean_acceptance_length"] == pytest.approx(2.0)
    for r in rows:  # synthetic acceptance commits drafts unchecked: the target's output is not what was served
        if r["run"] != "baseline":
            assert r["fidelity_identical"] is None and {"code": "synthetic_acceptance"} in r["notes"]
    md = (out / "results.md").read_text()
    assert "What-if: predicted speedup at the profile's acceptance" in md and not re.search(r"⚠ [+-]", md)
    assert "| a | ngram_k3 | 3 | C=1 |" in md and "| 1.500x | 2.50 | 2.50 | 0.750 0.500 0.250 |" in md
    # the replay is itself a run: `specbench profile` leaves its synthetic configs out
    assert main(["profile", str(out), "-o", str(tmp_path / "again.json")]) == 2
    assert "no profile: no speculative config with acceptance counters" in capsys.readouterr().err
