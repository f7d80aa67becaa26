"""`specbench profile`: per-position acceptance from a run's counters or a reference-format results file, the
fill rule for positions a file does not give (sums match, non-increasing, listed as estimated, refusals), and
the checks a profile file passes before `whatif --profile` replays it."""

import json
import math
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.errors import ProfileError
from specbench.measure.profile import FILL_RULE, conditional, fill_positions, profiles_from, rates_problem
from specbench.measure.replay import choose, read_profile
from specbench.run.readback import read_run
from specbench.schemas.profile_file import FORMAT, ProfileFile
from specbench.schemas.row_read import rows_from
from tests.support.paths import ROOT, RUNS

H200_WHATIF = RUNS / "gpu_whatif_map"
REFERENCE_PROFILE = ROOT / "suites" / "profiles" / "reference_qwen3_8b.json"

# two data sets of /work/shared/reference/results_example.json, as given (p1..p3 and the length; k=3 and k=7)
REFERENCE = [
    {"dataset": "math500", "run": "baseline", "method": "baseline", "num_speculative_tokens": None,
     "speedup_vs_baseline": 1.0},
    {"dataset": "math500", "run": "dspark_k3", "method": "dspark", "num_speculative_tokens": 3,
     "speedup_vs_baseline": 1.2970117944073019, "acceptance_pos_1": 0.6332426800409706,
     "acceptance_pos_2": 0.38554727510330944, "acceptance_pos_3": 0.22766926853388902,
     "mean_acceptance_length": 2.246459223678169},
    {"dataset": "math500", "run": "dspark_k7", "method": "dspark", "num_speculative_tokens": 7,
     "speedup_vs_baseline": 1.2051005386852782, "acceptance_pos_1": 0.6178056188306758,
     "acceptance_pos_2": 0.36526195899772207, "acceptance_pos_3": 0.20611237661351556,
     "mean_acceptance_length": 2.4194381169324224},
    {"dataset": "humaneval", "run": "dspark_k7", "method": "dspark", "num_speculative_tokens": 7,
     "speedup_vs_baseline": 1.467373644527463, "acceptance_pos_1": 0.7348963029756538,
     "acceptance_pos_2": 0.5404268109407875, "acceptance_pos_3": 0.38352870453862337,
     "mean_acceptance_length": 3.3294259092275325},
]


def _check_filled(p: dict, given: int) -> None:
    rates, k = p["acceptance_per_position"], p["num_speculative_tokens"]
    assert len(rates) == k and 1 + math.fsum(rates) == pytest.approx(p["mean_acceptance_length"], abs=1e-12)
    assert all(b <= a for a, b in zip(rates, rates[1:])) and all(0 <= x <= 1 for x in rates)
    assert p["estimated_positions"] == list(range(given + 1, k + 1))  # 1-based
    assert all(rates[j - 1] <= rates[given - 1] for j in p["estimated_positions"])


def test_reference_format_fills_the_positions_it_does_not_give():
    entries, refused = profiles_from(rows_from(REFERENCE), None, "ref.json", note=lambda _: None)
    profiles = [p.to_dict() for p in entries]  # as the file has them
    assert refused == [] and [(p["dataset"], p["config"]) for p in profiles] == [
        ("math500", "dspark_k3"), ("math500", "dspark_k7"), ("humaneval", "dspark_k7")]
    k3, k7, he = profiles
    assert k3["estimated_positions"] == [] and k3["fill_rule"] is None and k3["acceptance_per_position"] == [
        REFERENCE[1]["acceptance_pos_1"], REFERENCE[1]["acceptance_pos_2"], REFERENCE[1]["acceptance_pos_3"]]
    for p in (k7, he):
        _check_filled(p, 3)
        assert p["fill_rule"] == FILL_RULE and p["measured_positions"] == 3
        r = p["fill_ratio"]  # one ratio continues the curve geometrically from p_3
        assert [p["acceptance_per_position"][j] / p["acceptance_per_position"][j - 1] for j in range(3, 7)] == pytest.approx([r] * 4)
    assert k7["acceptance_conditional"][:3] == pytest.approx([0.6178056, 0.36526196 / 0.6178056, 0.20611238 / 0.36526196])
    assert k7["speedup_vs_baseline"] == pytest.approx(1.2051) and k7["concurrency"] is None and k7["load"] == "load not recorded"
    prov = k7["provenance"]  # no meta.json: what the rows carry, and what is missing said
    assert prov["source"] == "ref.json" and prov["method"] == "dspark" and prov["num_speculative_tokens"] == 7
    assert {"engine", "engine_version", "target_model", "drafter", "temperature", "recipe", "suite_sha256"} <= set(prov["missing"])
    assert "no meta.json" in prov["missing_why"]


