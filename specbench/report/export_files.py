"""How exported tables are named and written (``specbench export``): one rule for every table, so files of
many runs and machines stack under one root and a re-export replaces only its own run's files."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd

from ..schemas.meta import RunMeta
from ..util.diskio import all_or_none, make_output_dir, output_file

#: the columns a file is per: one directory per (gpu, target, split, drafter, k), one file per (run, start)
PART_KEYS = ("gpu", "target", "split", "drafter", "k", "start")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "none"


def run_id(meta: RunMeta | None, fallback: str) -> str:
    """A run's name in file names, the same wherever its directory is copied or moved: the suite, the
    time it started and a hash of what meta.json recorded first (suite file, host), so two runs started
    in the same second elsewhere still differ. Without meta.json: ``fallback`` (the directory's name)."""
    if meta is None or not meta.started_at:
        return slug(fallback)
    first = {"started_at": meta.started_at, "suite": meta.suite_name,
             "suite_file": meta.suite_file.sha256 if meta.suite_file else None,
             "host": meta.host.to_dict() if meta.host else None}
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()[:8]
    stamp = re.sub(r"[^0-9T]", "", meta.started_at.split("+")[0])
    return f"{slug(meta.suite_name or 'run')}-{stamp}-{digest}"


def part_path(out: Path, table: str, part: dict[str, object], run: str) -> Path:
    """The file of one run's rows of ``table`` for one (gpu, target, split, drafter, k, start): the one
    naming rule of every table, so files of different runs never collide and a re-export overwrites."""
    folder = out / table / slug(str(part["gpu"])) / slug(str(part["target"])) / slug(str(part["split"]))
    return folder / f"{part['drafter']}-k{part['k']}" / f"{run}-r{part['start']}.parquet"


def write_table(out: Path, table: str, frame: pd.DataFrame, run: str) -> list[Path]:
    """``frame`` (with the ``PART_KEYS`` columns) as one file per ``part_path``; first removes every
    file ``run`` has under ``out/table`` from an earlier export (cells or repeats since superseded),
    never another run's."""
    for old in list((out / table).rglob(f"{run}-r*.parquet")):
        if re.fullmatch(rf"{re.escape(run)}-r\d+\.parquet", old.name):
            old.unlink()
    with all_or_none() as written:  # a table cut half-way is removed: part of a run would read as all of it
        for key, part in frame.groupby(list(PART_KEYS), sort=False):
            path = part_path(out, table, dict(zip(PART_KEYS, key, strict=True)), run)
            make_output_dir(path.parent)
            with output_file(path) as tmp:
                part.to_parquet(tmp, index=False)
            written.append(path)
    return written
