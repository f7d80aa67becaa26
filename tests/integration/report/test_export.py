"""Profiling-table export: runs/ and requests/ parquet under TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/RUN-rSTART.parquet."""

import json

import pandas as pd

from specbench.cli import main
from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import write_e2e_suite as write_suite


async def test_export_profilings_layout(tmp_path, prompts_file):
    base, r1, base_url = await start(Script(pattern=[1], token_ids=True))
    spec, r2, spec_url = await start(Script(pattern=[3, 1], k=3, token_ids=True))
    try:
        suite = read_suite(write_suite(tmp_path, prompts_file, {"baseline": base_url, "spec": spec_url}, max_tokens=9))
        await run_suite(suite, tmp_path / "run")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    assert main(["export", str(tmp_path / "run"), "-o", str(tmp_path / "prof"), "--gpu", "H100"]) == 0
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    run = pd.read_parquet(tmp_path / "prof" / "runs").run.unique().tolist()
    assert len(run) == 1 and run[0].startswith("e2e-" + meta["started_at"][:10].replace("-", ""))
    spec_dir = tmp_path / "prof" / "requests" / "H100" / "smol" / "prompts" / "ngram-k3"
    assert [p.name for p in spec_dir.iterdir()] == [f"{run[0]}-r0.parquet"]
    assert (tmp_path / "prof" / "runs" / "H100" / "smol" / "prompts" / "none-k0" / f"{run[0]}-r0.parquet").exists()
    reqs = pd.read_parquet(tmp_path / "prof" / "requests")  # the files stack
    spec_rows = reqs[reqs.drafter == "ngram"]
    assert len(spec_rows) == 6 and set(reqs.c) == {2}
    assert all(list(c) == [1, 3, 1, 3, 1] for c in spec_rows.chunks)  # 9 tokens: prefill, then 3,1,3,1
    assert all(len(ids) == 9 for ids in spec_rows.output_ids)
    assert all(t[0] > 0 and list(t) == sorted(t) for t in spec_rows.times)
    runs = pd.read_parquet(tmp_path / "prof" / "runs").set_index("drafter")
    assert runs.loc["ngram", "guessed_tokens"] == 6 * 4 * 3 and runs.loc["ngram", "accepted_tokens"] == 6 * 4
    assert runs.loc["ngram", "steps"] == 6 * 4 and pd.isna(runs.loc["none", "guessed_tokens"])
    # `report --format parquet` is the same export (GPU label cpu)
    assert main(["report", str(tmp_path / "run"), "--format", "parquet", "-o", str(tmp_path / "fmt")]) == 0
    written = sorted(p.relative_to(tmp_path / "fmt").as_posix() for p in (tmp_path / "fmt").rglob("*.parquet"))
    assert written == sorted(p.relative_to(tmp_path / "prof").as_posix().replace("/H100/", "/cpu/")
                             for p in (tmp_path / "prof").rglob("*.parquet"))
    assert pd.read_parquet(tmp_path / "fmt" / "runs").drop(columns="gpu").equals(
        pd.read_parquet(tmp_path / "prof" / "runs").drop(columns="gpu"))


async def test_exports_of_two_runs_stack_and_a_re_export_replaces_only_its_own_files(tmp_path, prompts_file):
    """Two runs of one suite at other loads into one root: both are there; exporting one again adds nothing."""
    base, r1, base_url = await start(Script(pattern=[1], token_ids=True))
    spec, r2, spec_url = await start(Script(pattern=[3, 1], k=3, token_ids=True))
    try:
        for c, repeats in ((1, 1), (2, 2)):
            (tmp_path / f"s{c}").mkdir()
            suite = read_suite(write_suite(tmp_path / f"s{c}", prompts_file, {"baseline": base_url, "spec": spec_url},
                                           max_tokens=9, concurrency=c, repeats=repeats))
            await run_suite(suite, tmp_path / f"run{c}")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    root = tmp_path / "prof"
    for c in (1, 2):
        assert main(["export", str(tmp_path / f"run{c}"), "-o", str(root)]) == 0
    runs, reqs = pd.read_parquet(root / "runs"), pd.read_parquet(root / "requests")
    assert sorted(runs.c) == [1, 1, 2, 2] and runs.run.nunique() == 2
    assert len(reqs) == 2 * 6 + 2 * 6 * 2 and sorted(set(reqs[reqs.c == 2].start)) == [0, 1]
    files = sorted(p.relative_to(root) for p in root.rglob("*.parquet"))
    # runs: a file per run and config; requests and outputs (each request's output ids): per repeat too
    assert len(files) == 2 * 2 + 2 * 2 * (1 + 2)
    assert main(["export", str(tmp_path / "run1"), "-o", str(root)]) == 0
    assert sorted(p.relative_to(root) for p in root.rglob("*.parquet")) == files
    again = pd.read_parquet(root / "runs")
    assert len(again) == 4 and again.sort_values(["c", "drafter"]).reset_index(drop=True).equals(
        runs.sort_values(["c", "drafter"]).reset_index(drop=True))
