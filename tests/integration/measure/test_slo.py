"""Goodput at an SLO and the highest Poisson rate that meets it (specbench/measure/slo.py)."""

import asyncio
import json
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.errors import SuiteError
from specbench.measure.slo import attach_capacity, meets, percentile_check, slo_summary
from specbench.run.rate_search import search_max_rate
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_group import written
from specbench.schemas.row_read import rows_from
from specbench.schemas.slo_search import SloProbe, SloSearch
from specbench.suite import parse_suite, read_suite
from specbench.suite.objectives import RateSearch, Slo, parse_percentile
from tests.support import suites
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import baseline_and_spec


def rec(ttft: float, latency: float, tokens: int, ok: bool = True, pid: str = "p") -> RequestRecord:
    r = RequestRecord(prompt_id=pid, dataset="d", config="c", send_time=10.0, output_tokens=tokens)
    if ok:
        r.chunk_times = [10.0 + ttft, 10.0 + latency]
        r.chunk_tokens = [1, tokens - 1]
    else:
        r.error = "HTTP 500: boom"
    return r


def base_suite(**load) -> dict:
    return {"name": "s", "model": "m", "configs": [{"name": "baseline", "url": "http://127.0.0.1:1"}],
            "datasets": [{"name": "gsm8k"}], "load": load}


# ---- suite validation: one line per problem, naming the key ----------------------------------

@pytest.mark.parametrize("slo, message", [
    ({"ttft": 200}, "load.slo.ttft: unknown key (allowed: ttft_ms, tpot_ms, latency_ms)"),
    ({"tpot_ms": -5}, "load.slo.tpot_ms: expected a positive number of milliseconds, got -5"),
    ({"latency_ms": "fast"}, "load.slo.latency_ms: expected a positive number of milliseconds, got 'fast'"),
    ({}, "load.slo: expected a mapping with at least one of ttft_ms, tpot_ms, latency_ms"),
])
def test_bad_slo_is_one_line_naming_the_key(slo, message):
    with pytest.raises(SuiteError) as err:
        parse_suite(base_suite(slo=slo), Path("suite.yaml"))
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_slo_subset_and_search_parse():
    suite = parse_suite(base_suite(slo={"ttft_ms": 200, "tpot_ms": 50}, max_rate_at_slo="P95"), Path("s.yaml"))
    assert suite.load.slo == Slo(ttft_ms=200.0, tpot_ms=50.0)
    assert suite.load.rate_search == RateSearch(percentile=95.0)
    full = parse_suite(base_suite(slo={"latency_ms": 1000},
                                  max_rate_at_slo={"percentile": 99, "max_steps": 5, "start_rate": 2}), Path("s.yaml"))
    assert full.load.rate_search == RateSearch(99.0, 5, 2.0)


@pytest.mark.parametrize("load, message", [
    ({"max_rate_at_slo": "p99"}, "load.max_rate_at_slo: needs load.slo"),
    ({"slo": {"ttft_ms": 1}, "max_rate_at_slo": "fast"}, "load.max_rate_at_slo: expected a percentile such as p99, got 'fast'"),
    ({"slo": {"ttft_ms": 1}, "max_rate_at_slo": {"max_steps": 1}}, "load.max_rate_at_slo.max_steps: expected an integer from 2 to 50"),
    ({"slo": {"ttft_ms": 1}, "max_rate_at_slo": "p120"}, "expected a percentile between 0 and 100"),
])
def test_bad_search_settings(load, message):
    with pytest.raises(SuiteError, match=message):
        parse_suite(base_suite(**load), Path("suite.yaml"))


def test_percentile_spellings():
    assert parse_percentile("p99") == parse_percentile("P99") == parse_percentile(99) == 99.0
    assert parse_percentile("99.9") == 99.9


# ---- per request and per cell -----------------------------------------------------------------

def test_meets_every_bound_and_failed_requests_are_misses():
    slo = Slo(ttft_ms=100, tpot_ms=20, latency_ms=1000)
    good = rec(0.05, 0.5, 26)  # TPOT = 450 ms / 25 = 18 ms
    slow_decode = rec(0.05, 0.8, 26)  # TPOT 30 ms
    slow_first = rec(0.15, 0.5, 26)
    one_token = rec(0.05, 0.05, 1)  # no TPOT: that bound does not apply
    failed = rec(0, 0, 0, ok=False)
    assert [meets(r, slo) for r in (good, slow_decode, slow_first, one_token, failed)] == [True, False, False, True, False]
    out = slo_summary([good, slow_decode, slow_first, one_token, failed], 4.0, slo)
    assert out is not None
    assert out.slo_attainment == pytest.approx(2 / 5)  # the failed request is in the denominator
    assert out.goodput_rps == pytest.approx(2 / 4.0)
    assert out.slo_met_requests == 2 and out.slo == {"ttft_ms": 100, "tpot_ms": 20, "latency_ms": 1000}
    assert list(written(out)) == ["slo", "slo_attainment", "slo_met_requests", "goodput_rps"]  # results.json's order
    assert slo_summary([good], 1.0, None) is None  # not asked: no keys, no columns


