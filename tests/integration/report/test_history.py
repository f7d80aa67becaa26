"""`results/` as a history: discovery, selection, run-to-run comparison, trend plot, gate reference,
and the provenance a run records. Built on a directory of runs of two suites written from records."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.cli.gate import register
from specbench.gate import Measure
from specbench.gate.runs import change_verdict, compare_runs
from specbench.run.history import classify
from specbench.run.provenance import suite_file_provenance
from specbench.schemas.meta import RunMeta
from specbench.schemas.row_read import rows_from

SHA = "5" * 64
COMMIT = "c0ffee" * 6 + "abcd"


# ------------------------------------------------------------------------------------ builders


def rec(run: str, dataset: str, *, conc: int | None = 2, rate: float | None = None, speedup: float | None = None,
        speedup_ci: list | None = None, accept: float | None = None, tps: float = 100.0, tps_ci: list | None = None,
        tpot: float = 10.0, ttft95: float = 50.0, status: str = "ok", repeats: int = 1) -> dict:
    """One results.json row as the runner writes it (the keys the history and comparison read)."""
    base = run == "baseline"
    ci = {}
    if speedup_ci:
        ci["speedup_vs_baseline"] = speedup_ci
    if tps_ci:
        ci["output_throughput_tps"] = tps_ci
    return {
        "dataset": dataset, "run": run, "method": "baseline" if base else "ngram",
        "num_speculative_tokens": None if base else 3, "requests": 6, "output_throughput_tps": tps,
        "speedup_vs_baseline": 1.0 if base else speedup, "tpot_mean_ms": tpot, "ttft_p95_ms": ttft95,
        "mean_acceptance_length": None if base else accept, "concurrency": conc if rate is None else None,
        "request_rate": rate, "repeats": repeats, "status": status, "failed_requests": 0,
        "ci95": ci or None, "engine": "vllm", "server_version": "0.32.0",
    }


def write_run(path: Path, suite: str, started: str, records: list[dict] | None, *, configs: list[str],
              datasets: list[str], load: dict, finished: bool = True, failed_configs: dict | None = None,
              provenance: bool = True) -> Path:
    """A run directory: results.json (unless None) and a meta.json shaped like the runner's."""
    path.mkdir(parents=True)
    if records is not None:
        (path / "results.json").write_text(json.dumps(records))
    meta = {
        "specbench_version": "0.1.0",
        "suite": {"name": suite, "path": f"suites/{suite}.yaml",
                  "raw": {"name": suite, "model": "m", "load": load, "configs": [{"name": c} for c in configs],
                          "datasets": [{"name": d} for d in datasets]}},
        "comparability": {"suite": suite, "model": "m", "max_tokens": 64,
                          "configs": {c: f"fp-{c}" for c in configs}, "datasets": {d: f"fp-{d}" for d in datasets}},
        "started_at": started, "failed_configs": failed_configs or {}, "notes": [f"note of {path.name}"],
    }
    if provenance:
        meta["suite_file"] = {"sha256": SHA, "git": {"commit": COMMIT, "dirty": False, "tracked": True}}
    if finished:
        meta["finished_at"] = started.replace("T10", "T11").replace("T09", "T10")
    (path / "meta.json").write_text(json.dumps(meta))
    return path


ALPHA = {"configs": ["baseline", "spec_k3"], "datasets": ["d1", "d2"], "load": {"concurrency": 2}}
BETA_LOAD = {"request_rate": [1, 4], "concurrency": 8}


def alpha_records(*, d1_speedup=1.4, d1_ci=(1.33, 1.47), d2_speedup=1.4, d2_ci=(1.30, 1.50), d1_accept=2.5,
                  d1_ttft=50.0, d1_tps_ci=(95.0, 105.0), d1_tps=100.0, d2_tpot=10.0) -> list[dict]:
    return [
        rec("baseline", "d1", ttft95=d1_ttft, tps=d1_tps, tps_ci=list(d1_tps_ci)),
        rec("spec_k3", "d1", speedup=d1_speedup, speedup_ci=list(d1_ci) if d1_ci else None, accept=d1_accept),
        rec("baseline", "d2", tpot=d2_tpot),
        rec("spec_k3", "d2", speedup=d2_speedup, speedup_ci=list(d2_ci) if d2_ci else None, accept=2.5),
    ]


def beta_records(datasets=("d1",), speedup=1.2) -> list[dict]:
    return [rec(c, d, rate=r, speedup=speedup, accept=2.0) for d in datasets for r in (1.0, 4.0)
            for c in ("baseline", "spec_k3")]


@pytest.fixture
def results(tmp_path) -> Path:
    return build_history(tmp_path)


