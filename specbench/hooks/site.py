"""Making the step recorder loadable by a server, and turning it on for one launch.

vLLM finds plugins through entry points. specbench declares ``specbench_steplog`` in its own metadata
(pyproject), which is enough where the engine's Python has specbench installed; the CPU demo's engine
(and many users' GPU environments) does not. ``plugin_site`` gives a small folder — this package's hook
modules plus a ``specbench_steplog`` dist-info declaring the same entry point — to put first on the
server's ``PYTHONPATH``. vLLM keys plugins by entry-point name, so where both are visible one loads.

The folder is built once per specbench version and hook content, named by its sha256, in specbench's
cache (``CACHE/plugin/<sha256[:16]>/``), and reused while its files still hash to that name: a run records
the path and the sha256 (meta.json ``servers.<config>.steplog_plugin``) instead of carrying a copy. Where
the cache cannot be written the folder goes to a temporary directory of this process, removed at exit.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STEPLOG_LEVELS = ("off", "steps", "timing", "tokens")
ENTRY_POINT = "specbench_steplog = specbench.hooks.vllm_steplog:register"
DIST_INFO = "specbench_steplog-0.dist-info"
#: what Python writes into the folder when a server imports from it: not part of the folder's content
BYTECODE = "__pycache__"

_temp_sites: dict[str, Path] = {}  # sha256 → this process's temporary folder, where the cache is not writable


@dataclass(frozen=True)
class PluginSite:
    """The plugin folder a launch puts first on ``PYTHONPATH``, and the sha256 of its files (``tree_sha256``)."""

    path: Path
    sha256: str


def plugin_files(version: str) -> dict[str, bytes]:
    """The folder's files by relative path: every hook module (a new one can never be left behind), a package
    ``__init__`` that names the specbench ``version``, and the dist-info that declares the entry point."""
    here = Path(__file__).resolve().parent
    files = {"specbench/__init__.py": f'"""specbench\'s engine hooks only (a plugin folder)."""\n__version__ = {version!r}\n'.encode()}
    for path in sorted(here.glob("*.py")):
        files[f"specbench/hooks/{path.name}"] = path.read_bytes()
    files[f"{DIST_INFO}/METADATA"] = b"Metadata-Version: 2.1\nName: specbench_steplog\nVersion: 0\n"
    files[f"{DIST_INFO}/entry_points.txt"] = f"[vllm.general_plugins]\n{ENTRY_POINT}\n".encode()
    return files


def tree_sha256(files: Mapping[str, bytes]) -> str:
    """sha256 over the files in path order, each as its path, its size and its bytes."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{len(files[rel])}\0".encode())
        digest.update(files[rel])
    return digest.hexdigest()


def folder_sha256(folder: Path) -> str | None:
    """``tree_sha256`` of the files under ``folder`` (bytecode left out); None when it is not there or unreadable."""
    if not folder.is_dir():
        return None
    files = {}
    try:
        for path in folder.rglob("*"):
            rel = path.relative_to(folder)
            if BYTECODE not in rel.parts and not path.is_dir():
                files[rel.as_posix()] = path.read_bytes()
    except OSError:
        return None
    return tree_sha256(files)


def write_files(dest: Path, files: Mapping[str, bytes]) -> None:
    for rel, data in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)


def settled(folder: Path, files: Mapping[str, bytes], digest: str) -> Path:
    """``folder`` holding exactly ``files``: reused when intact, else written beside it and renamed into place,
    so a second process (a parallel run's worker) finds all of it or none; one damaged is replaced."""
    if folder_sha256(folder) == digest:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        write_files(tmp, files)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, folder)
        except OSError:  # there already: another process's, or damaged
            if folder_sha256(folder) != digest:
                shutil.rmtree(folder)
                os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if folder_sha256(folder) != digest:
        raise OSError(f"{folder}: its files changed while it was written")
    return folder


def plugin_site(cache: Path, version: str) -> PluginSite:
    """The plugin folder of this specbench ``version``'s hooks: ``cache/plugin/<sha256[:16]>/``, built once and
    reused while intact; a temporary folder of this process where the cache cannot be written."""
    files = plugin_files(version)
    digest = tree_sha256(files)
    try:
        return PluginSite(settled(cache / "plugin" / digest[:16], files, digest), digest)
    except OSError:
        pass
    folder = _temp_sites.get(digest)
    if folder is None or folder_sha256(folder) != digest:
        folder = Path(tempfile.mkdtemp(prefix="specbench-plugin-"))
        atexit.register(shutil.rmtree, folder, True)
        write_files(folder, files)
        _temp_sites[digest] = folder
    return PluginSite(folder, digest)


def steplog_env(level: str, log_dir: Path, site: Path, pythonpath: str | None) -> dict[str, str]:
    """The server's environment additions for one launch: the level, where its files go, and the plugin
    folder ahead of ``pythonpath`` (the launch's own PYTHONPATH, kept)."""
    if level not in STEPLOG_LEVELS:
        raise ValueError(f"steplog level {level!r}: one of {', '.join(STEPLOG_LEVELS)}")
    if level == "off":
        return {}
    return {"SPECBENCH_STEPLOG": level, "SPECBENCH_STEPLOG_DIR": str(log_dir),
            "PYTHONPATH": os.pathsep.join(p for p in (str(site), pythonpath) if p)}
