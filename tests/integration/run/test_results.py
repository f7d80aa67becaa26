"""The rows a run writes after each cell (``run/results.py``: ``LiveRows``) are made from the finished pass's
records in memory, its raw files written first: byte for byte the rows ``build_rows`` makes from the files, after
every cell of a run and of its ``--resume``, without reading requests.jsonl or phases.jsonl again."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.run import rundir
from specbench.run.results import build_rows
from specbench.run.session import RunSession
from specbench.schemas.run_files import RESULTS
from specbench.suite import read_suite
from specbench.util.jsonio import write_json
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import baseline_and_spec, write_suite


@pytest.fixture
async def urls():
    base, base_runner, base_url = await start(Script(pattern=[1], ttft_s=0.005, gap_s=0.002))
    spec, spec_runner, spec_url = await start(Script(pattern=[1, 2, 4], k=3, ttft_s=0.005, gap_s=0.002, spec_stats=True))
    yield base_url, spec_url
    await base_runner.cleanup()
    await spec_runner.cleanup()


class Watch:
    """Around every ``RunSession.write``: how often it read a raw file, and whether results.json then held the
    rows rebuilt from the files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.inside, self.reads, self.writes, self.tmp = False, 0, 0, tmp_path
        original = RunSession.write
        for name in ("read_records", "read_phases"):
            monkeypatch.setattr(rundir, name, self.counted(getattr(rundir, name)))

        def write(session: RunSession, *, final: bool = False):
            self.inside = True
            try:
                rows = original(session, final=final)
            finally:
                self.inside = False
            self.check(session)
            return rows

        monkeypatch.setattr(RunSession, "write", write)

    def counted(self, read):
        def reading(*args, **kwargs):
            self.reads += self.inside
            return read(*args, **kwargs)
        return reading

    def check(self, session: RunSession) -> None:
        """results.json is what the raw files give, byte for byte (``write_json`` of ``build_rows``)."""
        run = session.dir
        rebuilt = build_rows(session.suite, run.read_phases(), run.read_requests(), run.path)
        write_json(self.tmp / "rebuilt.json", [r.to_dict() for r in rebuilt])
        assert (run.path / RESULTS).read_bytes() == (self.tmp / "rebuilt.json").read_bytes(), f"write {self.writes}"
        self.writes += 1


async def test_every_write_holds_the_rows_the_files_give_and_reads_no_raw_file(tmp_path, prompts_file, urls, monkeypatch):
    datasets = [{"name": name, "path": str(prompts_file), "requests": 4} for name in ("first", "second")]
    suite = read_suite(write_suite(tmp_path, baseline_and_spec(*urls), name="live", datasets=datasets, endpoint="chat",
                                   load={"concurrency": [1, 2], "repeats": 2, "max_tokens": 8, "temperature": 0,
                                         "warmup": 1}))
    watch = Watch(monkeypatch, tmp_path)
    first = await run_suite(suite, tmp_path / "out", only_configs=["baseline"])
    assert first.exit_code == 0 and watch.writes == 2 * 2 * 2 + 1  # every pass, then the finish
    again = await run_suite(suite, tmp_path / "out", resume=True)
    assert again.exit_code == 0 and len(again.rows) == 2 * 2 * 2 and watch.writes == 2 * (2 * 2 * 2 + 1)
    assert all(r.speedup_vs_baseline is not None for r in again.rows)  # the baseline's rows came from the files
    assert watch.reads == 0