def test_percentile_check_counts_failures_as_infinite():
    slo = Slo(ttft_ms=100)
    fast = [rec(0.001 * (i + 1), 0.5, 10, pid=str(i)) for i in range(99)]  # TTFT 1..99 ms
    ok, p = percentile_check(fast + [rec(0, 0, 0, ok=False)], slo, 99)
    assert ok is True and p["ttft_ms"] == pytest.approx(99)  # 99 of 100 within the bound: p99 holds
    ok, p = percentile_check(fast[1:] + [rec(0, 0, 0, ok=False)] * 2, slo, 99)
    assert ok is False and p["ttft_ms"] is None  # 2 of 100 failed: the p99 is a miss
    ok, p = percentile_check(fast[:-1] + [rec(0.2, 0.5, 10)] * 2, slo, 99)
    assert ok is False and p["ttft_ms"] == pytest.approx(200)  # 2 of 100 too slow
    assert percentile_check([], slo, 99)[0] is False


# ---- the search ---------------------------------------------------------------------------------

def threshold_probe(capacity: float, calls: list):
    async def probe(rate):
        calls.append(rate)
        return SloProbe(rate=rate, ok=rate <= capacity)
    return probe


@pytest.mark.parametrize("capacity", [0.3, 7.3, 100.0])
async def test_search_brackets_a_known_capacity(capacity):
    calls: list[float] = []
    out = await search_max_rate(threshold_probe(capacity, calls), RateSearch(99, max_steps=16, start_rate=1.0, tolerance=0.02))
    lo, hi = out.bracket
    assert lo <= capacity < hi and out.max_rate_rps == lo
    assert hi / lo - 1 <= 0.02 and out.converged is True
    assert out.steps == len(calls) <= 16 and [p.rate for p in out.probes] == calls


async def test_search_stops_after_max_steps_with_an_open_bracket():
    calls: list[float] = []
    out = await search_max_rate(threshold_probe(1e9, calls), RateSearch(99, max_steps=4, start_rate=1.0))
    assert calls == [1, 2, 4, 8] and out.bracket == [8, None] and out.converged is False
    calls.clear()
    out = await search_max_rate(threshold_probe(1e-9, calls), RateSearch(99, max_steps=3, start_rate=1.0))
    assert calls == [1, 0.5, 0.25] and out.max_rate_rps is None and out.bracket == [None, 0.25]
    assert out.to_dict()["max_rate_rps"] is None  # written as null


async def test_search_stops_when_the_run_is_stopped():
    calls: list[float] = []

    async def probe(rate):
        calls.append(rate)
        return None if len(calls) == 2 else SloProbe(rate=rate, ok=True)

    out = await search_max_rate(probe, RateSearch(99, max_steps=8))
    assert out.interrupted is True and out.steps == 1 and out.max_rate_rps == 1.0


def test_capacity_speedup_and_the_range_its_brackets_allow():
    rows = rows_from([{"run": "baseline", "dataset": "d"}, {"run": "spec", "dataset": "d"}, {"run": "spec", "dataset": "other"}])
    searches = {"baseline": {"d": SloSearch(99, 4.0, [4.0, 5.0], 6)}, "spec": {"d": SloSearch(99, 10.0, [10.0, 11.0], 7)}}
    attach_capacity(rows, searches, "baseline")
    assert rows[1].slo_capacity_speedup == pytest.approx(2.5)
    assert rows[1].slo_capacity_speedup_range == pytest.approx([2.0, 2.75])
    assert rows[0].slo_capacity_speedup == pytest.approx(1.0)
    assert not rows[2].has("slo_max_rate_rps")  # not searched: no keys


# ---- against scripted servers with a known capacity -----------------------------------------

# one slot each; 2 ms prefill, 2 ms per step, 22 tokens: the baseline decodes 21 steps (44 ms a
# request: 22.7 req/s at most), the spec config 9 steps (20 ms: 50 req/s at most)
MAX_TOKENS = 22


def write_suite(tmp_path: Path, urls: dict[str, str], **load) -> Path:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}", "category": f"c{i % 2}"}) + "\n" for i in range(20)))
    return suites.write_suite(tmp_path, baseline_and_spec(urls["baseline"], urls["spec"]), name="slo", prompts=prompts,
                              load={"concurrency": 1, "max_tokens": MAX_TOKENS, "warmup": 0, **load})