def build_history(tmp_path: Path) -> Path:
    """Two suites. alpha: a1 (old, no provenance), a2, a3 (nested, the latest complete), a4 interrupted
    (a cut cell and missing cells, distinctive 777.77 tok/s), a5 unfinished (meta.json only).
    beta (request-rate sweep): b1, b2 (grew a data set d2), b3 failed (a config did not start)."""
    root = tmp_path / "results"
    write_run(root / "alpha-20261201-100000", "alpha", "2026-12-01T10:00:00+00:00", alpha_records(d1_speedup=1.5, d1_ci=(1.42, 1.58)),
              provenance=False, **ALPHA)
    write_run(root / "alpha-20261202-100000", "alpha", "2026-12-02T10:00:00+00:00", alpha_records(), **ALPHA)
    a3 = alpha_records(d1_speedup=1.10, d1_ci=(1.04, 1.16), d2_speedup=1.45, d2_ci=(1.35, 1.55), d1_accept=2.9,
                       d1_ttft=80.0, d1_tps=98.0, d1_tps_ci=(93.0, 103.0), d2_tpot=8.0)
    write_run(root / "nightly" / "alpha-20261203-100000", "alpha", "2026-12-03T10:00:00+00:00", a3, **ALPHA)
    cut = [rec("baseline", "d1", tps=777.77), rec("spec_k3", "d1", speedup=1.3, accept=2.4, status="interrupted")]
    write_run(root / "alpha-20261204-100000", "alpha", "2026-12-04T10:00:00+00:00", cut, **ALPHA)
    write_run(root / "alpha-20261205-100000", "alpha", "2026-12-05T10:00:00+00:00", None, finished=False, **ALPHA)
    beta = {"configs": ["baseline", "spec_k3"], "load": BETA_LOAD}
    write_run(root / "beta-20261201-090000", "beta", "2026-12-01T09:00:00+00:00", beta_records(),
              datasets=["d1"], **beta)
    write_run(root / "beta-20261203-090000", "beta", "2026-12-03T09:00:00+00:00",
              beta_records(("d1", "d2"), speedup=1.25), datasets=["d1", "d2"], **beta)
    failed = [r for r in beta_records(("d1", "d2")) if r["run"] == "baseline"]
    write_run(root / "beta-20261205-090000", "beta", "2026-12-05T09:00:00+00:00", failed, datasets=["d1", "d2"],
              failed_configs={"spec_k3": "server exited with code 1 during startup\ntraceback..."}, **beta)
    return root