@pytest.mark.parametrize("given, length, k, expected", [
    ([0.6, 0.3], 1.9, 2, None),                                  # every position given: kept as is
    ([], 1 + 0.5 + 0.25 + 0.125, 3, [0.5, 0.25, 0.125]),          # none given: i.i.d. from p_0 = 1 (r = 0.5)
    ([0.8], 1.8, 3, [0.8, 0.0, 0.0]),                             # nothing left to fill: r = 0
    ([0.5], 3.0, 4, [0.5, 0.5, 0.5, 0.5]),                        # all of it at the last rate: r = 1
])
def test_fill_rule_on_known_curves(given, length, k, expected):
    filled = fill_positions(given, length, k)
    assert filled.rates == pytest.approx(expected or given) and 1 + sum(filled.rates) == pytest.approx(length)
    assert filled.estimated == list(range(len(given) + 1, k + 1))


@pytest.mark.parametrize("given, length, k, message", [
    ([0.8, 0.6, 0.4], 2.5, 7, "the 3 given positions already sum to 1.8000, more than mean acceptance length − 1 = 1.5000"),
    ([0.5, 0.3, 0.1], 2.5, 7, "the 4 positions not given would need Σ = 0.6000, more than 0.4000 even at r = 1 (none "
                              "may exceed the last given rate 0.1000)"),
    ([0.6, 0.3, 0.2], 2.3, 3, "1 + Σp = 2.1000 but mean_acceptance_length = 2.3000 (k = 3)"),
    ([0.3, 0.5], 2.5, 4, "the given rates must be non-increasing, got [0.3, 0.5]."),
    ([0.5], 5.5, 3, "mean acceptance length 5.5 is outside [1, k+1] = [1, 4]"),
])
def test_fill_rule_refuses_what_no_curve_can_match(given, length, k, message):
    with pytest.raises(ValueError) as err:
        fill_positions(given, length, k)
    assert str(err.value) == message


