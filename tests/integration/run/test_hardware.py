"""A run remembers its hardware (issue 38 item 5): each server's accelerator in meta.json (NVML, else
nvidia-smi restricted to the server's GPUs; none for a CPU engine), and the export files a run under its GPU
(``h200``), ``cpu`` for a CPU run or one from before the key, ``--gpu`` overriding."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from specbench.cli import main
from specbench.run import hardware
from specbench.run.hardware import read_accelerator
from specbench.suite import parse_suite, read_suite
from tests.support import suites
from tests.support.launchers import write_parallel_launcher
from tests.support.nvml import fake_nvidia_smi, fake_nvml
from tests.support.paths import DATA
from tests.support.runs import run_suite


def suite_of(configs, engine="vllm"):
    return parse_suite({"name": "s", "model": "m", "engine": engine, "configs": configs, "datasets": [{"name": "gsm8k"}]},
                       Path("s.yaml"))


@pytest.fixture
def no_nvml(monkeypatch, tmp_path):
    """Neither nvidia-ml-py nor nvidia-smi: a machine without an NVIDIA driver."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_nvml_names_the_servers_gpus(monkeypatch):
    nvml = fake_nvml({"0": "NVIDIA H200", "1": "NVIDIA H200", "2": "NVIDIA A100-SXM4-80GB"})
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    s = suite_of([{"name": "a", "gpus": "0,1"}])
    acc = read_accelerator(s, s.configs[0])
    assert acc.to_dict() == {"name": "NVIDIA H200", "count": 2, "memory_mib": 143771, "driver": "570.124.06",
                             "cuda": "12.8", "gpus": ["0", "1"], "source": "nvml"}
    assert acc.slug == "h200" and nvml.calls == {"init": 1, "shutdown": 1}


def test_without_nvml_nvidia_smi_is_asked_for_the_servers_gpus_only(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    folder = fake_nvidia_smi(tmp_path / "bin", "NVIDIA H100 80GB HBM3, 81559, 550.54.15\\nNVIDIA H100 80GB HBM3, 81559, 550.54.15\\n")
    monkeypatch.setenv("PATH", str(folder))
    s = suite_of([{"name": "a", "env": {"CUDA_VISIBLE_DEVICES": "2,3"}}])
    acc = read_accelerator(s, s.configs[0])
    assert acc.to_dict() == {"name": "NVIDIA H100 80GB HBM3", "count": 2, "memory_mib": 81559, "driver": "550.54.15",
                             "gpus": ["2", "3"], "source": "nvidia-smi"}
    assert (folder / "args").read_text().split() == ["--query-gpu=name,memory.total,driver_version",
                                                     "--format=csv,noheader,nounits", "-i", "2,3"]


def test_an_nvidia_smi_that_hangs_is_left_after_its_timeout(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(fake_nvidia_smi(tmp_path / "bin", "NVIDIA H200, 1, 1\\n", seconds=30)))
    monkeypatch.setattr(hardware, "SMI_TIMEOUT_S", 0.3)
    s = suite_of([{"name": "a", "gpus": "0"}])
    acc = read_accelerator(s, s.configs[0])
    assert acc.to_dict() == {"gpus": ["0"], "why": "GPU 0 not read: NVML: nvidia-ml-py is not installed; "
                                                    "nvidia-smi: no answer within 0.3 s"}
    assert acc.slug == "cpu"


def test_a_cpu_engine_has_no_accelerator_and_a_url_server_none_known(no_nvml):
    s = suite_of([{"name": "c", "engine": "vllm-cpu"}, {"name": "u", "url": "http://h:1"}])
    cpu, url = (read_accelerator(s, c).to_dict() for c in s.configs)
    assert cpu == {"count": 0, "source": "none", "why": "engine vllm-cpu runs on the CPU"}
    assert url["why"].startswith("server at a URL") and "count" not in url


def write_suite(tmp_path: Path, prompts_file: Path, engine: str, gpus: str | None) -> Path:
    config = {"name": "baseline", **({"gpus": gpus} if gpus else {})}
    return suites.write_suite(tmp_path / "suite.yaml", [config], name="hw", engine=engine, prompts=prompts_file,
                              requests=2, server={"startup_timeout_s": 60}, load={"concurrency": 1, "max_tokens": 5, "warmup": 1})


def exported(run: Path, root: Path, *extra: str) -> list[str]:
    assert main(["export", str(run), "-o", str(root), *extra]) == 0
    return sorted({p.relative_to(root).parts[1] for p in root.rglob("*.parquet")})


async def test_a_gpu_run_records_its_accelerator_and_exports_under_it(tmp_path, prompts_file, launchers, monkeypatch, capsys):
    write_parallel_launcher(launchers)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({"3": "NVIDIA H200"}))
    out = tmp_path / "run"
    assert (await run_suite(read_suite(write_suite(tmp_path, prompts_file, "fake", "3")), out)).exit_code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["servers"]["baseline"]["accelerator"] == {"name": "NVIDIA H200", "count": 1, "memory_mib": 143771,
                                                         "driver": "570.124.06", "cuda": "12.8", "gpus": ["3"],
                                                         "source": "nvml"}
    assert meta["server_starts"]["baseline"][0]["accelerator"]["name"] == "NVIDIA H200"
    capsys.readouterr()
    assert exported(out, tmp_path / "prof") == ["h200"]
    assert set(pd.read_parquet(tmp_path / "prof" / "runs").gpu) == {"h200"} and "note" not in capsys.readouterr().err
    assert exported(out, tmp_path / "given", "--gpu", "H200-SXM") == ["H200-SXM"]  # --gpu overrides
    assert main(["report", str(out), "--format", "parquet", "-o", str(tmp_path / "fmt")]) == 0  # the same export
    assert sorted({p.relative_to(tmp_path / "fmt").parts[1] for p in (tmp_path / "fmt").rglob("*.parquet")}) == ["h200"]


async def test_a_cpu_run_records_no_accelerator_and_exports_under_cpu(tmp_path, prompts_file, launchers, no_nvml, capsys):
    write_parallel_launcher(launchers)
    (launchers / "cpu.yaml").write_text(yaml.safe_dump({"extends": "fake", "name": "cpu", "gpu_env": None}))
    out = tmp_path / "run"
    assert (await run_suite(read_suite(write_suite(tmp_path, prompts_file, "cpu", None)), out)).exit_code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["servers"]["baseline"]["accelerator"] == {"count": 0, "source": "none", "why": "engine cpu runs on the CPU"}
    capsys.readouterr()
    assert exported(out, tmp_path / "prof") == ["cpu"] and "note" not in capsys.readouterr().err


def test_a_run_from_before_the_key_exports_under_cpu_and_says_so(tmp_path, capsys):
    run = DATA / "html" / "run"
    assert "accelerator" not in (run / "meta.json").read_text()
    assert exported(run, tmp_path / "prof") == ["cpu"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"specbench: note: {run}: meta.json records no accelerator (a run from before specbench recorded it): "
                   "labelled gpu=cpu; --gpu names it"]
    assert exported(run, tmp_path / "given", "--gpu", "a100") == ["a100"] and capsys.readouterr().err == ""
