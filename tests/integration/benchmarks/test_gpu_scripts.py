"""benchmarks/gpu/*.py run as the H200 host runs them (``python benchmarks/gpu/X.py …``, the checkout on PYTHONPATH),
here on the CPU: a script that no longer runs against today's readers (stall_table.py's step-log reader change was
found only on the GPU host) fails here first. On a committed run copy (tests/data/runs/damaged/tokens_smol.tar.xz:
SmolLM2 on one H200, the step log at ``steps`` for baseline and ``tokens``, with GPU timing, for ngram_k3) and on
the trimmed H200 runs of tests/data/runs/modes_table; side_by_side.py and steplog_overhead.py drive a vLLM server,
so they get their table code, the suite they write and their start-up up to the server (a stand-in that exits).
The tables' numbers are the runs' own (step counts, a pass's tok/s), never a time measured here."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from specbench.suite import read_suite
from tests.support.damage import TOKENS_SMOL, copy_run
from tests.support.paths import PACKAGE_ENV, ROOT, RUNS

GPU = ROOT / "benchmarks" / "gpu"
STALL_HEADER = ("| Cell | Start | tok/s | Steps | Median step ms | Decode-only step ms | Prefill steps / tokens | "
                "Prefill steps' excess ms | Idle ms | Stall basis ms | Stalls n / ms / share | Stall causes (ms) | "
                "One-time events |")
SWING_HEADER = ("| Config | Start | Pass | Speedup (this start) | Steps | Step ms mean/p50/p95 | Fwd | LM head | Verify "
                "| Drafter | Gap | Drafter Σ ms | Longest drafter calls ms (s into the pass) |")


def script(name: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/gpu/<name> args`` with only the checkout on PYTHONPATH (a guard, not a speed limit)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | PACKAGE_ENV
    return subprocess.run([sys.executable, str(GPU / name), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), GPU / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tables(text: str) -> list[list[str]]:
    """The markdown tables in ``text``, each as its lines (header, delimiter, rows)."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            if not found or not found[-1] or not found[-1][-1].startswith("|"):
                found.append([])
            found[-1].append(line)
        elif found and found[-1]:
            found.append([])
    return [t for t in found if t]


def cells(line: str) -> int:
    return line.strip().strip("|").count("|") + 1


def assert_markdown_tables(text: str) -> None:
    """Every table's delimiter row has a cell per header cell (else a markdown renderer shows no table)."""
    found = tables(text)
    assert found
    for table in found:
        assert all(re.fullmatch(r" *:?-{3,}:? *", cell) for cell in table[1].strip().strip("|").split("|")), table[1]
        assert cells(table[1]) == cells(table[0]), table[:2]


