"""Trust (issue 38 item 10): a re-export replaces its run's files all or nothing. Every new file is written
under a temporary name first; the earlier export's files are set aside, the new ones moved in, the earlier ones
removed. A write that fails, or an earlier file that cannot be removed, leaves the earlier export whole, nothing
of the new one, and one line saying which file and why; another run's files are never touched."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd

from specbench.cli import main
from tests.support.paths import DATA

RUN = DATA / "html" / "run"


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (temporary ones included: a leftover is a failure too) with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def exported(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    root = tmp_path / "prof"
    assert main(["export", str(RUN), "-o", str(root), "--gpu", "h100"]) == 0
    (root / "runs" / "other-run-r0.parquet").write_bytes(b"another run's export")
    return root, snapshot(root)


def test_an_earlier_file_that_cannot_be_removed_keeps_the_earlier_export_whole(tmp_path, capsys, monkeypatch):
    root, before = exported(tmp_path)
    earlier = sorted(p for p in root.rglob("*-r*.parquet") if not p.name.startswith("other"))
    stuck = earlier[len(earlier) // 2]  # some of the run's files are set aside before it: they come back
    real_replace, real_unlink = os.replace, Path.unlink

    def refuse(path: object) -> None:
        if Path(path) == stuck:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    def replace(src, dst, *a, **k):
        refuse(src)
        return real_replace(src, dst, *a, **k)

    def unlink(self, *a, **k):
        refuse(self)
        return real_unlink(self, *a, **k)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    assert main(["export", str(RUN), "-o", str(root), "--gpu", "h100"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"specbench: {stuck}: cannot set aside the earlier export's file "
                                                   "(Permission denied): the earlier export of this run is kept as it was"), lines
    assert snapshot(root) == before


def test_a_re_export_cut_by_a_full_disk_keeps_the_earlier_export_whole(tmp_path, capsys, monkeypatch):
    root, before = exported(tmp_path)
    calls, real = [], pd.DataFrame.to_parquet

    def fills_on_the_third(self, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fills_on_the_third)
    assert main(["export", str(RUN), "-o", str(root), "--gpu", "h100"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert snapshot(root) == before
