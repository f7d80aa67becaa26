"""GPU energy, telemetry and cost (specbench/run/telemetry.py, specbench/measure/telemetry.py) through a fake NVML module."""

import json
import sys
import types
from pathlib import Path

import pytest

from specbench.errors import SuiteError
from specbench.launch.gpus import server_gpus
from specbench.measure import telemetry
from specbench.measure.telemetry import CostSummary, TelemetryWindow, cost_summary, telemetry_summary
from specbench.run import telemetry as meter_module
from specbench.run.telemetry import PhaseMeter
from specbench.suite import parse_suite, read_suite
from specbench.suite.objectives import Cost
from tests.support import suites
from tests.support.processes import wait_for
from tests.support.runs import run_suite
from tests.support.suites import baseline_and_spec


class NVMLError(Exception):
    pass


def fake_nvml(joules_per_read: dict, energy_error: Exception | None = None, backwards: bool = False):
    """A stand-in for nvidia-ml-py's ``pynvml``: each energy read of GPU g advances its counter by
    ``joules_per_read[g]`` J (so one phase = one start and one end read = exactly that much)."""
    mod = types.ModuleType("pynvml")
    mod.NVML_CLOCK_SM = 1
    mod.NVMLError = NVMLError
    mod.calls = {"init": 0, "shutdown": 0}
    counters = {g: 10_000_000 for g in joules_per_read}

    def init():
        mod.calls["init"] += 1

    def shutdown():
        mod.calls["shutdown"] += 1

    def by_index(i):
        if str(i) not in counters:
            raise NVMLError("Invalid Argument")
        return str(i)

    def energy(h):
        if energy_error:
            raise energy_error
        counters[h] += -1 if backwards else joules_per_read[h] * 1000
        return counters[h]

    mod.nvmlInit, mod.nvmlShutdown = init, shutdown
    mod.nvmlDeviceGetHandleByIndex = by_index
    mod.nvmlDeviceGetHandleByUUID = lambda u: by_index(u.removeprefix("GPU-"))
    mod.nvmlDeviceGetTotalEnergyConsumption = energy
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50 + int(h), memory=10)
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=(1000 + int(h)) * 2**20, total=80 * 2**30)
    mod.nvmlDeviceGetClockInfo = lambda h, clock: 1980 if clock == mod.NVML_CLOCK_SM else 0
    return mod


# ---- the meter ---------------------------------------------------------------------------------

def test_meter_reads_energy_over_the_window_and_samples(monkeypatch):
    nvml = fake_nvml({"0": 120.0, "1": 80.0})
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # the real import path: import pynvml, nvmlInit
    meter = PhaseMeter(["0", "GPU-1"], interval_s=0.01)
    util, reads = nvml.nvmlDeviceGetUtilizationRates, []
    nvml.nvmlDeviceGetUtilizationRates = lambda h: (reads.append(h), util(h))[1]
    meter.start()
    wait_for(lambda: len(reads) >= 2 * 4, 30, "a fourth sample begun (three taken)")  # not a guessed sleep
    window = meter.stop()
    out = window.to_dict()
    assert out["energy_j_per_gpu"] == [120.0, 80.0] and out["energy_j"] == 200.0
    assert out["gpus"] == ["0", "GPU-1"] and "telemetry_error" not in out
    samples = out["samples"]
    assert len(samples["t_s"]) >= 3 and samples["gpu_util_pct"][0] == [50.0, 51.0]
    assert samples["mem_used_mib"][0] == [1000.0, 1001.0] and samples["sm_clock_mhz"][0] == [1980.0, 1980.0]
    assert nvml.calls == {"init": 1, "shutdown": 1}
    assert meter.stop() is window  # idempotent


@pytest.mark.parametrize("case, reason", [
    ("no module", "nvidia-ml-py is not installed"),
    ("init fails", "NVML: NVMLError: Driver Not Loaded"),
    ("unknown gpu", "NVML: GPU ['7']: NVMLError: Invalid Argument"),
    ("no counter", "NVML energy counter: NVMLError: Not Supported"),
    ("backwards", "lower after the phase than before"),
])
def test_missing_energy_is_null_with_the_reason(monkeypatch, case, reason):
    gpus = ["0"]
    if case == "no module":
        monkeypatch.setitem(sys.modules, "pynvml", None)
    elif case == "init fails":
        nvml = fake_nvml({"0": 1.0})
        nvml.nvmlInit = lambda: (_ for _ in ()).throw(NVMLError("Driver Not Loaded"))
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
    elif case == "unknown gpu":
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({"0": 1.0}))
        gpus = ["7"]
    else:
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(
            {"0": 1.0}, energy_error=NVMLError("Not Supported") if case == "no counter" else None,
            backwards=case == "backwards"))
    meter = PhaseMeter(gpus, interval_s=0.01)
    meter.start()
    out = meter.stop()
    assert out.energy_j is None and reason in out.telemetry_error


