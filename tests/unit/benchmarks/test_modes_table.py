"""benchmarks/gpu/modes_table.py: the mode-vs-mode table of docs/parallel.md, on synthetic run
directories whose numbers are known, and on the committed H200 parallel and sequential runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.paths import ROOT, RUNS

SCRIPT = ROOT / "benchmarks" / "gpu" / "modes_table.py"
H200 = RUNS / "modes_table"  # results/evidence/h200/{parallel_run1,sequential_run2}: results, meta, phases


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("modes_table", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


mt = _script()

#: (config, concurrency) → per-repeat tok/s; (config, concurrency) → per-repeat acceptance length
Tps = dict[tuple[str, int], Sequence[float | None]]
Accept = dict[tuple[str, int], list[float]]


def write_run(path: Path, tps: Tps, accept: Accept | None = None, *, env_gpus: dict[str, str] | None = None,
              placed: dict[str, str] | None = None, nvml: dict[str, list[str]] | None = None,
              interrupted: set[tuple[str, int, int]] | None = None, starts: dict[str, list[str]] | None = None,
              total_s: float | None = None, cis: dict[tuple[str, int], tuple[float, list[float], str, bool]] | None = None
              ) -> Path:
    """A run directory as specbench writes one, reduced to the keys the table reads (``starts``: each server
    start's CUDA_VISIBLE_DEVICES per config; ``cis``: a row's speedup, its CI, its method and ``speedup_varies``)."""
    path.mkdir(parents=True)
    accept = accept or {}
    rows, phases = [], []
    for (config, conc), reps in tps.items():
        values = [v for v in reps if v is not None]
        rows.append({"dataset": "gsm8k", "run": config, "method": "baseline" if config == "baseline" else "dspark",
                     "concurrency": conc, "request_rate": None, "repeats": len(reps), "status": "ok",
                     "output_throughput_tps": sum(values) / len(values) if values else None,
                     "output_throughput_tps_repeats": list(reps) if len(reps) > 1 else None,
                     "mean_acceptance_length": None})
        if cis and (config, conc) in cis:
            speedup, ci, method, varies = cis[(config, conc)]
            rows[-1].update(speedup_vs_baseline=speedup, ci95={"speedup_vs_baseline": ci}, speedup_ci_method=method,
                            speedup_varies=varies)
        for i in range(len(reps)):
            lengths = accept.get((config, conc))
            phases.append({"config": config, "dataset": "gsm8k", "concurrency": conc, "request_rate": None,
                           "repeat": i, "wall_s": 1.0,
                           "acceptance": {"mean_acceptance_length": lengths[i]} if lengths else {},
                           "telemetry": {"gpus": nvml[config]} if nvml and config in nvml else {},
                           "interrupted": (config, conc, i) in (interrupted or set()), "server_died": False})
    servers = {c: {"engine": "vllm", "env": {"CUDA_VISIBLE_DEVICES": g}} for c, g in (env_gpus or {}).items()}
    meta: dict[str, Any] = {"servers": servers}
    if placed:
        meta["parallel"] = {"mode": "gpus", "configs": {c: {"gpus": g} for c, g in placed.items()}}
    if starts:
        meta["server_starts"] = {c: [{"start": i, "env": {"CUDA_VISIBLE_DEVICES": g}} for i, g in enumerate(gs)]
                                 for c, gs in starts.items()}
        meta["server_launches"] = {c: len(gs) for c, gs in starts.items()}
    if total_s is not None:
        meta["timing"] = {"total_s": total_s}
    (path / "results.json").write_text(json.dumps(rows))
    (path / "phases.jsonl").write_text("".join(json.dumps(p) + "\n" for p in phases))
    (path / "meta.json").write_text(json.dumps(meta))
    return path


def table_rows(text: str) -> list[dict[str, str]]:
    """The first markdown table of ``text`` as dicts keyed by its header."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    header, body = cells[0], cells[2:]
    assert all(len(row) == len(header) for row in body)
    return [dict(zip(header, row)) for row in body]


def row_of(text: str, load: str, config: str = "spec") -> dict[str, str]:
    found = [r for r in table_rows(text) if r["Load"] == load and r["Config"] == config]
    assert len(found) == 1, text
    return found[0]


BASE = [100.0, 100.0, 100.0]


