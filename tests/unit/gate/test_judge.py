"""specbench gate: thresholds, the noise rule, exit codes and the step summary."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest

from specbench.cli.gate import register
from specbench.errors import SuiteError
from specbench.gate import (
    Check,
    GateError,
    GateSpec,
    Measure,
    Selector,
    evaluate,
    index_cells,
    judge_drop,
    judge_floor,
    parse_cli_threshold,
    render_markdown,
)
from specbench.schemas.row_read import read_row
from tests.support import paths

DATA = paths.DATA / "gate"
EXAMPLE = DATA / "results_example.json"
SUITE_META = {"name": "math_code_chat", "path": "suites/math_code_chat.yaml", "raw": {"name": "math_code_chat"}}
COMPARABILITY = {
    "suite": "math_code_chat", "model": "m", "endpoint": "chat", "max_tokens": 256, "temperature": 0.0,
    "configs": {"baseline": "aa11", "dspark_k3": "bb22"},
}


def cell(run: str, dataset: str = "math500", **metrics) -> dict:
    base = {
        "dataset": dataset,
        "run": run,
        "method": "baseline" if run == "baseline" else "dspark",
        "speedup_vs_baseline": 1.0,
        "mean_acceptance_length": None,
        "latency_p95_ms": 1000.0,
    }
    return base | metrics


def two_cells(speedup: float = 1.3, accept: float | None = 2.5, latency: float = 900.0) -> list[dict]:
    return [
        cell("baseline"),
        cell("dspark_k3", speedup_vs_baseline=speedup, mean_acceptance_length=accept, latency_p95_ms=latency),
    ]


def write_run(path: Path, records: list[dict], suite: dict | None = None, comparability: dict | None = None,
              meta: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.json").write_text(json.dumps(records))
    if meta:
        body = {"suite": suite or SUITE_META, "comparability": comparability or COMPARABILITY}
        (path / "meta.json").write_text(json.dumps(body))
    return path


def gate(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="specbench")
    register(parser.add_subparsers())
    args = parser.parse_args(["gate", *map(str, argv)])
    return args.func(args)


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# ------------------------------------------------------------------------------- exit codes


def test_pass_returns_0_and_prints_table(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells(speedup=1.3))
    ref = write_run(tmp_path / "ref", two_cells(speedup=1.32))
    code = gate(cand, "--reference", ref, "--min", "speedup_vs_baseline:dspark_k3=1.2",
                "--max-drop", "speedup_vs_baseline=5%")
    out = capsys.readouterr().out
    assert code == 0
    assert "### specbench gate: PASS" in out
    assert "| Metric | Config | Data set | Reference | Candidate | Change | Threshold | Verdict |" in out
    assert "| speedup_vs_baseline | dspark_k3 | math500 | 1.320 | 1.300 | -1.5% | drop ≤ 5% (≥ 1.254) | ✅ pass |" in out


def test_floor_regression_returns_1(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells(speedup=1.1))
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2") == 1
    captured = capsys.readouterr()
    assert "❌ FAIL" in captured.out
    assert captured.err.strip().count("\n") == 0
    assert "1 regression(s): dspark_k3 / math500: speedup_vs_baseline 1.100 vs ≥ 1.2" in captured.err


def test_drop_regression_returns_1(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells(accept=2.3))
    ref = write_run(tmp_path / "ref", two_cells(accept=2.5))
    assert gate(cand, "-r", ref, "--max-drop", "mean_acceptance_length=3%") == 1
    assert "-8.0%" in capsys.readouterr().out


def test_latency_drop_means_increase(tmp_path):
    ref = write_run(tmp_path / "ref", two_cells(latency=1000.0))
    slower = write_run(tmp_path / "slower", two_cells(latency=1110.0))
    faster = write_run(tmp_path / "faster", two_cells(latency=500.0))
    assert gate(slower, "-r", ref, "--max-drop", "latency_p95_ms:dspark_k3=10%") == 1
    assert gate(faster, "-r", ref, "--max-drop", "latency_p95_ms:dspark_k3=10%") == 0


def test_ceiling(tmp_path):
    cand = write_run(tmp_path / "cand", two_cells(latency=900.0))
    assert gate(cand, "--max", "latency_p95_ms:dspark_k3=950") == 0
    assert gate(cand, "--max", "latency_p95_ms=950") == 1


def test_within_noise_passes(capsys):
    code = gate(DATA / "candidate_noisy", "--reference", DATA / "reference")
    out = capsys.readouterr().out
    assert code == 0
    row = next(line for line in out.splitlines() if "within noise" in line and "speedup" in line)
    assert "| dspark_k3 | math500 | C=8 |" in row
    assert "-7.1%" in row
    assert "_within noise_" in out


def test_same_drop_without_ci_fails(tmp_path):
    def strip(name: str) -> Path:
        records = json.loads((DATA / name / "results.json").read_text())
        for r in records:
            r.pop("ci95")
        write_run(tmp_path / name, records, suite=json.loads((DATA / name / "meta.json").read_text())["suite"])
        return tmp_path / name

    assert gate(strip("candidate_noisy"), "-r", strip("reference")) == 1


def test_missing_cell_returns_2(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells()[:1])
    ref = write_run(tmp_path / "ref", two_cells())
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2") == 2
    assert "no cell for config 'dspark_k3'" in capsys.readouterr().err
    assert gate(cand, "-r", ref, "--max-drop", "speedup_vs_baseline=5%") == 2
    assert "cell dspark_k3 / math500 needed by --max-drop speedup_vs_baseline=5% is missing in the candidate" \
        in capsys.readouterr().err
    assert gate(ref, "-r", cand, "--max-drop", "speedup_vs_baseline=5%") == 2
    assert "missing in the reference" in capsys.readouterr().err


def test_concurrency_is_part_of_the_cell_key(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", [c | {"concurrency": 16} for c in two_cells()])
    ref = write_run(tmp_path / "ref", [c | {"concurrency": 8} for c in two_cells()])
    assert gate(cand, "-r", ref, "--max-drop", "speedup_vs_baseline:dspark_k3=5%") == 2
    assert "cell dspark_k3 / math500 / C=16 needed by" in capsys.readouterr().err


def test_mismatched_suites_return_2_naming_keys(tmp_path, capsys):
    changed = COMPARABILITY | {"max_tokens": 512, "configs": {"baseline": "aa11", "dspark_k3": "cc33"}}
    cand = write_run(tmp_path / "cand", two_cells(), comparability=changed)
    ref = write_run(tmp_path / "ref", two_cells())
    assert gate(cand, "-r", ref, "--max-drop", "speedup_vs_baseline=5%") == 2
    err = capsys.readouterr().err
    assert "comparability differs in configs.dspark_k3 ('cc33' vs 'bb22'), max_tokens (512 vs 256)" in err
    assert "baseline" not in err
    assert len(err.strip().splitlines()) == 1


def test_different_suite_name_returns_2(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells())
    other = COMPARABILITY | {"suite": "cpu_smoke"}
    ref = write_run(tmp_path / "ref", two_cells(), suite=SUITE_META | {"name": "cpu_smoke"}, comparability=other)
    assert gate(cand, "-r", ref, "--max-drop", "speedup_vs_baseline=5%") == 2
    err = capsys.readouterr().err
    assert "not comparable: suite name 'math_code_chat' vs 'cpu_smoke'" in err
    assert "comparability" not in err


def test_null_metric_where_needed_returns_2(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells(accept=None))
    assert gate(cand, "--min", "mean_acceptance_length:dspark_k3=1.5") == 2
    assert "mean_acceptance_length is null in candidate cell dspark_k3 / math500" in capsys.readouterr().err


def test_wildcard_skips_baseline_where_metric_is_meaningless(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells(speedup=1.3, accept=2.5))
    assert gate(cand, "--min", "speedup_vs_baseline=1.2", "--min", "mean_acceptance_length=2") == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "pass" in line]
    assert len(rows) == 2 and all("| baseline |" not in r for r in rows)


def test_failed_cell_returns_2(tmp_path, capsys):
    records = two_cells()
    records[1] |= {"status": "failed", "speedup_vs_baseline": None}
    cand = write_run(tmp_path / "cand", records)
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2") == 2
    assert "status 'failed'" in capsys.readouterr().err


def test_results_are_read_by_the_reports_loader_and_a_repair_refuses(tmp_path, capsys):
    """The report would show a damaged value as —; the gate, reading the same loader, refuses the run."""
    records = two_cells()
    records[0]["itl_mean_ms"] = "fast"
    cand = write_run(tmp_path / "cand", records)
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specbench gate: ") and "results.json: record 0 (baseline / math500): itl_mean_ms" in err
    assert len(err.splitlines()) == 1


def test_unusable_inputs_return_2(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells())
    assert gate(tmp_path / "nowhere") == 2
    assert "results file not found" in capsys.readouterr().err
    assert gate(cand) == 2
    assert "no thresholds" in capsys.readouterr().err
    assert gate(cand, "--max-drop", "speedup_vs_baseline=5%") == 2
    assert "needs --reference" in capsys.readouterr().err
    assert gate(cand, "--max-drop", "speedup_vs_baseline=5") == 2
    assert "expected a percentage like '5%'" in capsys.readouterr().err
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3@gsm8k=1.1") == 2


@pytest.mark.parametrize("side, metric, value, check", [
    ("reference", "speedup_vs_baseline", -0.5, ("--max-drop", "speedup_vs_baseline:dspark_k3=5%")),
    ("candidate", "speedup_vs_baseline", -2.0, ("--max", "speedup_vs_baseline:dspark_k3=3")),
    ("reference", "latency_p95_ms", -100.0, ("--max-drop", "latency_p95_ms:dspark_k3=5%")),
    ("candidate", "mean_acceptance_length", 0.2, ("--max", "mean_acceptance_length:dspark_k3=4")),
    ("candidate", "acceptance_rate", 1.7, ("--min", "acceptance_rate:dspark_k3=0.2")),
    ("candidate", "repeats", 0, ("--min", "speedup_vs_baseline:dspark_k3=1.2")),
    ("candidate", "requests", 10 ** 400, ("--min", "speedup_vs_baseline:dspark_k3=1.2")),
])
def test_a_value_outside_what_its_metric_can_be_is_exit_2_never_a_pass(tmp_path, capsys, side, metric, value, check):
    """A negative speedup in the reference once made every drop pass; an impossible value is unusable input."""
    bad = two_cells()
    bad[1] |= {metric: value, "ci95": {"speedup_vs_baseline": [1.2, 1.4]}}
    cand = write_run(tmp_path / "cand", bad if side == "candidate" else two_cells())
    ref = write_run(tmp_path / "ref", bad if side == "reference" else two_cells())
    assert gate(cand, "-r", ref, *check) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{tmp_path / ('cand' if side == 'candidate' else 'ref')}/results.json: record 1 (dspark_k3 / math500): {metric}: expected " in err


def test_the_judge_refuses_an_impossible_value_of_a_row_made_in_code():
    rows = [read_row(c, "rows", i) for i, c in enumerate(two_cells())]
    rows[1].speedup_vs_baseline = -1.0
    check = parse_cli_threshold("min", "speedup_vs_baseline:dspark_k3=1.2")
    with pytest.raises(GateError, match=r"speedup_vs_baseline in candidate cell dspark_k3 / math500 is -1.0: expected a number ≥ 0"):
        evaluate(check, index_cells(rows, "rows"), None)


@pytest.mark.parametrize("flag, text, words", [
    ("--max-drop", "speedup_vs_baseline=100%", "expected a drop below 100%"),
    ("--max-drop", "speedup_vs_baseline=250%", "expected a drop below 100%"),
    ("--max-drop", "output_throughput_tps=" + "9" * 400 + "%", "expected a drop below 100%"),
    ("--max-drop", "latency_p95_ms=1500%", "expected at most 1000%"),
    ("--min", "speedup_vs_baseline=-1", "expected a number ≥ 0"),
    ("--max", "acceptance_rate=1.5", "expected a number in [0, 1]"),
    ("--max", "latency_p95_ms=-5", "expected a number ≥ 0"),
])
def test_a_threshold_that_could_never_fail_or_pass_is_exit_2(tmp_path, capsys, flag, text, words):
    cand = write_run(tmp_path / "cand", two_cells())
    ref = write_run(tmp_path / "ref", two_cells())
    assert gate(cand, "-r", ref, flag, text) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and err.startswith(f"specbench gate: {flag} ")
    selector, value = text.split("=")  # the suite's gate: section says the same (YAML numbers for min/max)
    section = flag.strip("-").replace("-", "_")
    with pytest.raises(SuiteError, match="^suites/x.yaml: gate.") as info:
        GateSpec.from_mapping({section: {selector: value if section == "max_drop" else float(value)}}, "suites/x.yaml: gate")
    assert words in str(info.value)


def test_a_threshold_is_bounded_by_what_its_metric_can_be_and_its_ends_are_kept():
    assert parse_cli_threshold("max_drop", "speedup_vs_baseline=99%").value == pytest.approx(0.99)
    assert parse_cli_threshold("max_drop", "latency_p95_ms=1000%").value == pytest.approx(10.0)
    assert parse_cli_threshold("min", "acceptance_rate=0").value == 0
    assert parse_cli_threshold("max", "acceptance_rate=1").value == 1
    assert parse_cli_threshold("min", "acceptance_tokens_diff=-5").value == -5  # a difference: no range
    for kind, text in (("max_drop", "speedup_vs_baseline=100%"), ("max_drop", "latency_p95_ms=1001%"),
                       ("min", "acceptance_rate=-0.01"), ("max", "acceptance_rate=1.01")):
        with pytest.raises(GateError):
            parse_cli_threshold(kind, text)


def test_missing_meta_warns_but_judges(tmp_path, capsys):
    cand = write_run(tmp_path / "cand", two_cells(), meta=False)
    ref = write_run(tmp_path / "ref", two_cells())
    assert gate(cand / "results.json", "-r", ref / "results.json", "--max-drop", "speedup_vs_baseline=5%") == 0
    assert "warning: no meta.json beside" in capsys.readouterr().err


# --------------------------------------------------------------------------------- summary


def test_github_step_summary_is_appended(tmp_path, monkeypatch, capsys):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    cand = write_run(tmp_path / "cand", two_cells(speedup=1.1))
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2") == 1
    text = summary.read_text()
    assert text.startswith("# earlier step\n")
    assert "### specbench gate: FAIL" in text
    assert text.endswith(capsys.readouterr().out)


def test_summary_flag_and_error_summary(tmp_path):
    summary = tmp_path / "out.md"
    cand = write_run(tmp_path / "cand", two_cells())
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2", "--summary", summary) == 0
    assert gate(cand, "--min", "speedup_vs_baseline:nope=1.2", "--summary", summary) == 2
    text = summary.read_text()
    assert text.count("### specbench gate: PASS") == 1
    assert "### specbench gate: unusable input" in text


# ------------------------------------------------------------------------- suite gate: section


def test_gate_from_candidate_meta_and_cli_override(tmp_path):
    suite = SUITE_META | {"raw": {"name": "math_code_chat", "gate": {"min": {"speedup_vs_baseline:dspark_k3": 1.5}}}}
    cand = write_run(tmp_path / "cand", two_cells(speedup=1.3), suite=suite)
    assert gate(cand) == 1
    assert gate(cand, "--min", "speedup_vs_baseline:dspark_k3=1.2") == 0


#: the rest of a suite: ``--suite`` reads the gate: section through the suite loader, which checks it all
SUITE_BODY = ("name: {name}\nmodel: m\nconfigs:\n  - {{name: baseline, url: 'http://127.0.0.1:1'}}\n"
              "datasets:\n  - {{name: math500}}\n")


def test_gate_from_suite_file(tmp_path, capsys):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE_BODY.format(name="math_code_chat") + "gate:\n  max_drop:\n    speedup_vs_baseline: 5%\n")
    cand = write_run(tmp_path / "cand", two_cells(speedup=1.2))
    ref = write_run(tmp_path / "ref", two_cells(speedup=1.3))
    assert gate(cand, "-r", ref, "--suite", suite) == 1
    other = tmp_path / "other.yaml"
    other.write_text(SUITE_BODY.format(name="cpu_smoke") + "gate: {min: {speedup_vs_baseline: 1}}\n")
    capsys.readouterr()
    assert gate(cand, "--suite", other) == 2
    assert "'cpu_smoke'" in capsys.readouterr().err


def test_gate_spec_from_mapping():
    spec = GateSpec.from_mapping(
        {"min": {"speedup_vs_baseline:dspark_k3": 1.2, "mean_acceptance_length:dspark_k7@humaneval": 3},
         "max": {"latency_p95_ms": 2500},
         "max_drop": {"speedup_vs_baseline": "5%", "latency_p95_ms": "12.5%"}},
        "suites/x.yaml: gate",
    )
    kinds = [(c.kind, str(c.selector), c.value) for c in spec.checks]
    assert kinds == [
        ("min", "speedup_vs_baseline:dspark_k3", 1.2),
        ("min", "mean_acceptance_length:dspark_k7@humaneval", 3.0),
        ("max", "latency_p95_ms", 2500.0),
        ("max_drop", "speedup_vs_baseline", 0.05),
        ("max_drop", "latency_p95_ms", 0.125),
    ]
    assert GateSpec.from_mapping(None, "x").checks == ()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mni": {}}, "suites/x.yaml: gate.mni: unknown key"),
        ({"max_drop": {"speedup_vs_baseline": 5}}, "gate.max_drop.speedup_vs_baseline: expected a percentage"),
        ({"min": {"speedup_vs_baseline": "1.2"}}, "gate.min.speedup_vs_baseline: expected a number"),
        ({"min": {"speedup:a:b": 1}}, "gate.min.speedup:a:b: "),
        ({"min": {"run:dspark_k3": 1}}, "gate.min.run:dspark_k3: 'run' is a key column"),
        ({"min": [1]}, "gate.min: expected a mapping"),
        ([1], "suites/x.yaml: gate: expected a mapping"),
    ],
)
def test_gate_spec_errors_name_the_key(data, message):
    with pytest.raises(SuiteError) as info:
        GateSpec.from_mapping(data, "suites/x.yaml: gate")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------ pure parts


def test_selector_parse():
    assert Selector.parse("speedup_vs_baseline") == Selector("speedup_vs_baseline")
    assert Selector.parse("x:k3@gsm8k") == Selector("x", "k3", "gsm8k")
    assert Selector.parse("x@gsm8k") == Selector("x", None, "gsm8k")
    with pytest.raises(GateError, match="--min x:=1"):
        parse_cli_threshold("min", "x:=1")


def test_noise_rules():
    assert judge_floor(Measure(1.15), 1.2) == "fail"
    assert judge_floor(Measure(1.15, (1.05, 1.25)), 1.2) == "within noise"
    assert judge_floor(Measure(1.15, (1.05, 1.19)), 1.2) == "fail"
    ref = Measure(1.40, (1.33, 1.47))
    assert judge_drop(Measure(1.30), ref, 0.05, False) == (pytest.approx(1.33), "within noise")
    assert judge_drop(Measure(1.25), ref, 0.05, False)[1] == "fail"
    assert judge_drop(Measure(1.30), Measure(1.40), 0.05, False)[1] == "fail"
    assert judge_drop(Measure(1.30, (1.20, 1.34)), Measure(1.40), 0.05, False)[1] == "within noise"
    lat = Measure(1000.0, (950.0, 1050.0))
    assert judge_drop(Measure(1120.0), lat, 0.10, True)[1] == "within noise"
    assert judge_drop(Measure(1160.0), lat, 0.10, True)[1] == "fail"


def test_evaluate_and_render_are_pure():
    cells = index_cells([read_row(r) for r in two_cells(speedup=1.1)], "mem")
    check = Check("min", Selector("speedup_vs_baseline", "dspark_k3"), 1.2)
    (verdict,) = evaluate(check, cells, None)
    assert verdict.outcome == "fail" and verdict.change is None
    text = render_markdown([verdict], "cand.json", None)
    assert "| speedup_vs_baseline | dspark_k3 | math500 | — | 1.100 | — | ≥ 1.2 | ❌ FAIL |" in text


# --------------------------------------------------------------- the shared results example


def test_example_results_floors_pass_and_fail(capsys):
    assert gate(EXAMPLE, "--min", "speedup_vs_baseline:dspark_k3=1.05",
                "--min", "mean_acceptance_length=1.8") == 0
    assert gate(EXAMPLE, "--min", "speedup_vs_baseline:dspark_k7@humaneval=1.4") == 0
    capsys.readouterr()
    assert gate(EXAMPLE, "--min", "speedup_vs_baseline:dspark_k7=1.2") == 1
    err = capsys.readouterr().err
    assert "2 regression(s)" in err and "dspark_k7 / gsm8k: speedup_vs_baseline 1.049" in err and "dspark_k7 / mt_bench:" in err


def test_example_results_against_itself(tmp_path):
    records = json.loads(EXAMPLE.read_text())
    worse = copy.deepcopy(records)
    for r in worse:
        r["latency_p95_ms"] *= 1.2
    write_run(tmp_path / "worse", worse, meta=False)
    drops = ["--max-drop", "speedup_vs_baseline=5%", "--max-drop", "latency_p95_ms=10%"]
    assert gate(EXAMPLE, "-r", EXAMPLE, *drops) == 0
    assert gate(tmp_path / "worse", "-r", EXAMPLE, *drops) == 1