@pytest.fixture(scope="module")
def tokens_smol(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_run(TOKENS_SMOL, tmp_path_factory.mktemp("runs") / "tokens_smol")


def test_stall_table_prints_a_row_per_timed_pass_from_the_step_log(tokens_smol: Path) -> None:
    done = script("stall_table.py", str(tokens_smol))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == STALL_HEADER
    # the cell, its server start, its tok/s (requests.jsonl's output tokens over the pass's wall time), its steps
    assert [line.split(" | ")[:4] for line in lines[2:4]] == [["| baseline / gsm8k / C=1", "s0", "399", "2814"],
                                                           ["| ngram_k3 / gsm8k / C=1", "s0", "269", "1895"]]
    assert "Share of the between-start variance" in done.stdout
    assert_markdown_tables(done.stdout)


def test_swing_table_prints_a_row_per_pass_with_the_gpu_timing(tokens_smol: Path) -> None:
    done = script("swing_table.py", str(tokens_smol))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == SWING_HEADER
    # baseline's log is at `steps` (no GPU rows): no step to time, dashes, never 0 ms
    assert lines[2].startswith("| baseline | s0 | gsm8k | — | 0 | —/—/— | — |")
    assert lines[3].split(" | ")[:5] == ["| ngram_k3", "s0", "gsm8k", "—", "1895"]
    assert_markdown_tables(done.stdout)
    only = script("swing_table.py", str(tokens_smol), "--config", "ngram_k3", "--slow-ms", "1")
    assert only.returncode == 0, only.stderr
    assert [line.split(" | ")[0] for line in only.stdout.splitlines()[2:]] == ["| ngram_k3"]


def test_modes_table_runs_as_run_h200_sh_calls_it(tmp_path: Path) -> None:
    out = tmp_path / "table.md"
    done = script("modes_table.py", "--mode", "parallel", str(RUNS / "modes_table" / "parallel_run1"),
                  "--mode", "sequential", str(RUNS / "modes_table" / "sequential_run2"), "--runs", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "| gsm8k | C=16 | dspark_k7 | 2.01× (n=1) | 1.70× (n=1) | −15.1 % |" in text
    assert "**How computed.**" in text
    assert_markdown_tables(text)


@pytest.mark.parametrize("name", ["side_by_side.py", "steplog_overhead.py", "stall_table.py", "swing_table.py",
                                  "modes_table.py"])
def test_help_runs_from_any_directory(name: str, tmp_path: Path) -> None:
    """The scripts import specbench from the checkout whatever the working directory (run_h200.sh cds around)."""
    done = script(name, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ")


def test_side_by_side_writes_suites_specbench_reads_and_a_table(tmp_path: Path) -> None:
    """side_by_side.py starts vLLM: its suites (one per server and load point) are ones the suite reader takes, and
    its table has a cell per column, a failed pass as one line, missing numbers as dashes."""
    sbs = load("side_by_side.py")
    for name, spec in sbs.SERVERS.items():
        suite = read_suite(str(sbs.write_suite(tmp_path, name, "http://127.0.0.1:1", spec, 16, 128, 16, "auto")))
        assert (suite.configs[0].method, suite.load.concurrency, suite.load.warmup) == (spec["method"], (16,), 16)
        assert (suite.load.client_processes, suite.load.ignore_eos, suite.load.max_tokens) == ("auto", True, 128)
    rows = [{"server": "ngram_k3", "c": 16, "client": "specbench", "rep": 0,
             "result": {"requests": 128, "output_throughput_tps": 1234.5, "ttft_mean_ms": 10.0, "ttft_p99_ms": None,
                        "mean_acceptance_length": 2.5, "timing": {"harness_share": 0.01}}},
            {"server": "ngram_k3", "c": 16, "client": "vllm bench serve", "rep": 0, "result": {"error": "boom"}}]
    text = sbs.table(rows)
    assert_markdown_tables(text)
    lines = text.splitlines()
    assert lines[2] == "| ngram_k3 | 16 | specbench | 0 | 128 | 1,234 | 10.00/— | —/— | —/— | 2.500 | — | 0.0100 | — |"
    assert lines[3] == "| ngram_k3 | 16 | vllm bench serve | 0 | failed: 'boom' |"


def test_steplog_overhead_table_from_known_passes() -> None:
    """Overhead = (off − level) ÷ off of the mean tok/s over the rounds; the noise is the spread of ``off``; a pass
    without a number is a dash."""
    slo = load("steplog_overhead.py")
    passes = [("off", 100.0, 110.0), ("steps", 105.0, 105.0), ("timing", 94.5, None)]
    runs = [{"model": "/m/smol", "round": r, "concurrency": 1, "level": level, "tps": tps[r], "tpot_ms": 2.0,
             "status": "ok", "sched_rows": 10, "gpu_rows": 5 if level == "timing" else 0}
            for level, *tps in passes for r in (0, 1)]
    md, summary = slo.table(runs)
    assert_markdown_tables(md)
    assert md.splitlines()[2:] == [
        "| smol | 1 | off | 100.0 / 110.0 | 105.0 | — | 9.52 % | 2.00 | 20 | 0 |",
        "| smol | 1 | steps | 105.0 / 105.0 | 105.0 | +0.00 % | 9.52 % | 2.00 | 20 | 0 |",
        "| smol | 1 | timing | 94.5 / — | 94.5 | +10.00 % | 9.52 % | 2.00 | 20 | 10 |"]
    assert [s["overhead_pct"] for s in summary] == [None, 0.0, pytest.approx(10.0)]


def test_steplog_overhead_starts_its_server_with_the_step_log_at_timing(tmp_path: Path) -> None:
    """Up to the vLLM server: ``--python`` is a stand-in that writes its command line and environment and exits 3;
    the script must have asked for the recorder at ``timing``, with the plugin folder on PYTHONPATH and a control
    file, then stop with one line naming the exit (no table written: nothing was measured)."""
    fake = tmp_path / "engine-python"
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/argv"\nenv > "$(dirname "$0")/env"\n'
                    'echo "RuntimeError: no CUDA device"\nexit 3\n')
    fake.chmod(0o755)
    done = script("steplog_overhead.py", "--python", str(fake), "--model", "/models/smol", "--args", "--max-model-len 64",
                  "--env", "VLLM_X=1", "--concurrency", "1", "--rounds", "1", "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert "server exited with 3 before /health: 'RuntimeError: no CUDA device' (log: " in done.stderr
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "/models/smol"]
    assert argv[-2:] == ["--max-model-len", "64"]
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines() if "=" in line)
    assert (env["SPECBENCH_STEPLOG"], env["VLLM_X"]) == ("timing", "1")
    assert env["SPECBENCH_STEPLOG_CONTROL"].endswith("control") and env["SPECBENCH_STEPLOG_DIR"].endswith("steplog")
    assert env["PYTHONPATH"].split(os.pathsep)[-1] == str(ROOT)
    # nothing was measured, so no table; the server's log outlives the work folder, beside where the table goes
    kept = list((tmp_path / "out").iterdir())
    assert [p.name.endswith("-server.log") for p in kept] == [True] and "no CUDA device" in kept[0].read_text()
    bad = script("steplog_overhead.py", "--model", "m", "--env", "NOPE")
    assert bad.returncode == 2 and "--env 'NOPE': expected KEY=VALUE" in bad.stderr
