"""A suite's load.arrival reaches the timed passes: a trace run sends one request per trace line at its time and
length, its cell is the trace's mean rate, and results.json, requests.jsonl and results.md carry the due times
and what they show."""

import json

from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.suites import write_suite

TRACE = "".join(json.dumps({"timestamp": t, "input_length": 8, "output_length": n, "hash_ids": [1]}) + "\n"
                for t, n in [(1000, 3), (1100, 5), (1100, 2), (1400, 7), (1600, 4)])


async def test_a_trace_run_sends_its_lines_and_reports_latency_from_the_schedule(tmp_path, prompts_file, scripted):
    server, url = await scripted(pattern=[1], ttft_s=0.005, gap_s=0.002)
    (tmp_path / "t.jsonl").write_text(TRACE)
    path = write_suite(tmp_path, [{"name": "baseline", "url": url}], name="arr", prompts=prompts_file,
                       load={"max_tokens": 64, "ignore_eos": True, "warmup": 0,
                             "arrival": {"kind": "trace", "path": str(tmp_path / "t.jsonl"), "time_scale": 0.5}})
    outcome = await run_suite(read_suite(path), tmp_path / "out")
    assert outcome.exit_code == 0
    [row] = json.loads((tmp_path / "out" / "results.json").read_text())
    assert row["request_rate"] == 13.33  # the trace's mean rate: 4 gaps over 0.3 s, to 4 significant digits
    assert row["requests"] == 5 and row["output_tokens"] == 3 + 5 + 2 + 7 + 4
    assert row["latency_from_schedule_mean_ms"] >= row["latency_mean_ms"]
    assert row["client_behind_schedule"] in (True, False) and row["client_behind_ms_p99"] >= 0
    assert sorted(body["max_tokens"] for body in server.bodies) == [2, 3, 4, 5, 7]
    lines = [json.loads(x) for x in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    measured = sorted((r for r in lines if r["phase"] == "measure"), key=lambda r: r["trace_line"])
    assert [r["trace_line"] for r in measured] == [1, 2, 3, 4, 5]
    assert [r["trace_output_length"] for r in measured] == [r["output_tokens"] for r in measured] == [3, 5, 2, 7, 4]
    due = [r["scheduled_time"] - measured[0]["scheduled_time"] for r in measured]
    assert [round(d, 9) for d in due] == [0.0, 0.05, 0.05, 0.2, 0.3]  # ms × time_scale 0.5
    assert all(r["send_time"] >= r["scheduled_time"] for r in measured)
    md = (tmp_path / "out" / "results.md").read_text()
    assert "Latency from schedule mean/p95" in md and "Arrivals: trace t.jsonl (mooncake, 5 requests over 0.3 s" in md

