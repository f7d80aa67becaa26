"""A run on random weights (``load_format: dummy``) says so in every output: the note under the
table, meta.json's ``weights``, each row's ``weights``, and Same output / accuracy null (—), never
a number. Scripted servers stand in for the engines."""

import json
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.measure.quality import mark_dummy_weights
from specbench.schemas.row import ResultRow
from specbench.suite import parse_suite, read_suite
from tests.support.runs import run_suite
from tests.support.suites import write_suite

LOAD = {"concurrency": 2, "max_tokens": 8, "temperature": 0, "warmup": 0, "timeout_s": 30}


def configs(base: str, spec: str, fmt: str | None = "dummy") -> list[dict]:
    extra = {"load_format": fmt} if fmt else {}
    return [{"name": "baseline", "url": base, **extra},
            {"name": "ngram_k3", "url": spec, "method": "ngram", "num_speculative_tokens": 3, **extra}]


async def test_dummy_run_is_labelled_everywhere(tmp_path, prompts_file, scripted):
    _, base = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    _, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.001)
    suite = write_suite(tmp_path, configs(base, spec), name="dummy", prompts=prompts_file, requests=4, load=LOAD)
    assert (await run_suite(read_suite(suite), tmp_path / "out")).exit_code == 0
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert rows["baseline"]["weights"] == rows["ngram_k3"]["weights"] == "dummy"
    # the scripted servers send the same tokens, so a real run would measure 100 % same output here
    assert rows["ngram_k3"]["fidelity_identical"] is None and rows["ngram_k3"]["fidelity_compared"] == 4
    assert rows["ngram_k3"]["speedup_vs_baseline"] is not None  # speed is still measured
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["weights"] == "dummy" and meta["dummy_weight_configs"] == ["baseline", "ngram_k3"]
    md = (tmp_path / "out" / "results.md").read_text()
    assert "dummy weights (every config" in md and "same output and accuracy do not apply" in md
    assert "without load.ignore_eos" in md
    assert "| Same output |" not in md and "100.0%" not in md


async def test_real_run_has_no_dummy_label(tmp_path, prompts_file, scripted):
    _, base = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    _, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.001)
    suite = write_suite(tmp_path, configs(base, spec, None), name="real", prompts=prompts_file, requests=4, load=LOAD)
    await run_suite(read_suite(suite), tmp_path / "out")
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert "weights" not in rows["ngram_k3"] and rows["ngram_k3"]["fidelity_identical"] == 1.0
    assert "weights" not in json.loads((tmp_path / "out" / "meta.json").read_text())
    assert "dummy" not in (tmp_path / "out" / "results.md").read_text()


async def test_mixed_run_names_the_dummy_configs(tmp_path, prompts_file, scripted):
    """A real baseline and a dummy candidate: only the candidate is labelled; its Same output is —."""
    _, base = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    _, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.001)
    cfgs = configs(base, spec, None)
    cfgs[1]["load_format"] = "dummy"
    suite = write_suite(tmp_path, cfgs, name="mixed", prompts=prompts_file, requests=4, load={**LOAD, "ignore_eos": True})
    await run_suite(read_suite(suite), tmp_path / "out")
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert "weights" not in rows["baseline"] and rows["ngram_k3"]["weights"] == "dummy"
    assert rows["ngram_k3"]["fidelity_identical"] is None
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["weights"] == "mixed" and meta["dummy_weight_configs"] == ["ngram_k3"]
    md = (tmp_path / "out" / "results.md").read_text()
    assert "dummy weights (ngram_k3:" in md and "ignore_eos" not in md.split("dummy weights", 1)[1].split("\n")[0]


async def test_launched_server_gets_the_engine_flag(tmp_path, prompts_file, launchers, fake_engines):
    suite = write_suite(tmp_path, [{"name": "baseline"}], name="launched", prompts=prompts_file, requests=2, load=LOAD,
                        engine="fake", server={"load_format": "dummy", "startup_timeout_s": 30})
    assert (await run_suite(read_suite(suite), tmp_path / "out")).exit_code == 0
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    argv = meta["servers"]["baseline"]["argv"]
    assert argv[argv.index("--load-format") + 1] == "dummy"
    assert meta["comparability"]["load_format"] == "dummy" and meta["weights"] == "dummy"


def test_engine_without_the_flag_refuses_before_any_server_starts(tmp_path, prompts_file, launchers, fake_engines, capsys):
    (launchers / "plain.yaml").write_text((launchers / "fake.yaml").read_text() + "load_format_flag: null\n")
    suite = write_suite(tmp_path, [{"name": "baseline"}], name="plain", prompts=prompts_file, requests=2, load=LOAD,
                        engine="plain", server={"load_format": "dummy"})
    assert main(["run", str(suite), "-o", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "load_format 'dummy'" in err and f"{launchers / 'plain.yaml'} has no load_format_flag" in err
    assert not (tmp_path / "out" / "logs" / "baseline.log").exists()


def suite_of(*fmts: str):
    data = {"name": "s", "model": "m", "datasets": ["builtin"],
            "configs": [{"name": n, "url": "http://127.0.0.1:9", "load_format": f} for n, f in zip(("baseline", "spec"), fmts)]}
    return parse_suite(data, Path("s.yaml"))


def graded_row(run: str) -> ResultRow:
    row = ResultRow.start("gsm8k", run)
    row.update({"accuracy": 0.5, "accuracy_compared": 8, "fidelity_identical": 0.75, "fidelity_compared": 8,
                "accuracy_diff_vs_baseline": 0.125, "accuracy_diff_ci_low": -0.1, "accuracy_diff_ci_high": 0.3,
                "accuracy_mcnemar_p": 1.0, "output_throughput_tps": 100.0})
    return row


@pytest.mark.parametrize("fmts, nulled, labelled", [
    (("dummy", "dummy"), {"baseline", "spec"}, {"baseline", "spec"}),
    (("auto", "dummy"), {"spec"}, {"spec"}),
    (("dummy", "auto"), {"baseline"}, {"baseline"}),  # the real config's accuracy stands; its comparisons do not
])
def test_accuracy_and_same_output_are_null_for_dummy_rows(fmts, nulled, labelled):
    rows = [graded_row("baseline"), graded_row("spec")]
    mark_dummy_weights(rows, suite_of(*fmts))
    by = {r.run: r for r in rows}
    for run, row in by.items():
        assert (row.accuracy is None) is (run in nulled)
        assert (row.get("weights") == "dummy") is (run in labelled)
        if run in nulled:
            assert row.accuracy_error.startswith("dummy weights") and row.accuracy_compared == 8
        # a dummy row, or any row against a dummy baseline: agreement and accuracy differences are chance
        chance = run in nulled or fmts[0] == "dummy"
        assert (row.fidelity_identical is None) is chance and (row.accuracy_diff_vs_baseline is None) is chance
        assert row.output_throughput_tps == 100.0
