"""Committed evidence (``results/evidence/``): a run directory packed as one deterministic ``.tar.xz``, and the
folder checked against its index (``results/evidence/README.md``).

    python benchmarks/evidence.py pack RUN_DIR results/evidence/h200/NAME.tar.xz [--summary results.md] [--drop GLOB]
    python benchmarks/evidence.py check [results/evidence]

``pack`` writes the archive (files in path order, one top folder named like the archive, no times, owners or
modes beyond 644/755, xz preset 9e: the same directory packs to the same bytes), copies its summary (the run's
``results.md`` unless ``--summary`` names another file in it) beside it as ``NAME.md``, and prints the index row
to paste, with the archive's size and sha256. ``check`` says, one line each, what does not match: an archive or
file that the index does not list or lists with another size or sha256, a listed file that is missing, a
summary that is not the archive's own, an archive member that is not a plain file under its top folder. Exit 1
when something does not match.

Look at a run: ``tar -xJf results/evidence/h200/NAME.tar.xz -C /tmp && specbench report /tmp/NAME``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import re
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench.schemas.run_files import LOGS, RESULTS_MD  # noqa: E402

EVIDENCE = ROOT / "results" / "evidence"
INDEX = "README.md"
SUFFIX = ".tar.xz"
PRESET = 9 | lzma.PRESET_EXTREME
#: what never goes into an archive: bytecode, and the plugin folder older runs copied into logs/steplog/
ALWAYS_DROPPED = ("*__pycache__*", f"*{LOGS}/steplog/_plugin", f"*{LOGS}/steplog/_plugin/*")
#: an index row: | `path` | what | date | cited by | bytes | sha256 |; a file left in git history: | `git show C:P` | …
ROW = re.compile(r"^\|\s*`([^`\s]+)`\s*\|.*\|\s*([\d,]+)\s*\|\s*`?([0-9a-f]{64})`?\s*\|\s*$")
HISTORY = re.compile(r"^\|\s*`git show ([0-9a-f]{7,40}:[^`\s]+)`\s*\|.*\|\s*([\d,]+)\s*\|\s*`?([0-9a-f]{64})`?\s*\|\s*$")


class EvidenceError(Exception):
    """What stops a pack, as one line naming the path."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def members(run_dir: Path, drop: Sequence[str] = ()) -> list[Path]:
    """The files and folders of ``run_dir`` that go into its archive, in path order (a link is refused)."""
    out = []
    for path in sorted(run_dir.rglob("*"), key=lambda p: p.relative_to(run_dir).as_posix()):
        rel = path.relative_to(run_dir).as_posix()
        if any(fnmatch(rel, g) for g in (*ALWAYS_DROPPED, *drop)):
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise EvidenceError(f"{path}: not a plain file or folder; an archive holds only those")
        out.append(path)
    return out


