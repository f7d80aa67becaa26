"""A config's ``datasets:`` list: the runner measures that config on those data sets only, and --resume
finds nothing left to do once they are measured (the parallel planner's count: tests/integration/run/test_parallel.py)."""

import json

from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import write_suite


async def test_a_config_restricted_to_one_data_set_measures_only_that_one(tmp_path, prompts_file):
    base, r1, base_url = await start(Script(pattern=[1]))
    spec, r2, spec_url = await start(Script(pattern=[1, 2, 4], k=3))
    try:
        datasets = [{"name": "a", "path": str(prompts_file), "requests": 2},
                    {"name": "b", "path": str(prompts_file), "requests": 2}]
        path = write_suite(tmp_path, [{"name": "baseline", "url": base_url},
                                      {"name": "spec", "url": spec_url, "method": "ngram", "num_speculative_tokens": 3,
                                       "datasets": ["b"]}],
                           name="restricted", datasets=datasets, load={"concurrency": [1, 2], "max_tokens": 8, "warmup": 0})
        outcome = await run_suite(read_suite(path), tmp_path / "out")
        assert outcome.exit_code == 0
        cells = sorted((r["run"], r["dataset"], r["concurrency"]) for r in json.loads((tmp_path / "out" / "results.json").read_text()))
        assert cells == [("baseline", "a", 1), ("baseline", "a", 2), ("baseline", "b", 1), ("baseline", "b", 2),
                         ("spec", "b", 1), ("spec", "b", 2)]
        assert spec.requests == 2 * 2  # two prompts at two load points of b, none of a
        again = await run_suite(read_suite(path), tmp_path / "out", resume=True)
        assert again.exit_code == 0 and spec.requests == 4  # nothing left: not measured again
    finally:
        await r1.cleanup()
        await r2.cleanup()
