"""Making the step recorder loadable by a server, and turning it on for one launch.

vLLM finds plugins through entry points. specbench declares ``specbench_steplog`` in its own metadata
(pyproject), which is enough where the engine's Python has specbench installed; the CPU demo's engine
(and many users' GPU environments) does not. ``plugin_site`` writes a small folder — this package's hook
modules plus a ``specbench_steplog`` dist-info declaring the same entry point — to put first on the
server's ``PYTHONPATH``. vLLM keys plugins by entry-point name, so where both are visible one loads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

STEPLOG_LEVELS = ("off", "steps", "timing", "tokens")
ENTRY_POINT = "specbench_steplog = specbench.hooks.vllm_steplog:register"


def plugin_site(dest: Path) -> Path:
    """``dest`` holding ``specbench/hooks/`` and the dist-info that declares the entry point (idempotent)."""
    here = Path(__file__).resolve().parent
    pkg = dest / "specbench" / "hooks"
    pkg.mkdir(parents=True, exist_ok=True)
    (dest / "specbench" / "__init__.py").write_text('"""specbench\'s engine hooks only (a plugin folder)."""\n')
    for path in sorted(here.glob("*.py")):  # every hook module: a new one can never be left behind
        shutil.copyfile(path, pkg / path.name)
    info = dest / "specbench_steplog-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: specbench_steplog\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[vllm.general_plugins]\n{ENTRY_POINT}\n")
    return dest


def steplog_env(level: str, log_dir: Path, site: Path, pythonpath: str | None) -> dict[str, str]:
    """The server's environment additions for one launch: the level, where its files go, and the plugin
    folder ahead of ``pythonpath`` (the launch's own PYTHONPATH, kept)."""
    if level not in STEPLOG_LEVELS:
        raise ValueError(f"steplog level {level!r}: one of {', '.join(STEPLOG_LEVELS)}")
    if level == "off":
        return {}
    return {"SPECBENCH_STEPLOG": level, "SPECBENCH_STEPLOG_DIR": str(log_dir),
            "PYTHONPATH": os.pathsep.join(p for p in (str(site), pythonpath) if p)}