def test_no_gpu_known_is_null_with_the_reason():
    out = PhaseMeter(None, "engine vllm-cpu runs on the CPU").stop().to_dict()
    assert out == {"gpus": None, "energy_j": None, "energy_j_per_gpu": None, "telemetry_error": "engine vllm-cpu runs on the CPU"}


# ---- which GPUs a server uses ------------------------------------------------------------------

def suite_of(configs, server=None, engine="vllm"):
    return parse_suite({"name": "s", "model": "m", "engine": engine, "configs": configs, "datasets": [{"name": "gsm8k"}],
                        "server": server or {}}, Path("s.yaml"))


def test_server_gpus(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    s = suite_of([{"name": "a", "gpus": "0,1"}, {"name": "b"}, {"name": "c", "args": ["--tensor-parallel-size", "4"]},
                  {"name": "d", "env": {"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}}, {"name": "e", "url": "http://h:1"},
                  {"name": "f", "url": "http://h:1", "gpus": "3"}, {"name": "g", "engine": "vllm-cpu"}])
    got = {c.name: server_gpus(s, c) for c in s.configs}
    assert got["a"] == (["0", "1"], None) and got["b"] == (["0"], None) and got["c"] == (["0", "1", "2", "3"], None)
    assert got["d"] == (["GPU-aa", "GPU-bb"], None) and got["f"] == (["3"], None)
    assert got["e"][0] is None and "configs[].gpus" in got["e"][1]
    assert got["g"] == (None, "engine vllm-cpu runs on the CPU")
    none = suite_of([{"name": "a"}], server={"gpus_per_server": 0})
    assert server_gpus(none, none.configs[0]) == (None, "the server uses no GPU (server.gpus_per_server: 0)")


# ---- per cell and cost --------------------------------------------------------------------------

def test_cell_summary_sums_repeats():
    w = {"gpus": ["0"], "energy_j": 50.0, "samples": {"gpu_util_pct": [[40.0], [60.0]], "mem_used_mib": [[100.0], [300.0]],
                                                      "sm_clock_mhz": [[1000.0], [2000.0]]}}
    out = telemetry_summary([TelemetryWindow.from_dict(w)] * 2, output_tokens=200)
    assert out.energy_j == 100.0 and out.joules_per_output_token == 0.5
    assert out.gpu_util_mean_pct == 50.0 and out.gpu_mem_used_max_mib == 300.0 and out.sm_clock_mean_mhz == 1500.0
    gone = {"gpus": ["0"], "energy_j": None, "telemetry_error": "NVML: gone"}
    broken = telemetry_summary([TelemetryWindow.from_dict(w), TelemetryWindow.from_dict(gone)], 200)
    assert broken.energy_j is None and broken.joules_per_output_token is None and broken.telemetry_error == "NVML: gone"
    assert telemetry_summary([], 10).telemetry_error.startswith("no telemetry recorded")


def test_utilisation_counts_only_samples_a_full_nvml_period_into_the_phase():
    """NVML averages utilisation over its last period: a 0.5 s phase on the H200 read 0 % twice while busy."""
    short = {"gpus": ["0"], "energy_j": 81.0, "samples": {"t_s": [0.028, 0.56], "gpu_util_pct": [[0.0], [0.0]],
                                                          "mem_used_mib": [[7.0], [7.0]], "sm_clock_mhz": [[1980.0], [1980.0]]}}
    out = telemetry_summary([TelemetryWindow.from_dict(short)], 100)
    assert out.gpu_util_mean_pct is None and out.energy_j == 81.0 and out.sm_clock_mean_mhz == 1980.0
    longer = {**short, "samples": {**short["samples"], "t_s": [0.02, 1.02, 1.52], "gpu_util_pct": [[95.0], [56.0], [60.0]]}}
    assert telemetry_summary([TelemetryWindow.from_dict(short), TelemetryWindow.from_dict(longer)], 100).gpu_util_mean_pct == 58.0


def test_cost_per_million_tokens():
    out = cost_summary(Cost(3.6), 2, None, 1000.0)  # 7.2 $/h for 3.6 M tokens/h
    assert out.usd_per_million_output_tokens == pytest.approx(2.0)
    assert cost_summary(Cost(3.6), None, "engine vllm-cpu runs on the CPU", 1000.0) == CostSummary(
        gpu_hour_usd=3.6, cost_gpus=None, usd_per_million_output_tokens=None, cost_error="engine vllm-cpu runs on the CPU")
    assert cost_summary(None, 1, None, 1.0) is None


@pytest.mark.parametrize("cost, message", [
    ({"gpu_hour_usd": 0}, "cost.gpu_hour_usd: expected a positive number, got 0"),
    ({"usd": 2}, "cost: expected a mapping with gpu_hour_usd"),
    (2.5, "cost: expected a mapping, got 2.5"),
])
def test_bad_cost(cost, message):
    with pytest.raises(SuiteError, match=message):
        parse_suite({"name": "s", "model": "m", "configs": [{"name": "b"}], "datasets": [{"name": "gsm8k"}], "cost": cost},
                    Path("s.yaml"))


# ---- end to end ----------------------------------------------------------------------------------

def write_suite(tmp_path: Path, prompts_file: Path, urls: dict[str, str], **extra) -> Path:
    base, spec = baseline_and_spec(urls["baseline"], urls["spec"])
    return suites.write_suite(tmp_path, [{**base, "gpus": "0"}, {**spec, "gpus": "1,2"}], name="energy", prompts=prompts_file,
                              requests=6, load={"concurrency": 2, "max_tokens": 22, "warmup": 1}, **extra)


async def test_energy_and_cost_per_cell(tmp_path, prompts_file, scripted, monkeypatch):
    _, base = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.002)
    _, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.002)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({"0": 264.0, "1": 33.0, "2": 33.0}))
    monkeypatch.setattr(meter_module, "SAMPLE_INTERVAL_S", 0.01)
    monkeypatch.setattr(telemetry, "UTIL_SETTLE_S", 0.0)
    await run_suite(read_suite(write_suite(tmp_path, prompts_file, {"baseline": base, "spec": spec},
                                           cost={"gpu_hour_usd": 3.6})), tmp_path / "out")
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    b, s = rows["baseline"], rows["spec"]
    assert b["energy_j"] == 264.0 and s["energy_j"] == 66.0  # one phase: one read at each end, warm-up outside
    assert b["joules_per_output_token"] == pytest.approx(264 / (6 * 22)) and s["joules_per_output_token"] == pytest.approx(0.5)
    assert s["energy_per_token_ratio_vs_baseline"] == pytest.approx(66 / 264)
    assert s["telemetry_gpus"] == ["1", "2"] and s["gpu_util_mean_pct"] == pytest.approx(51.5)
    assert b["usd_per_million_output_tokens"] == pytest.approx(3.6 / (b["output_throughput_tps"] * 3600) * 1e6)
    assert s["usd_per_million_output_tokens"] == pytest.approx(2 * 3.6 / (s["output_throughput_tps"] * 3600) * 1e6)
    assert s["cost_saving_vs_baseline"] == pytest.approx(1 - s["usd_per_million_output_tokens"] / b["usd_per_million_output_tokens"])
    phases = [json.loads(line) for line in (tmp_path / "out" / "phases.jsonl").read_text().splitlines()]
    assert all(p["telemetry"]["samples"]["sm_clock_mhz"] for p in phases)
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| J/token |" in md and "| 0.500 |" in md and "| $/M tok |" in md and "| Cost saving |" in md


async def test_without_nvml_no_energy_columns(tmp_path, prompts_file, scripted, monkeypatch):
    _, url = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    await run_suite(read_suite(write_suite(tmp_path, prompts_file, {"baseline": url, "spec": url})), tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all(r["energy_j"] is None and "nvidia-ml-py is not installed" in r["telemetry_error"] for r in rows)
    assert all("usd_per_million_output_tokens" not in r for r in rows)  # no cost: in the suite, no keys
    md = (tmp_path / "out" / "results.md").read_text()
    assert "J/token" not in md and "$/M tok" not in md