@pytest.fixture
async def slotted():
    base, base_runner, base_url = await start(Script(pattern=[1], ttft_s=0.002, gap_s=0.002, capacity=1))
    spec, spec_runner, spec_url = await start(Script(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.002, capacity=1))
    yield {"baseline": base_url, "spec": spec_url}
    await base_runner.cleanup()
    await spec_runner.cleanup()


async def test_max_rate_at_slo_on_servers_with_known_capacity(tmp_path, slotted):
    path = write_suite(tmp_path, slotted, slo={"ttft_ms": 60},
                       max_rate_at_slo={"percentile": 99, "max_steps": 7, "start_rate": 4})
    outcome = await run_suite(read_suite(path), tmp_path / "out")
    assert outcome.exit_code == 0
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    base, spec = meta["slo_search"]["baseline"]["prompts"], meta["slo_search"]["spec"]["prompts"]
    for found, capacity in ((base, 1 / 0.044), (spec, 1 / 0.020)):
        lo, hi = found["bracket"]
        assert found["steps"] <= 7 and lo is not None and hi is not None and lo < hi
        assert lo < capacity  # above capacity the queue grows without bound: the TTFT p99 cannot hold
        assert all(p["ok"] == (p["rate"] <= lo) for p in found["probes"])
    assert spec["max_rate_rps"] > base["max_rate_rps"]
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert rows["spec"]["slo_capacity_speedup"] == pytest.approx(spec["max_rate_rps"] / base["max_rate_rps"])
    assert rows["spec"]["slo_capacity_speedup"] > 1.2
    assert rows["baseline"]["slo_max_rate_bracket"] == base["bracket"]
    probes = [json.loads(line) for line in (tmp_path / "out" / "slo_probes.jsonl").read_text().splitlines()]
    assert len(probes) == 20 * (base["steps"] + spec["steps"]) and {p["phase"] for p in probes} == {"slo_probe"}
    assert all(r["phase"] != "slo_probe" for r in map(json.loads, (tmp_path / "out" / "requests.jsonl").read_text().splitlines()))
    assert rows["spec"]["requests"] == 20  # probe requests never reach the measured cells
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| Max rate @SLO p99 req/s |" in md and "| Capacity speedup @SLO |" in md and "| SLO met |" in md
    assert "SLO: TTFT ≤ 60 ms" in md


async def test_slo_attainment_counts_failed_requests(tmp_path):
    srv, runner, url = await start(Script(pattern=[1], ttft_s=0.002, gap_s=0.001, fault="http500", fault_on=(3,)))
    try:
        path = write_suite(tmp_path, {"baseline": url, "spec": url}, slo={"latency_ms": 5000})
        await run_suite(read_suite(path), tmp_path / "out")
    finally:
        await runner.cleanup()
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    base = rows["baseline"]
    assert base["failed_requests"] == 1 and base["slo_met_requests"] == 19
    assert base["slo_attainment"] == pytest.approx(19 / 20)
    assert base["goodput_rps"] == pytest.approx(19 / base["duration_s"])
    assert rows["spec"]["slo_attainment"] == 1.0


async def test_no_slo_no_columns(tmp_path, slotted):
    path = write_suite(tmp_path, slotted)
    await run_suite(read_suite(path), tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all("slo_attainment" not in r and "slo_max_rate_rps" not in r for r in rows)
    assert "SLO met" not in (tmp_path / "out" / "results.md").read_text()


async def test_cli_flag_needs_an_slo(tmp_path, slotted, capsys):
    path = write_suite(tmp_path, slotted)
    code = await asyncio.to_thread(main, ["run", str(path), "-o", str(tmp_path / "o"), "--max-rate-at-slo", "p99"])
    assert code == 2
    assert "load.slo: required by --max-rate-at-slo" in capsys.readouterr().err
    code = await asyncio.to_thread(main, ["run", str(path), "-o", str(tmp_path / "o"), "--max-rate-at-slo", "p99", "--parallel", "gpus"])
    assert code == 2


async def test_slo_at_an_open_loop_rate(tmp_path, slotted):
    path = write_suite(tmp_path, slotted, request_rate=[40, 80], slo={"latency_ms": 5000})
    await run_suite(read_suite(path), tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(rows) == 4 and {r["request_rate"] for r in rows} == {40.0, 80.0}
    for r in rows:  # each rate's own 20 requests and wall time, not the other rate's
        assert r["slo_met_requests"] == 20 and r["slo_attainment"] == 1.0
        assert r["goodput_rps"] == pytest.approx(20 / r["duration_s"])