def report(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["report", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


A3 = "nightly/alpha-20261203-100000"


# ------------------------------------------------------------------------------ default report


def test_report_directory_shows_latest_complete_run_of_each_suite(results, capsys):
    code, out, err = report(capsys, results, "--format", "markdown")
    assert code == 0, err
    assert out.count("Latest complete run: ") == 2
    alpha = out[out.index("## Suite `alpha`"):out.index("## Suite `beta`")]
    beta = out[out.index("## Suite `beta`"):]
    latest = next(line for line in alpha.splitlines() if line.startswith("Latest complete run: "))
    assert f"{results / A3}" in latest and "started 2026-12-03 10:00:00 UTC" in latest
    assert "engine vllm 0.32.0" in latest and f"suite file sha256 `{SHA[:12]}`" in latest and f"git `{COMMIT[:10]}`" in latest
    # the table under it is a3's: its d1 speedup 1.10x, none of a1's 1.50x for d1
    assert "| d1 | spec_k3 | 6 | 100.00 | 1.10x [1.04–1.16] |" in alpha and "note of alpha-20261203-100000" in alpha
    assert "| d1 | spec_k3 | 6 | 100.00 | 1.50x [1.42–1.58] |" not in alpha
    assert "beta-20261203-090000" in next(l for l in beta.splitlines() if l.startswith("Latest complete run: "))
    # beta sweeps request rates: each row says its rate
    assert beta.count("| d1 | spec_k3 | 1 | 6 |") == 1 and beta.count("| d1 | spec_k3 | 4 | 6 |") == 1


def test_interrupted_failed_unfinished_runs_are_listed_never_mixed_in(results, capsys):
    code, out, _ = report(capsys, results)
    assert code == 0
    assert "777.77" not in out  # the interrupted run's numbers are not shown
    lines = {l.split("`")[1].split("/")[-1]: l for l in out.splitlines() if l.startswith("- `")}
    assert "**interrupted** — 2 of 4 cells measured; cell spec_k3 / d1 / C=2 interrupted" in lines["alpha-20261204-100000"]
    assert "**unfinished**" in lines["alpha-20261205-100000"] and "no finished_at" in lines["alpha-20261205-100000"]
    assert "**failed** — config spec_k3 failed: server exited with code 1 during startup" in lines["beta-20261205-090000"]
    assert "traceback" not in out
    assert "complete, older — shown with `--all`" in lines["alpha-20261202-100000"]
    assert "suite file hash" not in lines["alpha-20261201-100000"]


def test_classify_counts_missing_cells_and_short_repeats():
    meta = RunMeta.from_dict({"finished_at": "x", "suite": {"raw": {"load": {"concurrency": [1, 4], "repeats": 3}}},
                              "comparability": {"configs": {"b": "", "s": ""}, "datasets": {"d": ""}}})
    full = rows_from([rec(c, "d", conc=n, repeats=3) for c in "bs" for n in (1, 4)])
    assert classify(meta, full) == ("complete", "")
    status, why = classify(meta, full[:3])
    assert status == "interrupted" and why.startswith("3 of 4 cells measured")
    full[0].repeats = 2
    status, why = classify(meta, full)
    assert status == "interrupted" and "cell b / d / C=1 has fewer than 3 repeats" in why


def test_a_ramp_or_trace_run_is_complete_at_its_own_rate():
    """A ramp's cell is its end rate and a trace's its file's mean rate (suite/arrival.py), neither a concurrency:
    a finished run of either is complete, not "0 of 2 cells measured"."""
    comp = {"configs": {"b": "", "s": ""}, "datasets": {"d": ""}}
    ramp = RunMeta.from_dict({"finished_at": "x", "comparability": comp, "suite": {"raw": {"load": {
        "concurrency": 4, "arrival": {"kind": "ramp", "start": 1, "end": 16}}}}})
    rows = rows_from([rec(c, "d", rate=16.0) for c in "bs"])
    assert classify(ramp, rows) == ("complete", "")
    assert classify(ramp, rows[:1])[1].startswith("1 of 2 cells measured")
    trace = RunMeta.from_dict({"finished_at": "x", "comparability": comp, "suite": {"raw": {"load": {
        "arrival": {"kind": "trace", "path": "t.jsonl"}}}}})
    assert classify(trace, rows_from([rec(c, "d", rate=13.33) for c in "bs"])) == ("complete", "")


def test_all_shows_every_complete_run_oldest_first(results, capsys):
    code, out, _ = report(capsys, results, "--all")
    assert code == 0
    runs = [l for l in out.splitlines() if l.startswith("Run `")]
    assert [Path(l.split("`")[1]).name for l in runs] == [
        "alpha-20261201-100000", "alpha-20261202-100000", "alpha-20261203-100000",
        "beta-20261201-090000", "beta-20261203-090000"]
    assert "| d1 | spec_k3 | 6 | 100.00 | 1.50x [1.42–1.58] |" in out and "777.77" not in out


def test_suite_and_since_filters(results, capsys):
    code, out, _ = report(capsys, results, "--suite", "beta")
    assert code == 0 and "## Suite `alpha`" not in out and "## Suite `beta`" in out
    code, out, _ = report(capsys, results, "--since", "2026-12-03T00:00+00:00", "--all")
    assert code == 0
    assert [Path(l.split("`")[1]).name for l in out.splitlines() if l.startswith("Run `")] == [
        "alpha-20261203-100000", "beta-20261203-090000"]
    assert "alpha-20261202-100000" not in out and "alpha-20261204-100000" in out  # listed, interrupted


@pytest.mark.parametrize("argv, words", [
    (["--suite", "gamma"], ["no run of suite 'gamma'", "alpha, beta"]),
    (["--since", "last week"], ["--since 'last week'", "2026-12-01"]),
    (["--since", "2030-01-01T00:00+00:00"], ["no run started since 2030-01-01 00:00:00 UTC"]),
])
def test_filter_errors_are_one_line_exit_2(results, capsys, argv, words):
    code, out, err = report(capsys, results, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert all(w in err for w in words), err


def test_empty_directory_and_explicit_runs_unchanged(tmp_path, results, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = report(capsys, tmp_path / "empty")
    assert code == 2 and len(err.splitlines()) == 1 and "results.json" in err
    # a run directory named explicitly is reported as before: its table and notes, no history header
    code, out, _ = report(capsys, results / A3)
    assert code == 0 and out.startswith("| Dataset | Run |") and "Latest complete run" not in out
    # a crashed run named explicitly: the same one-line error as before
    code, _, err = report(capsys, results / "alpha-20261205-100000")
    assert code == 2 and "no results.json in this directory" in err


def test_damaged_run_is_listed_unreadable_and_the_rest_still_reported(results, capsys):
    bad = results / "alpha-20261206-100000"
    bad.mkdir()
    (bad / "results.json").write_text("[{oops")
    odd = results / "alpha-20261207-100000"
    odd.mkdir()
    (odd / "results.json").write_text(json.dumps([rec("spec_k3", "d1", rate="fast")]))
    (odd / "meta.json").write_text(json.dumps({"suite": {"name": "alpha"}, "finished_at": "x"}))
    code, out, _ = report(capsys, results)
    assert code == 0 and "alpha-20261206-100000" in out
    bad_lines = [l for l in out.splitlines() if "**unreadable**" in l]
    assert len(bad_lines) == 2 and "alpha-20261207-100000" in bad_lines[1]
    assert "| d1 | spec_k3 | 6 | 100.00 | 1.10x [1.04–1.16] |" in out


# ------------------------------------------------------------------------------ a newer specbench's run


def newer_run(root: Path, name: str = "alpha-20261206-100000", *, results: bool = True, finished: bool = True) -> Path:
    """A complete alpha run as a newer specbench might write it: meta.json at schema_version 2 by specbench 9.0.0
    with keys this version does not know (at the top and nested) and a known key of a shape it does not read;
    rows with a key it does not know and their own schema_version."""
    path = write_run(root / name, "alpha", "2026-12-06T10:00:00+00:00",
                     alpha_records(d1_speedup=1.61, d1_ci=(1.55, 1.67)) if results else None, finished=finished, **ALPHA)
    meta = json.loads((path / "meta.json").read_text())
    meta = {"schema_version": 2, **meta, "specbench_version": "9.0.0", "energy_budget": {"j": 5},
            "notes": {"kind": "structured now"}}
    meta["suite_file"]["git"]["signed"] = True
    (path / "meta.json").write_text(json.dumps(meta))
    if results:
        rows = json.loads((path / "results.json").read_text())
        (path / "results.json").write_text(json.dumps([{"schema_version": 2, **r, "goodput_per_watt": 0.5} for r in rows]))
    return path


def test_a_run_a_newer_specbench_wrote_is_shown_and_said_once(results, capsys):
    """A history is read by whichever version a CI pins: the newer run was listed unreadable and left out."""
    newer = newer_run(results)
    code, out, err = report(capsys, results)
    assert code == 0 and "unreadable" not in out
    latest = next(line for line in out.splitlines() if line.startswith("Latest complete run:") and "alpha-" in line)
    assert str(newer) in latest and "written by specbench 9.0.0: shown with what this version reads (4 key(s) ignored)" in latest
    assert "| d1 | spec_k3 | 6 | 100.00 | 1.61x [1.55–1.67] |" in out
    said = [line for line in err.splitlines() if str(newer) in line]
    assert len(said) == 1 and len(err.splitlines()) == 1, err
    assert said[0].startswith(f"specbench report: warning: {newer}: written by a newer specbench (specbench 9.0.0; "
                              "schema_version 2 (this version reads meta.json up to 1); schema_version 2 (this version "
                              "reads results.json row up to 1); this is ")
    assert said[0].endswith("keys it ignored: meta.json energy_budget, meta.json suite_file.git.signed, meta.json notes, "
                            "results.json goodput_per_watt")


def test_json_and_csv_say_per_run_which_is_newer_and_what_it_ignored(results, capsys):
    newer_run(results)
    code, out, _ = report(capsys, results, "--format", "json")
    assert code == 0
    alpha = {Path(r["path"]).name: r for r in json.loads(out)["suites"][0]["runs"]}
    run = alpha["alpha-20261206-100000"]
    assert run["status"] == "complete" and run["shown"] and run["records"][1]["speedup_vs_baseline"] == 1.61
    assert run["newer"] == {"specbench_version": "9.0.0",
                            "schema_versions": ["schema_version 2 (this version reads meta.json up to 1)",
                                                "schema_version 2 (this version reads results.json row up to 1)"],
                            "ignored_meta_keys": ["energy_budget", "suite_file.git.signed", "notes"],
                            "ignored_results_keys": ["goodput_per_watt"]}
    assert alpha["alpha-20261203-100000"]["newer"] is None
    code, out, _ = report(capsys, results, "--format", "csv")
    notes = {row["run_note"] for row in csv.DictReader(io.StringIO(out)) if row["run_dir"].endswith("alpha-20261206-100000")}
    assert code == 0 and notes == {"written by specbench 9.0.0: shown with what this version reads (4 key(s) ignored)"}


def test_a_newer_run_is_refused_only_where_it_cannot_be_read(results, capsys):
    unfinished = newer_run(results, "alpha-20261207-100000", results=False, finished=False)
    cut = newer_run(results, "alpha-20261208-100000")
    (cut / "results.json").write_text((cut / "results.json").read_text()[:200])
    code, out, err = report(capsys, results)
    assert code == 0
    line = next(line for line in out.splitlines() if str(unfinished) in line)
    assert "**unfinished**" in line and "written by specbench 9.0.0" in line
    assert any(str(cut) in line and "not valid JSON" in line for line in out.splitlines() if "**unreadable**" in line)
    assert sum(str(unfinished) in line for line in err.splitlines()) == 1


def test_one_newer_run_reported_alone_is_shown_but_the_gate_still_refuses_it(tmp_path, capsys):
    """The report shows it; the gate acts on meta.json (comparability, thresholds), where a key whose meaning
    changed would make a verdict a guess: it still refuses a newer meta.json in one line."""
    newer = newer_run(tmp_path)
    code, out, err = report(capsys, newer)
    assert code == 0 and "| d1 | spec_k3 | 6 | 100.00 | 1.61x [1.55–1.67] |" in out
    assert err.count("written by a newer specbench") == 1 and "results.json goodput_per_watt" in err
    assert gate(newer, "--min", "speedup_vs_baseline:spec_k3=1.0") == 2
    assert "schema_version 2: written by a newer specbench (this one reads meta.json up to version 1): upgrade specbench" \
        in capsys.readouterr().err


# ------------------------------------------------------------------------------ other formats


def test_json_of_a_directory(results, capsys):
    code, out, _ = report(capsys, results, "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["selection"] == "latest" and [s["suite"] for s in data["suites"]] == ["alpha", "beta"]
    alpha = {Path(r["path"]).name: r for r in data["suites"][0]["runs"]}
    shown = [name for name, r in alpha.items() if r["shown"]]
    assert shown == ["alpha-20261203-100000"]
    a3 = alpha["alpha-20261203-100000"]
    assert a3["status"] == "complete" and a3["suite_sha256"] == SHA and a3["git_commit"] == COMMIT
    assert a3["engine"] == ["vllm 0.32.0"] and a3["started_at"] == "2026-12-03T10:00:00+00:00"
    assert [r["speedup_vs_baseline"] for r in a3["records"]] == [1.0, 1.1, 1.0, 1.45]
    cut = alpha["alpha-20261204-100000"]
    assert cut["status"] == "interrupted" and "records" not in cut and cut["reason"].startswith("2 of 4 cells")
    assert alpha["alpha-20261201-100000"]["suite_sha256"] is None


def test_csv_of_a_directory(results, capsys):
    code, out, _ = report(capsys, results, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0])[:5] == ["suite", "run_dir", "run_started_at", "run_status", "run_note"]
    cells = [r for r in rows if r["dataset"]]
    assert {Path(r["run_dir"]).name for r in cells} == {"alpha-20261203-100000", "beta-20261203-090000"}
    assert len(cells) == 4 + 8
    beta = [r for r in cells if r["suite"] == "beta"]
    assert sorted({r["request_rate"] for r in beta}) == ["1.0", "4.0"] and {r["concurrency"] for r in beta} == {""}
    listed = {Path(r["run_dir"]).name: r for r in rows if not r["dataset"]}
    assert {n: r["run_status"] for n, r in listed.items()} == {
        "alpha-20261204-100000": "interrupted", "alpha-20261205-100000": "unfinished",
        "beta-20261205-090000": "failed"}
    assert "777.77" not in out


def test_html_of_a_directory_with_trend_plot(results, tmp_path, capsys):
    out_file = tmp_path / "history.html"
    code, out, _ = report(capsys, results, "--format", "html", "-o", out_file)
    assert code == 0 and str(out_file) in out
    page = out_file.read_text()
    assert page.count('<section id="suite-') == 2
    assert f"<code>{results / A3}</code>" in page and "777.77" not in page
    assert "interrupted" in page and "2 of 4 cells measured" in page
    trends = re.findall(r'<figure class="plot" id="suite-\d-fig-trend".*?</figure>', page, re.S)
    assert len(trends) == 2
    alpha = trends[0]
    # three complete alpha runs drawn; the interrupted and unfinished ones are not
    assert "Runs drawn: 12-01 10:00 alpha-20261201-100000, 12-02 10:00 alpha-20261202-100000, " \
           "12-03 10:00 alpha-20261203-100000." in alpha
    # 2 metrics × 2 data sets, one line per spec config across the three runs
    assert alpha.count('data-plot="trend" role="img"') == 4
    lines = re.findall(r'<polyline points="([^"]+)"', alpha)
    assert len(lines) == 4 and all(len(p.split()) == 3 for p in lines)
    # the speedup panel of d1 goes down from 1.5 to 1.4 to 1.1: y grows downward in SVG
    ys = [float(p.split(",")[1]) for p in lines[0].split()]
    assert ys[0] < ys[1] < ys[2]
    assert len(re.findall(r'id="(suite-0-0-fig-speedup)"', page)) == 1  # ids stay unique across suites


def test_html_compare_section(results, tmp_path, capsys):
    out_file = tmp_path / "c.html"
    code, _, _ = report(capsys, results, "--format", "html", "-o", out_file, "--compare", "--suite", "alpha")
    assert code == 0
    page = out_file.read_text()
    assert "Latest complete run vs the one before" in page
    worse = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>[^<]*</td><td>([^<]*)</td>(?:<td>[^<]*</td>){3}"
                       r'<td class="worse">worse[^<]*</td></tr>', page)
    assert sorted(worse) == [("baseline", "d1", "TTFT p95 ms"), ("spec_k3", "d1", "Speedup")]
    assert page.count('<td class="better">better (no CI)</td>') == 2


def test_trend_with_one_complete_run_says_so(results, tmp_path, capsys):
    out_file = tmp_path / "h.html"
    code, _, _ = report(capsys, results, "--format", "html", "-o", out_file, "--since", "2026-12-03T00:00+00:00")
    assert code == 0
    assert "one complete run so far: a trend needs two" in out_file.read_text()


# ------------------------------------------------------------------------------ comparison


def verdicts(data: dict) -> dict[tuple, str]:
    return {(c["config"], c["dataset"], c["request_rate"] or c["concurrency"], metric): m["verdict"]
            for c in data["cells"] for metric, m in c["metrics"].items()}


def test_change_verdict_is_the_gates_noise_rule():
    old = Measure(1.40, (1.33, 1.47))
    assert change_verdict(old, Measure(1.10, (1.04, 1.16)), "speedup_vs_baseline") == "worse"
    assert change_verdict(old, Measure(1.30, (1.22, 1.38)), "speedup_vs_baseline") == "within noise"
    assert change_verdict(old, Measure(1.60, (1.50, 1.70)), "speedup_vs_baseline") == "better"
    assert change_verdict(Measure(50.0), Measure(50.0), "ttft_p95_ms") == "within noise"
    assert change_verdict(Measure(50.0), Measure(80.0), "ttft_p95_ms") == "worse"  # lower is better
    assert change_verdict(Measure(10.0), Measure(8.0), "tpot_mean_ms") == "better"


def test_report_compare_latest_vs_previous_verdicts(results, capsys):
    code, out, _ = report(capsys, results, "--compare", "--format", "json")
    assert code == 0
    alpha, beta = json.loads(out)["suites"]
    assert Path(alpha["old"]["path"]).name == "alpha-20261202-100000"
    assert Path(alpha["new"]["path"]).name == "alpha-20261203-100000"  # not the interrupted a4
    v = verdicts(alpha)
    assert v[("spec_k3", "d1", 2, "speedup_vs_baseline")] == "worse"
    assert v[("spec_k3", "d2", 2, "speedup_vs_baseline")] == "within noise"
    assert v[("spec_k3", "d1", 2, "mean_acceptance_length")] == "better"
    assert v[("spec_k3", "d2", 2, "mean_acceptance_length")] == "within noise"
    assert v[("baseline", "d1", 2, "ttft_p95_ms")] == "worse"
    assert v[("baseline", "d1", 2, "output_throughput_tps")] == "within noise"
    assert v[("baseline", "d2", 2, "tpot_mean_ms")] == "better"
    assert v[("baseline", "d1", 2, "speedup_vs_baseline")] == "not measured"
    assert v[("baseline", "d1", 2, "mean_acceptance_length")] == "not measured"
    assert alpha["counts"] == {"worse": 2, "better": 2, "within noise": 12, "not measured": 4}
    cell = next(c for c in alpha["cells"] if (c["config"], c["dataset"]) == ("spec_k3", "d1"))
    m = cell["metrics"]["speedup_vs_baseline"]
    assert m["old_ci95"] == [1.33, 1.47] and m["new_ci95"] == [1.04, 1.16] and m["change"] == pytest.approx(-0.3 / 1.4)
    assert alpha["not_comparable"] == []
    # beta: request rates are separate cells; d2 is new (listed, not dropped) and the suite changed
    assert {(c["dataset"], c["request_rate"]) for c in beta["cells"]} == {("d1", 1.0), ("d1", 4.0)}
    assert sorted((c["config"], c["request_rate"]) for c in beta["only_new"]) == [
        ("baseline", 1.0), ("baseline", 4.0), ("spec_k3", 1.0), ("spec_k3", 4.0)]
    assert all(c["dataset"] == "d2" for c in beta["only_new"]) and beta["only_old"] == []
    assert any("datasets.d2" in p for p in beta["not_comparable"])
    assert verdicts(beta)[("spec_k3", "d1", 1.0, "speedup_vs_baseline")] == "better"  # 1.2 → 1.25, no CI


def test_report_compare_markdown_and_csv(results, capsys):
    code, out, _ = report(capsys, results, "--compare")
    assert code == 0
    assert "| spec_k3 | d1 | C=2 | Speedup | 1.400 [1.330, 1.470] | 1.100 [1.040, 1.160] | -21.4% | **worse ▼** |" in out
    assert "| baseline | d2 | C=2 | TPOT mean ms | 10.000 | 8.000 | -20.0% | better ▲ (no CI) |" in out
    assert "| baseline | d1 | C=2 | TTFT p95 ms | 50.000 | 80.000 | +60.0% | **worse ▼** (no CI) |" in out
    assert "Only in the new run (4): baseline / d2 / 1 req/s" in out
    assert "⚠ not comparable (new vs old): comparability differs in datasets.d2" in out
    assert "| baseline | d1 | C=2 | Speedup |" not in out  # the baseline's own 1.0 is not a comparison
    assert "| baseline | d1 | C=2 | Accept len |" not in out  # null in both runs
    assert "4 not measured" in out
    assert "**interrupted**" in out and "**failed**" in out  # left out, with the reason
    code, out, _ = report(capsys, results, "--compare", "--format", "csv", "--suite", "alpha")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4 * 5
    worse = {(r["config"], r["dataset"], r["metric"]) for r in rows if r["verdict"] == "worse"}
    assert worse == {("spec_k3", "d1", "speedup_vs_baseline"), ("baseline", "d1", "ttft_p95_ms")}


def test_compare_tolerance_is_the_gates_allowed_drop(results, capsys):
    code, out, _ = report(capsys, results, "--compare", "--format", "json", "--suite", "alpha", "--tolerance", "25%")
    assert code == 0
    data = json.loads(out)["suites"][0]
    assert data["tolerance"] == 0.25
    # -21% speedup is inside a 25% slack; +60% TTFT is not
    assert {k: v for k, v in verdicts(data).items() if v in ("better", "worse")} == {
        ("baseline", "d1", 2, "ttft_p95_ms"): "worse"}
    code, out, err = report(capsys, results, "--compare", "--tolerance", "5")
    assert code == 2 and len(err.splitlines()) == 1 and "--tolerance: expected a percentage like '5%'" in err
    code, out, err = report(capsys, results, "--tolerance", "5%")
    assert code == 2 and "--tolerance applies to --compare only" in err


def test_compare_with_a_single_complete_run(results, capsys):
    code, out, _ = report(capsys, results, "--compare", "--since", "2026-12-03T00:00+00:00", "--suite", "alpha")
    assert code == 0 and "1 complete run(s): nothing to compare." in out


def test_compare_command_lists_cells_in_one_run_only(tmp_path, capsys):
    old = write_run(tmp_path / "old", "alpha", "2026-12-01T10:00:00+00:00", alpha_records(), **ALPHA)
    records = alpha_records(d1_speedup=1.6, d1_ci=(1.5, 1.7))[:3] + [rec("spec_k7", "d1", speedup=1.8, accept=3.1)]
    new = write_run(tmp_path / "new", "alpha", "2026-12-02T10:00:00+00:00", records,
                    configs=["baseline", "spec_k3", "spec_k7"], datasets=["d1", "d2"], load={"concurrency": 2})
    assert main(["compare", str(old), str(new / "results.json"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(c["config"], c["dataset"]) for c in data["only_old"]] == [("spec_k3", "d2")]
    assert [(c["config"], c["dataset"]) for c in data["only_new"]] == [("spec_k7", "d1")]
    assert verdicts(data)[("spec_k3", "d1", 2, "speedup_vs_baseline")] == "better"
    assert main(["compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "Only in the old run (1): spec_k3 / d2 / C=2" in out and "Only in the new run (1): spec_k7 / d1 / C=2" in out
    assert "better ▲" in out and "configs.spec_k7" in out
    assert main(["compare", str(old), str(tmp_path / "nope")]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_compare_runs_keys_cells_by_request_rate_too():
    old = [rec("s", "d", rate=1.0, speedup=1.0), rec("s", "d", rate=4.0, speedup=2.0)]
    new = [rec("s", "d", rate=1.0, speedup=1.0), rec("s", "d", rate=4.0, speedup=1.0)]
    comp = compare_runs(rows_from(old), rows_from(new), metrics=["speedup_vs_baseline"])
    assert [(str(c.cell), c.metrics[0].verdict) for c in comp.cells] == [
        ("s / d / 1 req/s", "within noise"), ("s / d / 4 req/s", "worse")]


# ------------------------------------------------------------------------------ gate reference


def gate(*argv) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="specbench")
    register(parser.add_subparsers())
    args = parser.parse_args(["gate", *map(str, argv)])
    return args.func(args)


def candidate(root: Path, name: str, started: str, suite: str = "alpha", d1_speedup: float = 1.2) -> Path:
    return write_run(root / name, suite, started, alpha_records(d1_speedup=d1_speedup, d1_ci=None), **ALPHA)


def test_gate_reference_directory_takes_latest_earlier_complete_run(results, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # 1.2 passes a 5% drop against a3 (1.10) and fails against a2 (1.40): the verdict shows which was taken
    cand = candidate(results, "alpha-20261206-100000", "2026-12-06T10:00:00+00:00")
    assert gate(cand, "--reference", results, "--max-drop", "speedup_vs_baseline:spec_k3@d1=5%") == 0
    out = capsys.readouterr()
    assert f"reference {results / A3}: the latest complete run of suite 'alpha' before the candidate" in out.err
    assert f"vs reference `{results / A3 / 'results.json'}`" in out.out
    early = candidate(results, "alpha-20261202-120000", "2026-12-02T12:00:00+00:00")
    assert gate(early, "--reference", results, "--max-drop", "speedup_vs_baseline:spec_k3@d1=5%") == 1
    assert "alpha-20261202-100000" in capsys.readouterr().err


@pytest.mark.parametrize("started, suite, words", [
    ("2026-11-01T10:00:00+00:00", "alpha", ["no complete run of suite 'alpha' started before the candidate",
                                             "2026-11-01 10:00:00 UTC"]),
    ("2026-12-09T10:00:00+00:00", "gamma", ["no complete run of suite 'gamma'"]),
])
def test_gate_reference_directory_without_earlier_run_exit_2(results, tmp_path, capsys, monkeypatch, started,
                                                             suite, words):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    cand = candidate(tmp_path / "elsewhere", "cand", started, suite=suite)
    assert gate(cand, "--reference", results, "--min", "speedup_vs_baseline=1.0") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and all(w in err[0] for w in words), err


def test_gate_reference_run_directory_is_used_as_given(results, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    cand = candidate(results, "alpha-20261206-100000", "2026-12-06T10:00:00+00:00")
    ref = results / "alpha-20261202-100000"
    assert gate(cand, "--reference", ref, "--max-drop", "speedup_vs_baseline:spec_k3@d1=5%") == 1
    assert "latest complete run" not in capsys.readouterr().err


# ------------------------------------------------------------------------------ provenance


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}).stdout.strip()


def test_suite_file_provenance_hash_commit_and_dirty(tmp_path):
    repo = tmp_path / "repo"
    (repo / "suites").mkdir(parents=True)
    suite = repo / "suites" / "x.yaml"
    suite.write_text("name: x\n")
    git(repo, "init", "-q")
    untracked = suite_file_provenance(suite)
    assert untracked.git is None or untracked.git.dirty is True  # no commit yet, or untracked
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "suite")
    head = git(repo, "rev-parse", "HEAD")
    clean = suite_file_provenance(suite)
    assert clean.to_dict() == {"sha256": hashlib.sha256(b"name: x\n").hexdigest(),
                     "git": {"commit": head, "dirty": False, "tracked": True}}
    suite.write_text("name: x\nmodel: y\n")
    dirty = suite_file_provenance(suite)
    assert dirty.to_dict()["git"] == {"commit": head, "dirty": True, "tracked": True}
    assert dirty.sha256 == hashlib.sha256(b"name: x\nmodel: y\n").hexdigest()
    other = repo / "suites" / "new.yaml"
    other.write_text("name: n\n")
    assert suite_file_provenance(other).to_dict()["git"] == {"commit": head, "dirty": True, "tracked": False}
    outside = tmp_path / "plain" / "s.yaml"
    outside.parent.mkdir()
    outside.write_text("name: s\n")
    assert suite_file_provenance(outside).git is None
    assert suite_file_provenance(outside).to_dict()["git"] is None  # written as null


async def test_user_flow_run_twice_then_report_results_dir(tmp_path, prompts_file, monkeypatch, capsys):
    """`specbench run SUITE` twice into the default results/<suite>-<timestamp>/, then
    `specbench report results/ --format markdown`: the second run's table, named, with its provenance."""
    from tests.support.scripted_server import Script, start

    base, r1, base_url = await start(Script(pattern=[1], ttft_s=0.01, gap_s=0.004))
    spec, r2, spec_url = await start(Script(pattern=[1, 2, 4], k=3, ttft_s=0.01, gap_s=0.004))
    suite_file = tmp_path / "suites" / "flow.yaml"
    suite_file.parent.mkdir()
    suite_file.write_text(yaml.safe_dump({
        "name": "flow", "model": "smol", "endpoint": "chat",
        "configs": [{"name": "baseline", "url": base_url},
                    {"name": "ngram_k3", "url": spec_url, "method": "ngram", "num_speculative_tokens": 3}],
        "datasets": [{"name": "prompts", "path": str(prompts_file), "requests": 4}],
        "load": {"concurrency": 2, "max_tokens": 16, "temperature": 0, "warmup": 0}}))
    monkeypatch.chdir(tmp_path)
    try:
        for _ in range(2):
            assert await asyncio.to_thread(main, ["run", "suites/flow.yaml", "--quiet"]) == 0
            second = int(time.time())
            while int(time.time()) == second:  # default run dirs are named to the second
                await asyncio.sleep(0.05)
    finally:
        await r1.cleanup()
        await r2.cleanup()
    runs = sorted((tmp_path / "results").iterdir())
    assert len(runs) == 2
    meta = json.loads((runs[1] / "meta.json").read_text())
    assert meta["suite_file"] == {"sha256": hashlib.sha256(suite_file.read_bytes()).hexdigest(), "git": None}
    capsys.readouterr()
    assert main(["report", "results/", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    latest = next(l for l in out.splitlines() if l.startswith("Latest complete run: "))
    assert f"`results/{runs[1].name}`" in latest and "suite file sha256" in latest
    assert f"- `results/{runs[0].name}`" in out and "complete, older" in out
    assert "| prompts | ngram_k3 | 4 |" in out
    assert main(["report", "results/", "--compare", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["suites"][0]
    assert data["not_comparable"] == [] and len(data["cells"]) == 2
    assert {m["verdict"] for c in data["cells"] for m in c["metrics"].values()} <= {
        "better", "worse", "within noise", "not measured"}
