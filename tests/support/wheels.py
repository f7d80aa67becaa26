"""Tiny wheels for the bundle tests: a ``--find-links`` folder stands in for PyPI, so pip resolves and
downloads offline; and a pip that reads no configuration and no index."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path


def make_wheel(folder: Path, name: str, version: str, requires: Sequence[str] = (), extras: Sequence[str] = (),
               script: bool = False) -> Path:
    """``NAME-VERSION-py3-none-any.whl`` with a module ``NAME`` (``VERSION = ...``) and its Requires-Dist."""
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{mod}/__init__.py", f"VERSION = {version!r}\n")
        if script:
            z.writestr(f"{mod}-{version}.data/scripts/{mod}-tool", "#!/bin/sh\necho tool\n")
            z.writestr(f"{mod}-{version}.data/purelib/{mod}_extra.py", "X = 1\n")
        z.writestr(f"{dist}/METADATA", "\n".join(meta) + "\n\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return path


def offline_pip(monkeypatch) -> None:
    """No PIP_* setting of this machine (an index URL, a config file) reaches the pip a test runs."""
    for key in list(os.environ):
        if key.startswith("PIP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
