"""The o200k_base encoding file: found on this machine, read and checked (its sha256) here, at the run
stage's edge, so ``measure.o200k`` only computes. The file is ``load.tiktoken_file``, else
``SPECBENCH_TIKTOKEN_FILE``, else tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else
``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``; the file is named by the sha1 of its blob URL,
as ``tiktoken.load.read_file_cached`` names it), and is used only when its sha256 is o200k_base's:
never downloaded mid-run."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..measure.o200k import O200K_URL, O200k, encoding_from

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
ENV = "SPECBENCH_TIKTOKEN_FILE"


def cache_file(env: Mapping[str, str] = os.environ) -> Path | None:
    """Where tiktoken keeps o200k_base once downloaded (``tiktoken.load.read_file_cached``'s rule); None
    when its cache is switched off (an empty ``TIKTOKEN_CACHE_DIR``)."""
    if "TIKTOKEN_CACHE_DIR" in env:
        folder = env["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in env:
        folder = env["DATA_GYM_CACHE_DIR"]
    else:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(folder) / hashlib.sha1(O200K_URL.encode()).hexdigest() if folder else None


def find_o200k(given: str | None = None, env: Mapping[str, str] = os.environ) -> O200k:
    """The encoding from ``given`` (``load.tiktoken_file``), ``SPECBENCH_TIKTOKEN_FILE`` or tiktoken's cache."""
    if given:
        return _read_o200k(given, "load.tiktoken_file")
    if env.get(ENV):
        return _read_o200k(env[ENV], ENV)
    cached = cache_file(env)
    if cached is not None and cached.is_file():
        return _read_o200k(str(cached), "tiktoken's cache file")
    where = f"not cached ({cached})" if cached is not None else "not cached (TIKTOKEN_CACHE_DIR is empty: tiktoken's cache is off)"
    return O200k(error=f"o200k_base.tiktoken {where} and no load.tiktoken_file or {ENV}: not downloaded mid-run")


def _read_o200k(path: str, where: str) -> O200k:
    try:
        stat = os.stat(path)
    except OSError as err:
        return O200k(error=f"{where} {path}: {err.strerror or err}", path=path)
    return _read(path, where, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read(path: str, where: str, mtime_ns: int, size: int) -> O200k:
    """One encoding per file version: rows are rebuilt after every phase, the encoding is built once."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        return O200k(error=f"{where} {path}: {err.strerror or err}", path=path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        return O200k(error=f"{where} {path}: not o200k_base.tiktoken (sha256 {digest[:12]}…, o200k_base's is "
                           f"{O200K_SHA256[:12]}…)", path=path)
    try:
        return O200k(encoding=encoding_from(data, path), path=path)
    except (ValueError, RuntimeError) as err:
        return O200k(error=f"{where} {path}: {err}", path=path)
