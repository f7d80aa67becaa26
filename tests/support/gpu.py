"""What the ``-m gpu`` tests share: whether this host can run a CUDA engine, and the run dir they check."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from .paths import ROOT


def cuda_engine_missing(module: str) -> str | None:
    """Why a GPU test cannot run here, or None when the engine's Python imports ``module`` with CUDA."""
    python = os.environ.get("SPECBENCH_ENGINE_PYTHON") or "python3"
    probe = f"import torch, {module}; assert torch.cuda.is_available(), 'no CUDA device'"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python}: {e}"
    if done.returncode != 0:
        return f"{python} cannot import a CUDA {module}: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


MODELS = Path.home() / ".cache" / "specbench" / "models"


def gpu_run_dir(env_var: str, module: str, models: Sequence[str], argv: Sequence[str], tmp_path: Path) -> Path:
    """The run dir a ``-m gpu`` test checks: ``$env_var`` (a run made already, e.g. by run_h200.sh), else a
    fresh ``specbench`` run of ``argv`` (``-o`` appended); skips when this host has no CUDA ``module`` or
    lacks a prepared model."""
    made = os.environ.get(env_var)
    if made:
        return Path(made)
    why = cuda_engine_missing(module)
    if why:
        pytest.skip(why)
    for name in models:
        if not (MODELS / name / "config.json").exists():
            pytest.skip(f"{MODELS / name} missing: prepare it as docs/gpu.md says")
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "specbench.cli", *argv, "-o", str(run_dir), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True)
    assert (run_dir / "results.json").exists(), done.stderr[-2000:]
    return run_dir
