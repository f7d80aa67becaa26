"""Issue 31, item 3: ``--resume`` never pairs different prompts. A run cut after its baseline, then
its prompt file edited (same ids, new texts): the resume is refused in one line naming the data set
and the file, before anything is measured or written; unchanged prompts resume; a run from before
prompts were hashed resumes with a note that they could not be checked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from specbench.cli import main
from specbench.report.notes import sentence
from specbench.schemas.meta import RunMeta
from tests.support.suites import write_fault_suite


def cli(*args: str) -> int:
    return main(["run", *args, "--quiet"])


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def write_prompts(path: Path, word: str) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"{word} question {i}"}) + "\n" for i in range(4)))
    return path


def cut_after_baseline(out: Path) -> None:
    """As if the run had been stopped once the baseline was measured: the spec config's lines go."""
    for name in ("phases.jsonl", "requests.jsonl"):
        lines = (out / name).read_text().splitlines()
        kept = [line for line in lines if json.loads(line).get("config") != "spec"]
        assert len(kept) < len(lines)
        (out / name).write_text("".join(line + "\n" for line in kept))


async def baseline_only_run(tmp_path: Path, scripted) -> tuple[Path, Path, Path, object]:
    server, url = await scripted()
    prompts = write_prompts(tmp_path / "prompts.jsonl", "first")
    configs = [{"name": "baseline", "url": url}, {"name": "spec", "url": url}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts, configs, requests=4)
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 0
    cut_after_baseline(out)
    return suite, prompts, out, server


async def test_resume_after_the_prompt_file_changed_is_refused_naming_the_data_set(tmp_path, scripted, capsys):
    suite, prompts, out, server = await baseline_only_run(tmp_path, scripted)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["prompts"]["prompts"]["prompts"] == 4 and meta["prompts"]["prompts"]["source"] == str(prompts)
    write_prompts(prompts, "edited")  # same ids, new texts: the suite entry (and its fingerprint) is unchanged
    before, sent = files(out), server.requests
    capsys.readouterr()

    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data set 'prompts'" in err[0] and str(prompts) in err[0] and "changed" in err[0], err
    assert server.requests == sent, "nothing is measured"
    assert files(out) == before, "the run dir is untouched"

    write_prompts(prompts, "first")  # the prompts the baseline was measured with: the resume goes on
    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
    rows = json.loads((out / "results.json").read_text())
    assert sorted((r["run"], r["requests"]) for r in rows) == [("baseline", 4), ("spec", 4)]
    assert json.loads((out / "meta.json").read_text())["prompts"] == meta["prompts"]


async def test_a_data_set_not_measured_yet_may_change(tmp_path, scripted):
    suite, prompts, out, _ = await baseline_only_run(tmp_path, scripted)
    for name in ("phases.jsonl", "requests.jsonl"):
        (out / name).write_text("")  # nothing measured: the edited prompts are the first any config gets
    write_prompts(prompts, "edited")
    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
    stored = json.loads((out / "meta.json").read_text())["prompts"]["prompts"]["sha256"]
    assert await asyncio.to_thread(cli, str(suite), "-o", str(tmp_path / "fresh")) == 0
    assert stored == json.loads((tmp_path / "fresh" / "meta.json").read_text())["prompts"]["prompts"]["sha256"]


async def test_a_run_from_before_prompt_hashes_resumes_with_a_note(tmp_path, scripted):
    suite, prompts, out, _ = await baseline_only_run(tmp_path, scripted)
    meta = json.loads((out / "meta.json").read_text())
    del meta["prompts"]  # meta.json as specbench wrote it before it hashed the prompts
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    write_prompts(prompts, "edited")
    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
    resumed = json.loads((out / "meta.json").read_text())
    assert "prompts" not in resumed, "a hash written now would claim to cover the baseline's prompts"
    meta = RunMeta.from_dict(resumed)
    notes = [n for n in meta.run_dir_notes if "without checking the prompts" in sentence(n)]
    assert len(notes) == 1 and any("without checking the prompts" in sentence(n) for n in meta.notes)
    assert "without checking the prompts" in (out / "results.md").read_text()