@pytest.fixture
def two_modes(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    """parallel and sequential, 2 runs × 3 repeats each: at C=1 the modes agree, at C=16 they do not."""
    parallel = [
        write_run(tmp_path / "p1", {("baseline", 1): BASE, ("spec", 1): [200.0, 210.0, 190.0],
                                    ("baseline", 16): BASE, ("spec", 16): [200.0, 201.0, 199.0]},
                  {("spec", 1): [3.0, 3.1, 2.9], ("spec", 16): [3.0, 3.0, 3.0]},
                  env_gpus={"baseline": "0", "spec": "1"}, placed={"baseline": "0", "spec": "1"}),
        write_run(tmp_path / "p2", {("baseline", 1): BASE, ("spec", 1): [205.0, 195.0, 200.0],
                                    ("baseline", 16): BASE, ("spec", 16): [200.0, 200.0, 200.0]},
                  {("spec", 1): [3.0, 3.05, 2.95], ("spec", 16): [3.0, 3.0, 3.0]},
                  env_gpus={"baseline": "0", "spec": "1"}, placed={"baseline": "0", "spec": "1"}),
    ]
    sequential = [
        write_run(tmp_path / "s1", {("baseline", 1): BASE, ("spec", 1): [202.0, 208.0, 192.0],
                                    ("baseline", 16): BASE, ("spec", 16): [250.0, 251.0, 249.0]},
                  {("spec", 1): [3.0, 3.1, 2.9], ("spec", 16): [3.5, 3.5, 3.5]}, nvml={"baseline": ["0"], "spec": ["0"]}),
        write_run(tmp_path / "s2", {("baseline", 1): BASE, ("spec", 1): [198.0, 204.0, 196.0],
                                    ("baseline", 16): BASE, ("spec", 16): [250.0, 250.0, 250.0]},
                  {("spec", 1): [3.0, 3.05, 2.95], ("spec", 16): [3.5, 3.5, 3.5]}, nvml={"baseline": ["0"], "spec": ["0"]}),
    ]
    return parallel, sequential


def render(*modes: tuple[str, list[Path]]) -> str:
    return mt.render([mt.summarize_mode(name, [mt.read_run(p) for p in paths]) for name, paths in modes])


def test_modes_that_agree_are_within_the_repeat_spread(two_modes) -> None:
    parallel, sequential = two_modes
    row = row_of(render(("parallel", parallel), ("sequential", sequential)), "C=1")
    assert row["parallel speedup mean (min–max, n)"] == "2.00× (1.90–2.10, n=6)"
    assert row["sequential speedup mean (min–max, n)"] == "2.00× (1.92–2.08, n=6)"
    assert row["Δ speedup"] == "+0.0 %"
    assert row["Repeat spread"] == "10.0 %"  # parallel's (2.10 − 1.90) ÷ 2.00, the larger of the two
    assert row["Verdict"] == "within spread"
    assert row["parallel accept len"] == "3.000 (2.900–3.100, n=6)"
    assert row["Accept verdict"] == "within spread"


def test_modes_that_differ_are_outside_the_repeat_spread(two_modes) -> None:
    parallel, sequential = two_modes
    row = row_of(render(("parallel", parallel), ("sequential", sequential)), "C=16")
    assert row["Δ speedup"] == "+25.0 %"
    assert row["Repeat spread"] == "1.0 %"
    assert row["Verdict"] == "outside spread"
    assert row["Δ accept len (spread)"] == "+16.7 % (0.0 %)"
    assert row["Accept verdict"] == "outside spread"
    reverse = row_of(render(("sequential", sequential), ("parallel", parallel)), "C=16")
    assert reverse["Δ speedup"] == "−20.0 %"  # second minus first, as a share of the first


def test_speedups_pair_repeats_by_index_within_one_run(tmp_path: Path) -> None:
    run = mt.read_run(write_run(tmp_path / "r", {("baseline", 1): [100.0, 200.0], ("spec", 1): [300.0, 300.0]}))
    speedups, notes = mt.repeat_speedups(run)
    assert speedups == {mt.Cell("spec", "gsm8k", 1): [3.0, 1.5]} and notes == []


def test_one_repeat_rows_use_their_throughput_and_have_no_spread(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {("baseline", 1): [100.0], ("spec", 1): [250.0]}, {("spec", 1): [4.0]})
    b = write_run(tmp_path / "b", {("baseline", 1): [100.0], ("spec", 1): [200.0]}, {("spec", 1): [4.0]})
    row = row_of(render(("one", [a]), ("two", [b])), "C=1")
    assert row["one speedup mean (min–max, n)"] == "2.50× (n=1)"
    assert row["Δ speedup"] == "−20.0 %"
    assert (row["Repeat spread"], row["Verdict"]) == ("—", "—")
    pooled = row_of(render(("both", [a, b]), ("again", [b, a])), "C=1")  # two one-repeat runs: n=2, a spread
    assert pooled["both speedup mean (min–max, n)"] == "2.25× (2.00–2.50, n=2)"
    assert (pooled["Repeat spread"], pooled["Verdict"]) == ("22.2 %", "within spread")


def test_gpus_from_meta_and_from_nvml(tmp_path: Path) -> None:
    env = mt.read_run(write_run(tmp_path / "env", {("baseline", 1): [1.0], ("spec", 1): [2.0]},
                                env_gpus={"baseline": "0", "spec": "1,2"}))
    placed = mt.read_run(write_run(tmp_path / "placed", {("baseline", 1): [1.0], ("spec", 1): [2.0]},
                                   placed={"baseline": "3", "spec": "4"}, nvml={"spec": ["5"]}))
    nvml = mt.read_run(write_run(tmp_path / "nvml", {("baseline", 1): [1.0], ("spec", 1): [2.0]}, nvml={"spec": ["0"]}))
    unknown = mt.read_run(write_run(tmp_path / "unknown", {("baseline", 1): [1.0], ("spec", 1): [2.0]}))
    assert mt.run_gpus(env, "spec") == "baseline 0, spec 1+2"
    assert mt.run_gpus(placed, "spec") == "baseline 3, spec 4 (NVML 5)"
    assert mt.run_gpus(nvml, "spec") == "baseline —, spec 0 (NVML)"
    assert mt.run_gpus(unknown, "spec") is None
    row = row_of(render(("a", [tmp_path / "env", tmp_path / "unknown"]), ("b", [tmp_path / "unknown"])), "C=1")
    assert row["GPUs a"] == "baseline 0, spec 1+2; —"
    assert row["GPUs b"] == "—"


def test_restart_starts_given_different_gpus_show_each_start(tmp_path: Path) -> None:
    """Issue 40: a parallel load.restart run turns the GPUs each round; the table says which each start had."""
    run = mt.read_run(write_run(tmp_path / "r", {("baseline", 1): [1.0] * 3, ("spec", 1): [2.0] * 3},
                                env_gpus={"baseline": "0", "spec": "1"},
                                starts={"baseline": ["0", "1", "0"], "spec": ["1", "0", "1"]}))
    assert mt.run_gpus(run, "spec") == "baseline 0/1/0, spec 1/0/1"
    same = mt.read_run(write_run(tmp_path / "s", {("baseline", 1): [1.0] * 2, ("spec", 1): [2.0] * 2},
                                 env_gpus={"baseline": "0", "spec": "0"}, starts={"baseline": ["0", "0"], "spec": ["0", "0"]}))
    assert mt.run_gpus(same, "spec") == "baseline 0, spec 0"


def test_per_run_table_gives_wall_time_starts_and_each_runs_own_ci(tmp_path: Path, capsys) -> None:
    method = "Student-t on the log scale over 3 paired server starts"
    par = write_run(tmp_path / "par", {("baseline", 1): BASE, ("spec", 1): [200.0, 210.0, 190.0]},
                    starts={"baseline": ["0", "1", "0"], "spec": ["1", "0", "1"]}, total_s=610.4,
                    cis={("spec", 1): (2.0, [1.8, 2.2], method, False)})
    seq = write_run(tmp_path / "seq", {("baseline", 1): BASE, ("spec", 1): [150.0, 260.0, 190.0]},
                    starts={"baseline": ["0"] * 3, "spec": ["0"] * 3}, total_s=1234.0,
                    cis={("spec", 1): (1.97, [1.2, 3.1], method, True)})
    assert mt.main(["--mode", "parallel", str(par), "--mode", "sequential", str(seq), "--runs"]) == 0
    text = capsys.readouterr().out
    runs = text.split("**How computed.**")[1]
    rows = table_rows(runs)
    assert [(r["Mode"], r["Run"], r["Wall time"], r["Server starts"], r["Speedup [95 % CI]"], r["CI over"]) for r in rows] == [
        ("parallel", "par", "610 s", "6", "2.00× [1.80, 2.20]", method),
        ("sequential", "seq", "1,234 s", "6", "1.97× [1.20, 3.10] ⚠", method)]
    assert "**Per run.**" in text
    assert "**Per run.**" not in render(("parallel", [par]), ("sequential", [seq]))  # only when asked


def test_incomplete_phases_do_not_count_for_acceptance(tmp_path: Path) -> None:
    run = mt.read_run(write_run(tmp_path / "r", {("baseline", 1): [1.0, 1.0], ("spec", 1): [2.0, 2.0]},
                                {("spec", 1): [3.0, 9.0]}, interrupted={("spec", 1, 1)}))
    assert mt.repeat_acceptance(run.phases) == {mt.Cell("spec", "gsm8k", 1): [3.0]}


def test_a_cell_one_mode_lacks_is_dashes_with_a_note(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {("baseline", 1): [100.0], ("spec", 1): [200.0],
                                   ("baseline", 64): [100.0], ("spec", 64): [300.0]}, {("spec", 64): [5.0]})
    b = write_run(tmp_path / "b", {("baseline", 1): [100.0], ("spec", 1): [200.0]})
    text = render(("parallel", [a]), ("sequential", [b]))
    row = row_of(text, "C=64")
    assert row["parallel speedup mean (min–max, n)"] == "3.00× (n=1)"
    assert row["sequential speedup mean (min–max, n)"] == "—"
    assert row["sequential accept len"] == "—"
    assert (row["Δ speedup"], row["Verdict"], row["GPUs sequential"]) == ("—", "—", "—")
    assert "- gsm8k / C=64 / spec: not in the sequential runs; its columns are —" in text


def test_missing_numbers_are_dashes_never_zero(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {("baseline", 1): [100.0], ("spec", 1): [None]})
    row = row_of(render(("only", [a])), "C=1")
    assert row["only speedup mean (min–max, n)"] == "—"
    assert row["only accept len"] == "—"
    assert "0" not in row["Speedup spread"] + row["Accept len spread"]


def test_one_mode_shows_its_spread_only(two_modes) -> None:
    parallel, _ = two_modes
    text = render(("parallel", parallel))
    row = row_of(text, "C=1")
    assert list(row) == ["Data set", "Load", "Config", "parallel speedup mean (min–max, n)", "Speedup spread",
                         "parallel accept len", "Accept len spread", "GPUs parallel"]
    assert (row["Speedup spread"], row["GPUs parallel"]) == ("10.0 %", "baseline 0, spec 1")
    assert "Δ" not in text.split("**How computed.**")[0]


def test_a_missing_run_dir_is_one_line_and_exit_2(tmp_path: Path, two_modes, capsys) -> None:
    parallel, _ = two_modes
    missing = tmp_path / "nope"
    assert mt.main(["--mode", "parallel", *map(str, parallel), "--mode", "sequential", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"modes_table: error: {missing}: no such run directory\n"


def test_an_unreadable_results_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text("[{")
    assert mt.main(["--mode", "x", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(broken / "results.json") in err and "Traceback" not in err


def test_cli_end_to_end_writes_the_table_and_how_computed(tmp_path: Path, two_modes, capsys) -> None:
    parallel, sequential = two_modes
    out = tmp_path / "table.md"
    argv = ["--mode", "parallel", *map(str, parallel), "--mode", "sequential", *map(str, sequential), "-o", str(out)]
    assert mt.main(argv) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text()
    assert len(table_rows(text)) == 2 and len(table_rows(text)[0]) <= 14
    assert row_of(text, "C=1")["GPUs sequential"] == "baseline 0 (NVML), spec 0 (NVML)"
    assert "**How computed.**" in text and "|Δ| ≤ that spread" in text
    assert mt.main(argv[:-2]) == 0
    assert capsys.readouterr().out == text


def test_committed_h200_parallel_vs_sequential() -> None:
    text = render(("parallel", [H200 / "parallel_run1"]), ("sequential", [H200 / "sequential_run2"]))
    rows = [r for r in table_rows(text) if r["Data set"] == "gsm8k" and r["Config"] == "dspark_k7"]
    assert [r["Load"] for r in rows] == ["C=1", "C=16", "C=64"]
    assert all(r["GPUs parallel"] == "baseline 0, dspark_k7 1" for r in rows)
    assert all(r["GPUs sequential"] == "—" for r in rows)
    assert rows[0]["parallel speedup mean (min–max, n)"] == "2.27× (n=1)"
    assert rows[0]["sequential accept len"] == "5.109 (n=1)"
