"""`specbench whatif SUITE --profile FILE`: which derived configs a replay runs (one per config × data set of the
profile, restricted to that data set), what each sets on its server (vLLM's synthetic rates, SGLang's mean-length
knobs), what it refuses, and the table and plot that read the replay back (⚠ beyond 3 %)."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.errors import ProfileError, SuiteError
from specbench.launch import read_engine
from specbench.measure.explained import explain
from specbench.measure.replay import read_profile, replay_of, replay_points
from specbench.report.explain_tables import explain_markdown, replay_markdown
from specbench.report.html import render_html
from specbench.run.replay import expand_replay, read_profile_file, replay_support
from specbench.schemas.meta import RunMeta
from specbench.schemas.plans import ProfileRef
from specbench.schemas.profile_file import FORMAT
from specbench.schemas.row_read import rows_from
from specbench.suite import parse_suite

OK = lambda engine, python: None  # noqa: E731  (an engine that can replay a profile)
PROFILE = ProfileRef("/plans/p.json", "ab" * 32, FORMAT)


def suite_of(tmp_path: Path, configs: list[dict], engine: str = "vllm", datasets=("gsm8k", "mbpp", "extra")) -> object:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(4)))
    data = {"name": "plan", "model": "smol", "engine": engine, "configs": configs,
            "datasets": [{"name": d, "path": str(prompts)} for d in datasets],
            "load": {"concurrency": [1, 16], "max_tokens": 21, "warmup": 0}, "server": {"startup_timeout_s": 30}}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return parse_suite(data, path)


def profile_doc(*entries: dict) -> dict:
    return {"format": FORMAT, "profiles": list(entries)}


def entry(dataset: str, k: int, rates: list[float], config: str = "dspark_k7", conc=None, speedup=None) -> dict:
    return {"config": config, "dataset": dataset, "num_speculative_tokens": k, "acceptance_per_position": rates,
            "mean_acceptance_length": 1 + sum(rates), "concurrency": conc, "speedup_vs_baseline": speedup,
            "estimated_positions": list(range(4, k + 1)) if k > 3 else []}


DSPARK3 = {"name": "dspark_k3", "method": "dspark", "drafter": "/m/draft", "num_speculative_tokens": 3}
DSPARK7 = {**DSPARK3, "name": "dspark_k7", "num_speculative_tokens": 7}
K7 = [0.6, 0.36, 0.2, 0.11, 0.06, 0.03, 0.02]
ENTRIES = [entry("gsm8k", 3, [0.5, 0.25, 0.1], "dspark_k3"), entry("gsm8k", 7, K7),
           entry("mbpp", 3, [0.7, 0.5, 0.3], "dspark_k3"), entry("mbpp", 7, K7)]


def test_one_derived_config_per_config_and_data_set_at_the_profiles_rates(tmp_path):
    suite = suite_of(tmp_path, [{"name": "baseline"}, DSPARK3, DSPARK7])
    derived, plan = expand_replay(suite, read_profile(profile_doc(*ENTRIES), "p.json"), PROFILE, check=OK)
    assert [c.name for c in derived.configs] == [
        "baseline", "dspark_k3", "dspark_k7", "dspark_k3_profile_gsm8k", "dspark_k7_profile_gsm8k",
        "dspark_k3_profile_mbpp", "dspark_k7_profile_mbpp"]  # data set by data set
    assert [d.name for d in derived.datasets] == ["gsm8k", "mbpp"] and plan.skipped_datasets == ["extra"]
    by = {c.name: c for c in derived.configs}
    c = by["dspark_k7_profile_mbpp"]
    assert c.datasets == ("mbpp",) and c.num_speculative_tokens == 7 and c.drafter == "/m/draft" and c.method == "dspark"
    assert c.speculative == {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": K7} and c.env == {}
    assert by["dspark_k3_profile_gsm8k"].speculative["synthetic_acceptance_rates"] == [0.5, 0.25, 0.1]
    assert by["dspark_k3"].datasets is None  # the real config measures every data set
    p = plan.replayed()["dspark_k7_profile_mbpp"]
    assert p.of == "dspark_k7" and p.dataset == "mbpp" and p.k == 7 and p.mode == "rates"
    assert p.acceptance_per_position == K7 and p.acceptance_length == pytest.approx(1 + sum(K7))
    assert p.estimated_positions == [4, 5, 6, 7] and p.profile_entries == [3] and p.profile_config == "dspark_k7"
    assert plan.profile == PROFILE
    # the derived suite's own config (what the server is started with): vLLM's --speculative-config
    assert derived.raw_config("dspark_k3_profile_gsm8k")["speculative"] == {
        "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.25, 0.1]}
    assert [c.name for c in expand_replay(suite, read_profile(profile_doc(*ENTRIES), "p.json"), PROFILE, ["dspark_k3"],
                                          include_real=False, check=OK)[0].configs] == [
        "baseline", "dspark_k3_profile_gsm8k", "dspark_k3_profile_mbpp"]


def test_sglang_replays_the_mean_length_through_its_environment(tmp_path):
    eagle = {"name": "eagle_k3", "method": "eagle3", "drafter": "/m/eagle", "num_speculative_tokens": 3}
    suite = suite_of(tmp_path, [{"name": "baseline"}, eagle], engine="sglang", datasets=("gsm8k",))
    derived, plan = expand_replay(suite, read_profile(profile_doc(*ENTRIES), "p.json"), PROFILE, check=OK)
    c = derived.configs[-1]
    assert c.name == "eagle_k3_profile_gsm8k" and c.speculative == {}
    assert c.env == {"SGLANG_SIMULATE_ACC_LEN": "1.85", "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}
    p = plan.replayed()[c.name]
    assert p.mode == "mean_length" and p.replayed_length == pytest.approx(1.85)
    assert p.note is not None and "per-position shape not reproduced" in p.note


@pytest.mark.parametrize("rates, outcome", [
    ([0.7, 0.2, 0.1], "2"),     # L = 2.0: one accepted draft per step, exactly what DSPARK rounds to
    ([0.7, 0.3, 0.03], "2"),    # L = 2.03: rounded to 2, 1.5 % off: replayed, flagged
    ([0.5, 0.25, 0.1], None),   # L = 1.85: rounded to 1 accepted draft (length 2), 8.1 % off: refused
])
def test_sglang_dspark_rounds_the_length_replayed_only_within_3_percent(tmp_path, rates, outcome):
    suite = suite_of(tmp_path, [{"name": "baseline"}, DSPARK3], engine="sglang", datasets=("gsm8k",))
    entries = read_profile(profile_doc(entry("gsm8k", 3, rates)), "p.json")
    if outcome is None:
        with pytest.raises(ProfileError) as err:
            expand_replay(suite, entries, PROFILE, check=OK)
        assert str(err.value) == (
            "/plans/p.json: profiles[0]: SGLang's DSPARK rounds SGLANG_SIMULATE_ACC_LEN to a whole number of accepted "
            "drafts (round(min(max(L−1, 0), k)) = 1 → length 2 for the profile's 1.850, +8.1%): the replay would not "
            "be at the profile's length; replay it on vLLM (synthetic_acceptance_rates) instead")
        return
    derived, plan = expand_replay(suite, entries, PROFILE, check=OK)
    c = derived.configs[-1]
    assert c.env["SGLANG_RAGGED_VERIFY_MODE"] == "static" and c.env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    p = plan.replayed()[c.name]
    assert p.replayed_length == 2.0 and p.note is not None and "DSPARK rounds it to 2" in p.note


@pytest.mark.parametrize("configs, engine, message", [
    ([{"name": "baseline"}, {**DSPARK3, "speculative": {"rejection_sample_method": "synthetic"}}], "vllm",
     "config 'dspark_k3' already fixes its acceptance"),
    ([{"name": "baseline"}, {**DSPARK3, "env": {"SGLANG_SIMULATE_ACC_LEN": "2"}}], "sglang",
     "config 'dspark_k3' already fixes its acceptance"),
    ([{"name": "baseline"}, {**DSPARK3, "num_speculative_tokens": 5}], "vllm",
     "p.json: no profile for data set 'gsm8k' at k=5 (config 'dspark_k3' has num_speculative_tokens: 5); for 'gsm8k' "
     "it has k=3, k=7"),
    ([{"name": "baseline"}, {**DSPARK3, "method": "medusa"}], "sglang",
     "SGLang honours SGLANG_SIMULATE_ACC_LEN for EAGLE, EAGLE3, STANDALONE, NGRAM, DSPARK only, not MEDUSA"),
])
def test_a_replay_that_cannot_be_made_is_refused_in_one_line(tmp_path, configs, engine, message):
    suite = suite_of(tmp_path, configs, engine=engine)
    with pytest.raises((SuiteError, ProfileError)) as err:
        expand_replay(suite, read_profile(profile_doc(*ENTRIES), "p.json"), ProfileRef("p.json", PROFILE.sha256, FORMAT), check=OK)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_no_data_set_in_common_is_refused(tmp_path):
    suite = suite_of(tmp_path, [{"name": "baseline"}, DSPARK3], datasets=("humaneval",))
    with pytest.raises(ProfileError, match=r"no profile for any data set of .*suite.yaml \(humaneval\); the profile has gsm8k, mbpp"):
        expand_replay(suite, read_profile(profile_doc(*ENTRIES), "p.json"), PROFILE, check=OK)


def test_whatif_cli_refuses_a_bad_profile_before_anything_starts(tmp_path, capsys):
    suite = suite_of(tmp_path, [{"name": "baseline"}, DSPARK3])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(profile_doc(entry("gsm8k", 3, [0.8, 0.6]))))
    assert main(["whatif", str(suite.path), "--profile", str(bad), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == (f"specbench: {bad}: profiles[0].acceptance_per_position: "
                                               "synthetic_acceptance_rates must have length 3, got [0.8, 0.6].")
    assert main(["whatif", str(suite.path), "--profile", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.strip() == f"specbench: {tmp_path / 'none.json'}: profile file not found"
    assert main(["whatif", str(suite.path), "--profile", str(bad), "--lengths", "2"]) == 2
    assert "--profile and --lengths exclude each other" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(profile_doc(*ENTRIES)))
    entries, info = read_profile_file(good)
    assert len(entries) == 4 and info.path == str(good.resolve()) and len(str(info.sha256)) == 64


# ------------------------------------------------------------------------------ reading the replay back

def replay_run(measured: dict[str, float], mode: str = "rates") -> tuple[list, RunMeta]:
    """A replay of one config on gsm8k at C=1 and C=16: the profile says 2.50 (p = 0.7, 0.5, 0.3)."""
    plan = {"dspark_k3_profile_gsm8k": {
        "of": "dspark_k3", "dataset": "gsm8k", "k": 3, "mode": mode, "acceptance_per_position": [0.7, 0.5, 0.3],
        "estimated_positions": [3], "acceptance_length": 2.5,
        "replayed_length": 2.5, "note": "SGLang replays the mean acceptance length only: per-position shape not "
                                        "reproduced" if mode != "rates" else None,
        "profile_speedups": [{"concurrency": 1, "request_rate": None, "speedup_vs_baseline": 1.31, "ci": [1.2, 1.4]},
                             {"concurrency": None, "request_rate": None, "speedup_vs_baseline": 1.25, "ci": None}]}}
    rows = []
    for c, length in measured.items():
        rows += [{"dataset": "gsm8k", "run": "baseline", "concurrency": int(c), "speedup_vs_baseline": 1.0},
                 {"dataset": "gsm8k", "run": "dspark_k3_profile_gsm8k", "concurrency": int(c), "num_speculative_tokens": 3,
                  "speedup_vs_baseline": 1.4 if c == "1" else 0.9, "mean_acceptance_length": length,
                  "ci95": {"speedup_vs_baseline": [1.3, 1.5] if c == "1" else [0.85, 0.95]}}]
    return rows_from(rows), RunMeta.from_dict({"whatif": {"configs": plan, "profile": PROFILE.to_dict(), "skipped_datasets": ["extra"]}})


def test_replay_table_flags_a_measured_length_more_than_3_percent_off():
    rows, meta = replay_run({"1": 2.46, "16": 2.40})  # −1.6 %: fine; −4.0 %: ⚠
    p1, p16 = replay_points(rows, meta)
    assert not p1.flagged and p16.flagged and p16.length_gap == pytest.approx(-0.04)
    replay = replay_of(rows, meta)
    assert replay is not None
    md = replay_markdown(replay)
    assert explain_markdown(explain(rows, meta)) == [md]
    assert ("| Dataset | Config | k | Load | Predicted speedup | Profile speedup | Profile AL | Measured AL | "
            "Acceptance replayed |") in md
    assert "| gsm8k | dspark_k3 | 3 | C=1 | 1.400x [1.30–1.50] | 1.310x [1.20–1.40] | 2.50 | 2.46 | 0.700 0.500 0.300* |" in md
    # no profile entry at C=16: the one measured at a load the profile did not record, marked †
    assert "| gsm8k | dspark_k3 | 3 | C=16 | 0.900x [0.85–0.95] | 1.250x† | 2.50 | 2.40 ⚠ -4.0% | 0.700 0.500 0.300* |" in md
    assert "Profile /plans/p.json (sha256 abababababab…)" in md and "Not replayed (the profile has no entry for them): extra." in md
    assert "Same output and accuracy do not apply" in md
    page = render_html(rows, None, meta, explain(rows, meta))
    fig = page[page.index('id="fig-whatif"'):]
    fig = fig[:fig.index("</figure>")]
    assert fig.count('class="length-flag"') == 1 and "2.40 ⚠ -4.0%" in fig and "1.250×†" in fig
    assert 'class="break-even"' not in fig  # not the break-even map
    assert "Predicted speed-up at a profile&#x27;s acceptance (what-if)</a>" in page


def test_replay_table_says_sglang_replayed_the_mean_only():
    rows, meta = replay_run({"1": 2.5}, mode="mean_length")
    assert ("| 2.50 | 2.50 | mean 2.50 only (SGLang replays the mean acceptance length only: per-position shape not "
            "reproduced) |") in explain_markdown(explain(rows, meta))[0]


def _fake_package(root: Path, package: str, path: str, text: str) -> None:
    (root / package / Path(path).parent).mkdir(parents=True)
    (root / package / "__init__.py").write_text("raise ImportError('never imported by the check')\n")
    (root / package / path).write_text(text)


@pytest.mark.parametrize("engine, package, path, text, expected", [
    ("vllm", "vllm", "config/speculative.py", "synthetic_acceptance_rates: list[float] | None = None\n", None),
    ("vllm", "vllm", "config/speculative.py", "synthetic_acceptance_length: float | None = None\n",
     "has no synthetic_acceptance_rates in config/speculative.py"),
    ("sglang", "sglang", "srt/environ.py", "SGLANG_SIMULATE_ACC_LEN = EnvFloat(-1)\n", None),
    ("sglang", "sglang", "srt/environ.py", "SGLANG_OTHER = 1\n", "has no SGLANG_SIMULATE_ACC_LEN in srt/environ.py"),
])
def test_replay_support_reads_the_engines_own_source(tmp_path, monkeypatch, engine, package, path, text, expected):
    _fake_package(tmp_path, package, path, text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("SPECBENCH_ENGINE_PYTHON", sys.executable)
    why = replay_support(read_engine(engine))
    assert why is None if expected is None else expected in why
