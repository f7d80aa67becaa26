"""Load sweeps: concurrency lists, Poisson request-rate mode, the crossover, the profilings workload."""

import json

import pytest

from specbench.measure.compare import crossover
from specbench.measure.explained import sweep_of
from specbench.report.markdown import sweep_table
from specbench.schemas.row_read import rows_from
from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import write_e2e_suite as write_suite


def test_crossover_is_where_speedup_stays_below_one():
    assert crossover([(1, 1.8), (8, 1.3), (32, 0.95), (64, 0.7)]) == 32
    assert crossover([(1, 1.2), (8, 0.9), (32, 1.05)]) is None  # recovers: no lasting crossover
    assert crossover([(1, 0.9), (8, 0.8)]) == 1
    assert crossover([(1, 1.2), (8, None), (32, 0.9)]) == 32  # unmeasured points are skipped, not zeros


def test_sweep_table_marks_the_crossover():
    rows = [{"dataset": "d", "run": r, "concurrency": c, "speedup_vs_baseline": s}
            for r, pts in {"baseline": [(1, 1.0), (8, 1.0)], "spec": [(1, 1.5), (8, 0.8)]}.items() for c, s in pts]
    table = sweep_table(sweep_of(rows_from(rows)))
    assert "| d | spec | 1.500x | 0.800x | C=8 |" in table
    assert "baseline" not in table.split("\n", 3)[3]


def test_profilings_workload_sizes(tmp_path, prompts_file):
    from specbench.suite import LoadSpec

    load = LoadSpec(workload="profilings")
    assert [load.prompts_at(c, 10_000) for c in (1, 8, 32, 64, 128, 256, 16, 2)] == [22, 88, 128, 220, 440, 880, 64, 22]
    assert load.prompts_at(256, 100) == 100
    assert LoadSpec().prompts_at(256, 100) == 100


async def test_concurrency_sweep_and_rate_mode(tmp_path, prompts_file):
    base, r1, base_url = await start(Script(pattern=[1], gap_s=0.002))
    spec, r2, spec_url = await start(Script(pattern=[3], k=2, gap_s=0.002))
    try:
        urls = {"baseline": base_url, "spec": spec_url}
        sweep = read_suite(write_suite(tmp_path, prompts_file, urls, concurrency=[1, 3], warmup=0))
        await run_suite(sweep, tmp_path / "sweep")
        (tmp_path / "rate").mkdir()
        rate = read_suite(write_suite(tmp_path / "rate", prompts_file, urls, request_rate=[50.0], warmup=0))
        await run_suite(rate, tmp_path / "rate" / "out")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    rows = json.loads((tmp_path / "sweep" / "results.json").read_text())
    assert sorted((r["run"], r["concurrency"]) for r in rows) == [("baseline", 1), ("baseline", 3), ("ngram_k3", 1), ("ngram_k3", 3)]
    assert all(r["requests"] == 6 for r in rows)
    md = (tmp_path / "sweep" / "results.md").read_text()
    assert "Speedup vs concurrency" in md and "| prompts | ngram_k3 |" in md
    rate_rows = json.loads((tmp_path / "rate" / "out" / "results.json").read_text())
    assert {r["request_rate"] for r in rate_rows} == {50.0} and all(r["concurrency"] is None for r in rate_rows)
    spec_rate = next(r for r in rate_rows if r["run"] == "ngram_k3")
    assert spec_rate["speedup_vs_baseline"] is not None and spec_rate["requests"] == 6
    assert spec_rate["mean_acceptance_length"] == pytest.approx(3.0)


async def test_multi_process_load_generation_merges_consistent_clocks(tmp_path, prompts_file):
    spec, r2, spec_url = await start(Script(pattern=[1, 2, 4], k=3, gap_s=0.005))
    base, r1, base_url = await start(Script(pattern=[1], gap_s=0.005))
    try:
        suite = read_suite(write_suite(tmp_path, prompts_file, {"baseline": base_url, "spec": spec_url},
                                       concurrency=4, client_processes=2, warmup=0, max_tokens=22))
        await run_suite(suite, tmp_path / "out")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert rows["ngram_k3"]["requests"] == 6 and rows["baseline"]["requests"] == 6
    assert rows["ngram_k3"]["mean_acceptance_length"] == pytest.approx(1 + 12 / 9)  # same answer as one process
    assert rows["ngram_k3"]["stream_mean_acceptance_length"] == pytest.approx(21 / 9)
    records = [json.loads(l) for l in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    phases = [json.loads(l) for l in (tmp_path / "out" / "phases.jsonl").read_text().splitlines()]
    spec_records = [r for r in records if r["config"] == "ngram_k3"]
    # every request's times fall inside its phase's wall time: the processes share one monotonic clock
    sends = [r["send_time"] for r in spec_records]
    ends = [r["chunk_times"][-1] for r in spec_records]
    wall = next(p["wall_s"] for p in phases if p["config"] == "ngram_k3")
    assert max(ends) - min(sends) <= wall + 1e-3
    assert {r["concurrency"] for r in spec_records} == {4}


def test_client_processes_auto():
    from specbench.suite import LoadSpec

    assert LoadSpec(client_processes="auto").processes_at(1) == 1
    assert LoadSpec(client_processes="auto").processes_at(512) == min(2, __import__("os").cpu_count())
    assert LoadSpec(client_processes=3).processes_at(8) == 3