def test_a_record_that_cannot_be_filled_is_refused_in_one_line_the_rest_kept(tmp_path, capsys):
    bad = {**REFERENCE[2], "mean_acceptance_length": 3.4}  # 1 + 1.19 + at most 4 × 0.206 = 3.01 < 3.4
    path = tmp_path / "results.json"
    path.write_text(json.dumps([*REFERENCE[:2], bad]))
    out = tmp_path / "profile.json"
    assert main(["profile", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if "refused:" in x]
    assert line == (f"specbench profile: {path}: record 2 (math500 / dspark_k7 / load not recorded): refused: the 4 "
                    "positions not given would need Σ = 1.2108, more than 0.8244 even at r = 1 (none may exceed the "
                    "last given rate 0.2061)")
    written = json.loads(out.read_text())
    assert written["format"] == FORMAT and [p["config"] for p in written["profiles"]] == ["dspark_k3"]
    assert written["sources"][0]["refused"] == 1 and "1-based" in written["positions"]


def test_profile_of_a_committed_run_reads_its_counters_and_provenance(tmp_path, capsys):
    """The H200 whatif run: the real dspark_k3 at three loads; its synthetic replays are not a drafter's profile."""
    out = tmp_path / "p.json"
    assert main(["profile", str(H200_WHATIF), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "config 'dspark_k3_al1.5' (3 records) left out: its acceptance was synthetic" in captured.err
    assert "| dspark_k3 | gsm8k | C=16 | 3 | 0.023 0.000 0.000 |" in captured.out
    rows = {(r["run"], r["concurrency"]): r for r in json.loads((H200_WHATIF / "results.json").read_text())}
    doc = json.loads(out.read_text())
    assert [(p["config"], p["concurrency"]) for p in doc["profiles"]] == [("dspark_k3", 1), ("dspark_k3", 16), ("dspark_k3", 64)]
    for p in doc["profiles"]:
        row = rows[(p["config"], p["concurrency"])]
        assert p["acceptance_per_position"] == row["acceptance_per_position"]
        assert p["mean_acceptance_length"] == row["mean_acceptance_length"] and p["estimated_positions"] == []
        assert p["speedup_vs_baseline"] == row["speedup_vs_baseline"] and p["spec_drafts"] == row["spec_drafts"]
        assert p["speedup_ci95"] == row["ci95"]["speedup_vs_baseline"]
    prov = doc["profiles"][0]["provenance"]
    meta = json.loads((H200_WHATIF / "meta.json").read_text())
    assert prov["engine"] == "vllm" and prov["engine_version"] == "0.26.0" and prov["method"] == "dspark"
    assert prov["drafter"] == "~/.cache/specbench/models/dspark-random-smollm2" and prov["temperature"] == 0
    assert prov["target_model"] == "~/.cache/specbench/models/SmolLM2-135M-Instruct" and prov["recipe"] == "boxed"
    assert prov["suite_sha256"] == meta["suite_file"]["sha256"] and prov["missing"] == []
    assert doc["sources"][0]["meta"] is True


def test_per_category_profile_comes_from_the_stream_and_says_so():
    row = {"dataset": "mt", "run": "spec", "method": "ngram", "num_speculative_tokens": 2, "mean_acceptance_length": 1.9,
           "acceptance_per_position": [0.6, 0.3],
           "categories": {"coding": {"requests": 3, "stream_mean_acceptance_length": 2.2, "stream_acceptance_joint": [0.7, 0.5]},
                          "writing": {"requests": 3, "stream_mean_acceptance_length": None}}}
    [entry], _ = profiles_from(rows_from([row]), None, "r.json", note=lambda _: None)
    p = entry.to_dict()
    assert list(p["categories"]) == ["coding"]  # writing measured nothing
    c = p["categories"]["coding"]
    assert c["acceptance_per_position"] == [0.7, 0.5] and c["acceptance_conditional"] == pytest.approx([0.7, 0.5 / 0.7])
    assert c["mean_acceptance_length"] == 2.2 and c["source"].startswith("stream chunk sizes")


def test_conditional_rates():
    assert conditional([0.8, 0.4, 0.0]) == pytest.approx([0.8, 0.5, 0.0])
    assert conditional([0.5, 0.0, 0.0]) == [0.5, 0.0, None]  # nothing reached position 3


@pytest.mark.parametrize("rates, message", [
    ([0.8, 0.6], "synthetic_acceptance_rates must have length 3, got [0.8, 0.6]."),
    ([0.8, 1.2, 0.1], "synthetic_acceptance_rates entries must be in [0, 1], got [0.8, 1.2, 0.1]."),
    ([0.5, 0.6, 0.1], "synthetic_acceptance_rates must be non-increasing, got [0.5, 0.6, 0.1]."),
])
def test_rates_are_checked_as_vllm_checks_them(rates, message):
    """vLLM 0.26's own messages; a profile file's entry fails the same way, naming the file and key."""
    assert rates_problem(rates, 3) == message
    doc = {"format": FORMAT, "profiles": [{"config": "c", "dataset": "d", "num_speculative_tokens": 3,
                                           "acceptance_per_position": rates}]}
    with pytest.raises(ProfileError) as err:
        read_profile(doc, "plan.json")
    assert str(err.value) == f"plan.json: profiles[0].acceptance_per_position: {message}"


@pytest.mark.parametrize("doc, message", [
    ([1, 2], "plan.json: format: expected 'specbench-profile/1' (a file written by specbench profile), got 'list'"),
    ({"format": FORMAT, "profiles": []}, "plan.json: profiles: expected a non-empty list, got []"),
    ({"format": FORMAT, "profiles": [{"config": "c", "dataset": "d", "num_speculative_tokens": 2,
                                      "acceptance_per_position": [0.5, 0.2], "mean_acceptance_length": 2.2}]},
     "plan.json: profiles[0].mean_acceptance_length: expected 1 + Σ acceptance_per_position = 1.7000, got 2.2"),
    ({"format": FORMAT, "profiles": [{"config": "c", "dataset": "d", "num_speculative_tokens": 0}]},
     "plan.json: profiles[0].num_speculative_tokens: expected a number in [1, 128], got 0"),
])
def test_a_profile_file_that_cannot_be_replayed_is_one_line(doc, message):
    with pytest.raises(ProfileError) as err:
        read_profile(doc, "plan.json")
    assert str(err.value) == message


def _entry(config, dataset, k, rates, conc=None, drafts=None, speedup=None):
    return {"config": config, "dataset": dataset, "num_speculative_tokens": k, "acceptance_per_position": rates,
            "concurrency": conc, "spec_drafts": drafts, "speedup_vs_baseline": speedup}


def test_choice_per_data_set_and_k_pools_one_configs_loads():
    doc = {"format": FORMAT, "profiles": [_entry("a", "gsm8k", 3, [0.6, 0.3, 0.1], 1, 100),
                                          _entry("a", "gsm8k", 3, [0.4, 0.2, 0.0], 16, 300),
                                          _entry("b", "gsm8k", 7, [0.5] + [0.1] * 6)]}
    entries = read_profile(doc, "p.json")
    c = choose(entries, "gsm8k", 3, "p.json", "spec_k3")
    assert c.rates == pytest.approx((0.45, 0.225, 0.025)) and c.length == pytest.approx(1.7)  # weighted by drafts
    assert c.pooled == "2 load points pooled by their drafts (the counters' own weights)"
    assert choose(entries, "gsm8k", 7, "p.json", "x").entries[0].config == "b"  # by k, whatever the config was named
    assert choose(entries, "mbpp", 3, "p.json", "x") is None  # the data set is not in the profile at all
    with pytest.raises(ProfileError) as err:
        choose(entries, "gsm8k", 5, "p.json", "dspark_k5")
    assert str(err.value) == ("p.json: no profile for data set 'gsm8k' at k=5 (config 'dspark_k5' has "
                              "num_speculative_tokens: 5); for 'gsm8k' it has k=3, k=7")
    two = read_profile({"format": FORMAT, "profiles": [_entry("a", "d", 2, [0.5, 0.2]), _entry("b", "d", 2, [0.6, 0.2])]}, "p.json")
    with pytest.raises(ProfileError, match=r"data set 'd' at k=2 has profiles of 2 configs \(a, b\); keep one"):
        choose(two, "d", 2, "p.json", "x")


def test_the_committed_reference_profile_is_replayable():
    """suites/profiles/reference_qwen3_8b.json (the GPU plan suites replay it): `specbench profile` of the reference results."""
    doc = json.loads(REFERENCE_PROFILE.read_text())
    entries = read_profile(doc, str(REFERENCE_PROFILE))
    assert {(e.dataset, e.k) for e in entries} == {(d, k) for d in ("math500", "gsm8k", "humaneval", "mbpp", "mt_bench",
                                                                    "ultrachat") for k in (3, 7)}
    assert all(e.estimated == ((4, 5, 6, 7) if e.k == 7 else ()) for e in entries)
    assert all(p["provenance"]["source"] == "/work/shared/reference/results_example.json" for p in doc["profiles"])
    for p in doc["profiles"]:
        _check_filled(p, 3)


def test_a_profile_file_read_and_written_back_is_the_same_bytes(tmp_path):
    """One declaration reads and writes the file: the committed profile, read strictly and written again."""
    text = REFERENCE_PROFILE.read_text()
    profile = ProfileFile.from_dict(json.loads(text), REFERENCE_PROFILE)
    assert profile.profiles[0].provenance is not None and profile.profiles[0].provenance.missing_why is not None
    assert json.dumps(profile.to_dict(), indent=2) + "\n" == text


def test_read_run_of_a_bare_results_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(REFERENCE))
    run = read_run(path)
    profiles, _ = profiles_from(run.rows, run.meta or None, str(path), note=lambda _: None)
    assert len(profiles) == 3 and profiles[0].provenance is not None and Path(str(profiles[0].provenance.source)) == path
