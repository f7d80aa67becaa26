"""Profiling-table export: runs/ and requests/ parquet under TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/."""

import pandas as pd

from specbench.cli import main
from specbench.suite import load_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import write_e2e_suite as write_suite


async def test_export_profilings_layout(tmp_path, prompts_file):
    base, r1, base_url = await start(Script(pattern=[1], token_ids=True))
    spec, r2, spec_url = await start(Script(pattern=[3, 1], k=3, token_ids=True))
    try:
        suite = load_suite(write_suite(tmp_path, prompts_file, {"baseline": base_url, "spec": spec_url}, max_tokens=9))
        await run_suite(suite, tmp_path / "run")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    assert main(["export", str(tmp_path / "run"), "-o", str(tmp_path / "prof"), "--gpu", "H100"]) == 0
    spec_dir = tmp_path / "prof" / "requests" / "H100" / "smol" / "prompts" / "ngram-k3"
    assert (spec_dir / "part-0.parquet").exists()
    assert (tmp_path / "prof" / "runs" / "H100" / "smol" / "prompts" / "none-k0" / "part-0.parquet").exists()
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
