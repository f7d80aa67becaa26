"""`specbench tune` end to end on the vLLM-shaped fake engine (tests/support/fake_engine.py): the best K per
load told apart by the paired bootstrap, schedule.json and its engine flag, and `tune --verify` re-measuring
the recommendation in one command."""

import asyncio
import json

from specbench.cli import main
from tests.support.suites import known_cost_suite

NGRAM = {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3, "speculative": {"prompt_lookup_max": 4}}


async def test_tune_end_to_end_best_k_per_load_schedule_and_verify(tmp_path, fake_engine, capsys):
    # a step costs 20 + 9·K·batch ms (batch 1 at C=1, 4 at C=4: counted per pass, never read off the clock) and
    # carries min(K,2)+1 tokens; 24 decode tokens a request, the baseline's 500 ms (8 requests/s at C=4).
    suite = known_cost_suite(tmp_path, {**NGRAM, "args": ["--gap-per-draft", "0.009"]}, [1, 4],
                             server_args=["--gap", "0.02", "--ttft", "0.02"])
    out = tmp_path / "out"
    code = await asyncio.to_thread(main, ["tune", suite, "--k", "1,2,3", "-o", str(out), "-q"])
    assert code == 0
    meta = json.loads((out / "meta.json").read_text())
    result = meta["tune"]["result"]
    cells = {c["load"]: c for c in result["cells"]}
    # C=1: 20 + 9K ms a step → K=2 (1.54x: 8 steps of 38 ms) over K=1 (1.36x: 12 of 29) and K=3 (1.26x: 8 of 47),
    # every request of K=1 and K=3 ≥ 12 % slower than its pair at K=2
    assert cells[1]["best"] == 2 and cells[1]["indistinguishable"] == []
    # C=4: 20 + 36K ms a step: every K is ≥ 28 % slower than the baseline (K=1 ≈ 0.72x) → no speculation
    assert cells[4]["best"] == 0 and cells[4]["indistinguishable"] == []
    assert result["method"].startswith("paired bootstrap")
    schedule = json.loads((out / "schedule.json").read_text())
    [s] = schedule["schedules"]
    assert s["by_concurrency"] == {"1": 2, "4": 0} and s["ranges"] == [[1, 2, 2], [3, 4, 0]]
    assert s["speculative_config"]["num_speculative_tokens_per_batch_size"] == [[1, 2, 2], [3, 4, 0]]
    assert s["flag"].startswith("--speculative-config '{\"method\":\"ngram\"")
    printed = capsys.readouterr().out
    assert "| p | ngram | C=4 | **1.000x** |" in printed and f"specbench tune --verify {out}/schedule.json" in printed
    assert printed.count("Best K per load") == 1  # the run's own table carries the final choice
    assert "Told apart by: paired bootstrap" in (out / "results.md").read_text()  # written once, after the analysis
    # the recommendation, re-measured in one command
    vout = tmp_path / "verify"
    code = await asyncio.to_thread(main, ["tune", "--verify", str(out / "schedule.json"), "-o", str(vout), "-q"])
    assert code == 0
    vmeta = json.loads((vout / "meta.json").read_text())
    assert set(vmeta["servers"]) == {"baseline", "ngram_schedule"}
    assert {r["run"] for r in json.loads((vout / "results.json").read_text())} == {"baseline", "ngram_schedule"}
    argv = vmeta["servers"]["ngram_schedule"]["argv"]
    sent = json.loads(argv[argv.index("--speculative-config") + 1])
    assert sent["num_speculative_tokens_per_batch_size"] == [[1, 2, 2], [3, 4, 0]] and sent["num_speculative_tokens"] == 2