def pack_bytes(run_dir: Path, top: str, drop: Sequence[str] = ()) -> bytes:
    """``run_dir`` as a deterministic tar.xz whose one top folder is ``top``."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        def add(name: str, path: Path | None) -> None:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path is None or path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                data = path.read_bytes()
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        add(top, None)
        for path in members(run_dir, drop):
            add(f"{top}/{path.relative_to(run_dir).as_posix()}", path)
    return lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=PRESET)


def top_name(archive: Path) -> str:
    if not archive.name.endswith(SUFFIX) or archive.name == SUFFIX:
        raise EvidenceError(f"{archive}: an evidence archive is named NAME{SUFFIX}")
    return archive.name[: -len(SUFFIX)]


def pack(run_dir: Path, archive: Path, summary: str | None = RESULTS_MD, drop: Sequence[str] = ()) -> str:
    """Write ``archive`` (and its summary beside it) from ``run_dir``; the index row to paste."""
    if not run_dir.is_dir():
        raise EvidenceError(f"{run_dir}: no such run directory")
    top = top_name(archive)
    data = pack_bytes(run_dir, top, drop)
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(data)
    if summary is not None and (run_dir / summary).is_file():
        archive.with_name(f"{top}.md").write_bytes((run_dir / summary).read_bytes())
    try:
        shown = archive.resolve().relative_to(EVIDENCE).as_posix()
    except ValueError:
        shown = archive.as_posix()
    return f"| `{shown}` | WHAT | DATE | CITED BY | {len(data):,} | `{hashlib.sha256(data).hexdigest()}` |"


@dataclass(frozen=True)
class Listed:
    path: str
    size: int
    sha256: str


def index_rows(index: Path, pattern: re.Pattern[str] = ROW) -> list[Listed]:
    """The rows of the index's tables that name a file (or, with ``HISTORY``, a ``git show`` object), its size and
    its sha256."""
    out = []
    for line in index.read_text(encoding="utf-8").splitlines():
        m = pattern.match(line)
        if m:
            out.append(Listed(m.group(1), int(m.group(2).replace(",", "")), m.group(3)))
    return out


def history_problems(index: Path) -> list[str]:
    """A file the index says stays in git history that git does not give with that size and sha256; where this is
    no checkout holding the commit (a shallow clone, an unpacked tarball) that is said, not counted."""
    problems = []
    for row in index_rows(index, HISTORY):
        done = subprocess.run(["git", "-C", str(index.parent), "cat-file", "blob", row.path], capture_output=True)
        if done.returncode != 0:
            print(f"evidence: note: git show {row.path}: {done.stderr.decode(errors='replace').strip()}; not checked",
                  file=sys.stderr)
            continue
        digest = hashlib.sha256(done.stdout).hexdigest()
        if (len(done.stdout), digest) != (row.size, row.sha256):
            problems.append(f"git show {row.path}: {len(done.stdout):,} bytes sha256 {digest}, {INDEX} says "
                            f"{row.size:,} bytes sha256 {row.sha256}")
    return problems


def archive_problems(archive: Path) -> list[str]:
    """An archive member that is not a plain file or folder under the archive's one top folder, named safely."""
    top, problems = top_name(archive), []
    summary = archive.with_name(f"{top}.md")
    want = summary.read_bytes() if summary.is_file() else None
    found = want is None
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for m in tar:
                parts = PurePosixPath(m.name).parts
                if m.name.startswith("/") or ".." in parts or not parts or parts[0] != top:
                    problems.append(f"{archive}: member {m.name!r} is not under {top}/")
                elif not (m.isfile() or m.isdir()):
                    problems.append(f"{archive}: member {m.name!r} is not a plain file or folder")
                elif not found and m.isfile() and m.name.endswith(".md"):
                    f = tar.extractfile(m)
                    found = f is not None and f.read() == want
    except (tarfile.TarError, lzma.LZMAError, OSError, EOFError) as err:
        return [f"{archive}: cannot read: {err}"]
    if not found:
        problems.append(f"{summary}: not a copy of any .md file in {archive.name}")
    return problems


def check(folder: Path) -> list[str]:
    """What in ``folder`` does not match its index (empty: all listed, all intact)."""
    index = folder / INDEX
    if not index.is_file():
        return [f"{index}: no index"]
    listed = {r.path: r for r in index_rows(index)}
    problems = []
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p != index)
    summaries = {p.with_name(top_name(p) + ".md") for p in files if p.name.endswith(SUFFIX)}
    for path in files:
        rel = path.relative_to(folder).as_posix()
        if path in summaries:
            continue
        row = listed.pop(rel, None)
        if row is None:
            problems.append(f"{rel}: not in {INDEX}")
            continue
        size, digest = path.stat().st_size, sha256(path)
        if (size, digest) != (row.size, row.sha256):
            problems.append(f"{rel}: {size:,} bytes sha256 {digest}, {INDEX} says {row.size:,} bytes sha256 {row.sha256}")
        if rel.endswith(SUFFIX):
            problems += archive_problems(path)
    problems += [f"{rel}: in {INDEX}, no such file" for rel in listed]
    return problems + history_problems(index)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="evidence", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="pack a run directory into one deterministic .tar.xz")
    a.add_argument("run_dir", type=Path)
    a.add_argument("archive", type=Path)
    a.add_argument("--summary", default=RESULTS_MD, help="the file of the run copied beside the archive as NAME.md")
    a.add_argument("--drop", action="append", default=[], help="a glob of paths (relative to the run) left out")
    c = sub.add_parser("check", help="the evidence folder against its index")
    c.add_argument("folder", type=Path, nargs="?", default=EVIDENCE)
    args = p.parse_args(argv)
    try:
        if args.cmd == "pack":
            print(pack(args.run_dir, args.archive, args.summary, args.drop))
            return 0
        problems = check(args.folder)
    except (EvidenceError, OSError) as err:
        print(f"evidence: {err}", file=sys.stderr)
        return 2
    for line in problems:
        print(f"evidence: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
