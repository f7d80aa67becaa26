"""Trust: every file or folder a command writes where ``-o`` says (report, compare, profile, trace,
export, report --format parquet/html, setup shape/drafter/bundle/sharegpt) goes through one mechanism
(``specbench/util/diskio.py``), so a bad place is one line naming the path, exit 2, before any work;
a full disk while writing is one line, exit 1, and leaves nothing under the output's name.

Read-only places and full disks are real tmpfs mounts (root only; those tests skip elsewhere), plus
one ENOSPC injected into the low-level write that runs everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from specbench.cli import main
from tests.faults.test_disk_and_directory import fill, tmpfs
from tests.support.paths import DATA, ROOT

RUN = DATA / "html" / "run"  # a finished run with a speculative config (profile has something to extract)
QWEN3_8B = ROOT / "suites" / "models" / "qwen3-8b.config.json"

#: command → its arguments before ``-o``; each writes one file
FILE_COMMANDS = {
    "report": ["report", str(RUN)],
    "report-json": ["report", str(RUN), "--format", "json"],
    "report-html": ["report", str(RUN), "--format", "html"],
    "report-history": ["report", str(RUN.parent)],  # a directory of runs: the history report
    "compare": ["compare", str(RUN), str(RUN)],
    "profile": ["profile", str(RUN)],
    "trace": ["trace", "no-such-suite.yaml", "--prompt", "hi"],  # the output is refused before the suite is read
}


def target(tmp_path: Path) -> Path:
    """A tiny decoder config with a tokenizer: a drafter for it is a few KiB."""
    d = tmp_path / "target"
    d.mkdir()
    cfg = {"architectures": ["X"], "model_type": "qwen3", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 6,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 23}
    (d / "config.json").write_text(json.dumps(cfg))
    shutil.copy(DATA / "tokenizer" / "tokenizer.json", d / "tokenizer.json")
    return d


def dir_commands(tmp_path: Path) -> dict[str, list[str]]:
    """command → its arguments before ``-o``; each writes a folder."""
    return {
        "export": ["export", str(RUN)],
        "report-parquet": ["report", str(RUN), "--format", "parquet"],
        "setup-shape": ["setup", "shape", "--config", str(QWEN3_8B), "--tokenizer", str(DATA / "tokenizer")],
        "setup-drafter": ["setup", "drafter", "--method", "dspark", "--target", str(target(tmp_path))],
        "setup-bundle": ["setup", "bundle", "--engine", "vllm==0.26.0"],
        "setup-sharegpt": ["setup", "sharegpt", "--from", str(DATA / "prompt_sources" / "ShareGPT_V3_unfiltered_cleaned_split.json")],
    }


def refused(capsys, args: list[str], path: Path, reason: str, code: int = 2) -> None:
    """``args`` ends with exit ``code`` and, as its last stderr line, one line naming ``path`` and ``reason``."""
    assert main(args) == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and lines[-1].startswith(f"specbench: {path}: ") and reason in lines[-1], lines
    assert "Traceback" not in "\n".join(lines)


def listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


# ---- a file is wanted ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FILE_COMMANDS)
def test_file_output_in_a_missing_directory_is_one_line(name, tmp_path, capsys):
    out = tmp_path / "missing" / "out.txt"
    refused(capsys, [*FILE_COMMANDS[name], "-o", str(out)], out, f"the directory {out.parent} does not exist")
    assert listing(tmp_path) == []


@pytest.mark.parametrize("name", FILE_COMMANDS)
def test_file_output_under_a_file_is_one_line(name, tmp_path, capsys):
    (tmp_path / "afile").write_text("keep")
    out = tmp_path / "afile" / "out.txt"
    refused(capsys, [*FILE_COMMANDS[name], "-o", str(out)], out, f"{tmp_path / 'afile'} is a file, not a directory")
    assert (tmp_path / "afile").read_text() == "keep" and listing(tmp_path) == ["afile"]


@pytest.mark.parametrize("name", [n for n in FILE_COMMANDS if n != "report-html"])
def test_file_output_that_is_a_directory_is_one_line(name, tmp_path, capsys):
    out = tmp_path / "adir"
    out.mkdir()
    refused(capsys, [*FILE_COMMANDS[name], "-o", str(out)], out, "is a directory, and a file is wanted here")
    assert listing(tmp_path) == ["adir"]


def test_html_into_a_directory_writes_report_html_there(tmp_path, capsys):
    assert main([*FILE_COMMANDS["report-html"], "-o", str(tmp_path)]) == 0
    assert listing(tmp_path) == ["report.html"] and "</html>" in (tmp_path / "report.html").read_text()
    (tmp_path / "report.html").unlink()
    (tmp_path / "report.html").mkdir()
    refused(capsys, [*FILE_COMMANDS["report-html"], "-o", str(tmp_path)], tmp_path / "report.html", "is a directory")


@pytest.mark.parametrize("name", FILE_COMMANDS)
def test_file_output_on_a_read_only_file_system_is_one_line(name, tmp_path, capsys):
    with tmpfs(tmp_path / "ro", "64k", "ro") as ro:
        out = ro / "out.txt"
        refused(capsys, [*FILE_COMMANDS[name], "-o", str(out)], out, "Read-only file system")


@pytest.mark.parametrize("name", ["report", "report-html", "report-history", "compare", "profile"])
def test_a_full_disk_while_writing_a_file_is_one_line_exit_1_and_leaves_nothing(name, tmp_path, capsys):
    with tmpfs(tmp_path / "disk", "64k") as disk:
        (disk / "out.txt").write_text("before")
        fill(disk)
        refused(capsys, [*FILE_COMMANDS[name], "-o", str(disk / "out.txt")], disk / "out.txt", "No space left on device", code=1)
        assert listing(disk) == ["filler", "out.txt"] and (disk / "out.txt").read_text() == "before"


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_enospc_in_the_low_level_write_is_one_line_without_a_tmpfs(tmp_path, capsys, monkeypatch):
    """Where no tmpfs can be mounted: the sync of the temporary file fails as a full disk would."""
    monkeypatch.setattr(os, "fsync", enospc)
    out = tmp_path / "r.md"
    refused(capsys, [*FILE_COMMANDS["report"], "-o", str(out)], out, "No space left on device", code=1)
    assert listing(tmp_path) == []


def test_enospc_while_writing_safetensors_without_a_tmpfs(tmp_path, capsys, monkeypatch):
    """A tensor's bytes fail to go out part way: one line, exit 1, no model file and no partial file."""
    import specbench.util.tensorfile as tensorfile

    monkeypatch.setattr(tensorfile, "encode", enospc)
    out = tmp_path / "d"
    assert main([*dir_commands(tmp_path)["setup-drafter"], "-o", str(out)]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"specbench: {out / 'model.safetensors'}: cannot write: No space left on device; nothing was left under that name"
    assert listing(out) == []


def test_an_export_cut_by_a_full_disk_leaves_none_of_its_files(tmp_path, capsys, monkeypatch):
    """The disk fills after two of the run's parquet files: those two go again, since the tables
    would read as the whole run; what was under the root before stays."""
    import pandas as pd

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "older.parquet").write_text("another export's")
    calls, real = [], pd.DataFrame.to_parquet

    def fills_on_the_third(self, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fills_on_the_third)
    assert main(["export", str(RUN), "-o", str(tmp_path / "out")]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert [p for p in listing(tmp_path / "out") if p.endswith("parquet")] == ["older.parquet"]


def test_profile_refusal_does_not_speak_of_resume(tmp_path, capsys):
    out = tmp_path / "missing" / "dir" / "p.json"
    refused(capsys, ["profile", str(RUN), "-o", str(out)], out, "does not exist")
    with tmpfs(tmp_path / "disk", "64k") as disk:
        fill(disk)
        assert main(["profile", str(RUN), "-o", str(disk / "p.json")]) == 1
    assert "--resume" not in capsys.readouterr().err


# ---- a folder is wanted ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["export", "report-parquet", "setup-shape", "setup-drafter", "setup-bundle", "setup-sharegpt"])
def test_folder_output_that_is_a_file_is_one_line(name, tmp_path, capsys):
    args = dir_commands(tmp_path)[name]
    (tmp_path / "afile").write_text("keep")
    refused(capsys, [*args, "-o", str(tmp_path / "afile")], tmp_path / "afile", "is a file, and a directory is wanted here")
    sub = tmp_path / "afile" / "sub"
    refused(capsys, [*args, "-o", str(sub)], sub, f"{tmp_path / 'afile'} is a file, not a directory")
    assert (tmp_path / "afile").read_text() == "keep"


@pytest.mark.parametrize("name", ["export", "report-parquet", "setup-shape", "setup-drafter", "setup-bundle", "setup-sharegpt"])
def test_folder_output_on_a_read_only_file_system_is_one_line(name, tmp_path, capsys):
    args = dir_commands(tmp_path)[name]
    with tmpfs(tmp_path / "ro", "64k", "ro") as ro:
        refused(capsys, [*args, "-o", str(ro / "a" / "b")], ro / "a" / "b", "Read-only file system")


@pytest.mark.parametrize("name", ["export", "setup-shape", "setup-drafter", "setup-sharegpt"])
def test_a_missing_folder_is_made_with_its_parents(name, tmp_path):
    out = tmp_path / "a" / "b"
    assert main([*dir_commands(tmp_path)[name], "-o", str(out)]) == 0
    assert listing(out) and not [p for p in listing(out) if p.rsplit("/", 1)[-1].startswith(".")]


@pytest.mark.parametrize("name", ["export", "setup-shape", "setup-drafter", "setup-sharegpt"])
def test_a_full_disk_while_writing_a_folder_is_one_line_exit_1_and_no_model_folder(name, tmp_path, capsys):
    args = dir_commands(tmp_path)[name]
    with tmpfs(tmp_path / "disk", "64k") as disk:
        fill(disk)
        assert main([*args, "-o", str(disk / "out")]) == 1
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines[-1].startswith(f"specbench: {disk / 'out'}/") and "No space left on device" in lines[-1], lines
        left = listing(disk)
        assert not [p for p in left if p.rsplit("/", 1)[-1].startswith(".")]  # no temporary file
        assert not {"out/config.json", "out/model.safetensors", "out/sharegpt.jsonl"} & set(left)


def test_a_full_disk_over_a_forced_model_folder_leaves_no_config(tmp_path, capsys):
    """`--force` over a whole drafter, and the disk fills: the folder now mixes old and new files, so it
    must not read as a model any more (no config.json), and no half safetensors file is left."""
    args = dir_commands(tmp_path)["setup-drafter"]
    with tmpfs(tmp_path / "disk", "256k") as disk:
        assert main([*args, "--no-weights", "-o", str(disk / "d")]) == 0
        fill(disk)
        assert main([*args, "--force", "-o", str(disk / "d")]) == 1
        assert "No space left on device" in capsys.readouterr().err
        assert listing(disk / "d") == ["specbench_drafter.json"]
