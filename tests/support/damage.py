"""Damage done to copies of committed runs after they were written, as a disk, a copy or a hand can do it:
files cut in the middle of a line, files copied in from another launch or run, lines recorded twice, a gzip
stream cut or corrupt (for tests/faults/test_damaged_runs.py; tests/integration/benchmarks/test_gpu_scripts.py reads
an undamaged copy)."""

from __future__ import annotations

import json
import tarfile
import zlib
from pathlib import Path

from tests.support.paths import RUNS

#: copies of committed runs, one archive each (the evidence's own, never read from there): SmolLM2 on one H200 with
#: the step log at ``steps`` (baseline) and ``tokens`` (ngram_k3), one pass each, whole; and 8B with DSpark, only its
#: results, meta, phases and the gzipped requests.jsonl
TOKENS_SMOL = RUNS / "damaged" / "tokens_smol.tar.xz"
SWING_8B = RUNS / "damaged" / "swing_8b.tar.xz"
DAY_S = 86_400.0


def copy_run(source: Path, dest: Path) -> Path:
    """A copy of a committed run directory (unpacked from its archive into ``dest``), to damage."""
    dest.mkdir(parents=True)
    with tarfile.open(source, "r:xz") as tar:
        tar.extractall(dest, filter="data")
    (top,) = list(dest.iterdir())
    for item in list(top.iterdir()):
        item.rename(dest / item.name)
    top.rmdir()
    return dest


def cut_file(path: Path, keep: float) -> int:
    """Cut ``path`` to ``keep`` of its bytes, in the middle of a line; the number of whole lines left."""
    data = path.read_bytes()
    end = int(len(data) * keep)
    while data[end - 1:end] == b"\n":  # a cut between lines would not be in the middle of one
        end -= 1
    path.write_bytes(data[:end])
    return data[:end].count(b"\n")


def shifted_lines(path: Path, by_s: float) -> str:
    """The JSON lines of ``path`` with every ``wall`` (and ``written_at``) moved by ``by_s``: the same file
    as another run would have written it."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        for key in ("wall", "written_at"):
            if key in row:
                row[key] += by_s
        out.append(json.dumps(row))
    return "".join(line + "\n" for line in out)


def gzip_with_bad_block(good: bytes, rest: bytes) -> bytes:
    """A gzip file holding ``good`` intact, then a deflate block of the reserved type (a corrupt stream:
    zlib's "invalid block type"), then ``rest`` that can no longer be reached."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = comp.compress(good) + comp.flush(zlib.Z_FULL_FLUSH)  # byte-aligned: the next block starts here
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + body + b"\x07" + zlib.compress(rest)
