"""What the ``-m gpu`` tests share: whether this host can run a CUDA engine at all."""

from __future__ import annotations

import os
import subprocess


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
