"""benchmarks/evidence.py: a run directory packed as one deterministic tar.xz, and an evidence folder checked against
its index (sizes, sha256, summaries, members that stay under their top folder, files left in git history). On
folders made here: the committed evidence is no test's input."""

from __future__ import annotations

import importlib.util
import io
import lzma
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "benchmarks" / "evidence.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("evidence", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


ev = _script()


def make_run(path: Path) -> Path:
    (path / "logs" / "steplog" / "_plugin" / "specbench").mkdir(parents=True)
    (path / "logs" / "steplog" / "_plugin" / "specbench" / "__init__.py").write_text("")
    (path / "logs" / "steplog" / "b-s0").mkdir()
    (path / "logs" / "steplog" / "b-s0" / "sched-1.jsonl").write_text('{"step": 1}\n')
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (path / "results.json").write_text("[]\n")
    (path / "results.md").write_text("| a |\n")
    (path / "logs" / "b.log").write_text("ready\n")
    return path


def index(folder: Path, *rows: str) -> None:
    head = "| file | what | date | cited by | bytes | sha256 |\n| --- | --- | --- | --- | --- | --- |\n"
    (folder / ev.INDEX).write_text("# index\n\n" + head + "".join(r + "\n" for r in rows))


def test_the_same_directory_packs_to_the_same_bytes_whatever_its_times(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    one = ev.pack_bytes(run, "r")
    for path in run.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    assert ev.pack_bytes(run, "r") == one
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(one))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["r", "r/logs", "r/logs/b.log", "r/logs/steplog", "r/logs/steplog/b-s0",
                                         "r/logs/steplog/b-s0/sched-1.jsonl", "r/results.json", "r/results.md"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}


def test_pack_writes_the_archive_and_its_summary_and_prints_the_row(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    folder = tmp_path / "ev"
    row = ev.pack(run, folder / "h200" / "r.tar.xz")
    data = (folder / "h200" / "r.tar.xz").read_bytes()
    assert (folder / "h200" / "r.md").read_text() == "| a |\n"
    assert row.endswith(f"| {len(data):,} | `{ev.sha256(folder / 'h200' / 'r.tar.xz')}` |")
    index(folder, row.replace(str(folder / "h200" / "r.tar.xz"), "h200/r.tar.xz"))
    assert ev.check(folder) == []
    (run / "link").symlink_to(run / "results.json")
    with pytest.raises(ev.EvidenceError, match=r"link: not a plain file or folder"):
        ev.pack(run, folder / "h200" / "r.tar.xz")
    with pytest.raises(ev.EvidenceError, match=r"named NAME\.tar\.xz"):
        ev.pack(run, folder / "r.tgz")


def test_check_names_each_mismatch(tmp_path: Path) -> None:
    folder = tmp_path / "ev"
    row = ev.pack(make_run(tmp_path / "run"), folder / "r.tar.xz").replace(str(folder / "r.tar.xz"), "r.tar.xz")
    (folder / "extra.json").write_text("{}\n")
    index(folder, row, f"| `gone.md` | x | d | — | 3 | `{'0' * 64}` |")
    (folder / "r.md").write_text("edited\n")
    assert ev.check(folder) == ["extra.json: not in README.md", f"{folder / 'r.md'}: not a copy of any .md file in r.tar.xz",
                                "gone.md: in README.md, no such file"]
    with (folder / "r.tar.xz").open("ab") as f:
        f.write(b"x")
    assert ev.check(folder)[1].startswith("r.tar.xz: ") and "README.md says" in ev.check(folder)[1]


def test_a_member_outside_its_top_folder_or_not_a_file_is_named(tmp_path: Path) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, kind in (("r/ok.md", tarfile.REGTYPE), ("../escape", tarfile.REGTYPE), ("r/l", tarfile.SYMTYPE)):
            info = tarfile.TarInfo(name)
            info.type = kind
            tar.addfile(info, io.BytesIO(b""))
    archive = tmp_path / "r.tar.xz"
    archive.write_bytes(lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ))
    assert ev.archive_problems(archive) == [f"{archive}: member '../escape' is not under r/",
                                            f"{archive}: member 'r/l' is not a plain file or folder"]


def test_a_file_left_in_git_history_is_checked_by_its_size_and_sha256(tmp_path: Path, capsys) -> None:
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "old.gz").write_bytes(b"measured\n")
    subprocess.run([*git, "add", "old.gz"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    folder = repo / "ev"
    folder.mkdir()
    digest = ev.hashlib.sha256(b"measured\n").hexdigest()
    index(folder, f"| `git show {commit[:12]}:old.gz` | its log | d | — | 9 | `{digest}` |")
    assert ev.check(folder) == []
    index(folder, f"| `git show {commit[:12]}:old.gz` | its log | d | — | 10 | `{digest}` |")
    assert ev.check(folder) == [f"git show {commit[:12]}:old.gz: 9 bytes sha256 {digest}, README.md says 10 bytes sha256 {digest}"]
    index(folder, f"| `git show {'f' * 12}:old.gz` | its log | d | — | 10 | `{digest}` |")  # not in this clone: said, not counted
    assert ev.check(folder) == [] and "not checked" in capsys.readouterr().err


def test_main_exits_1_on_a_mismatch_and_2_on_a_missing_run(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "ev"
    folder.mkdir()
    index(folder)
    (folder / "stray.txt").write_text("x")
    assert ev.main(["check", str(folder)]) == 1
    assert capsys.readouterr().err == "evidence: stray.txt: not in README.md\n"
    assert ev.main(["pack", str(tmp_path / "nope"), str(folder / "n.tar.xz")]) == 2
    assert "no such run directory" in capsys.readouterr().err
