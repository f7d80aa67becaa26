"""``specbench run`` prints what results.md holds, byte for byte: the tables and every note under
them (the run's metadata, the dummy-weights warning), not a second render without them."""

from __future__ import annotations

import asyncio
import json

from specbench.cli import main
from specbench.report.notes import sentence
from specbench.schemas.meta import RunMeta
from tests.support.suites import write_suite

LOAD = {"concurrency": 2, "max_tokens": 8, "temperature": 0, "warmup": 0, "timeout_s": 30}


async def test_stdout_is_results_md(tmp_path, prompts_file, scripted, capsys):
    _, base = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    _, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.001)
    configs = [{"name": "baseline", "url": base},
               {"name": "ngram_k3", "url": spec, "method": "ngram", "num_speculative_tokens": 3, "load_format": "dummy"}]
    suite = write_suite(tmp_path, configs, name="stdout", prompts=prompts_file, requests=4, load=LOAD)
    out = tmp_path / "out"
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["run", str(suite), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == (out / "results.md").read_text()
    notes = RunMeta.from_dict(json.loads((out / "meta.json").read_text())).notes
    assert len(notes) >= 5 and all(f"- {sentence(n)}" in printed for n in notes)
    assert "dummy weights (ngram_k3:" in printed
