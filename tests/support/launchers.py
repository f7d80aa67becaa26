"""Launcher YAMLs that start fake engines (scripted servers) the way specbench starts vLLM."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from tests.support.paths import PACKAGE_ENV, ROOT, SCRIPTED, SUPPORT


def write_launcher(d: Path, name: str, **fields) -> Path:
    path = d / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **fields}))
    return path


def write_fault_launchers(d: Path, marker: str) -> None:
    """``fake`` (the scripted server as the engine command) and ``fake-wrapped`` (tests/support/wrapped_engine.py:
    takes --api-key / --spawn-child / --die-once), their processes marked by ``marker`` in their environment."""
    shutil.copy(ROOT / "launchers" / "vllm.yaml", d / "vllm.yaml")
    common = {"extends": "vllm", "python": sys.executable, "args": ["--port", "{port}", "--model", "{model}"],
              "env": {"SPECBENCH_FAULTS_MARKER": marker}, "gpu_env": None}
    write_launcher(d, "fake", **common, command=["{python}", str(SCRIPTED)])
    write_launcher(d, "fake-wrapped", **common, command=["{python}", str(SUPPORT / "wrapped_engine.py")])


def write_parallel_launcher(d: Path) -> None:
    """``fake``: tests/support/parallel_engine.py, reading vLLM's --speculative-config."""
    shutil.copy(ROOT / "launchers" / "vllm.yaml", d / "vllm.yaml")
    write_launcher(d, "fake", extends="vllm", python=sys.executable, env=PACKAGE_ENV,
                   command=["{python}", str(SUPPORT / "parallel_engine.py")],
                   args=["--model", "{model_path}", "--served-model-name", "{model}", "--host", "{host}", "--port", "{port}"])
