"""The CPU engine `specbench setup cpu` prepares, which the `-m engine` tests start: where it is, and the check each
of their modules makes first (through the ``cpu_engine`` / ``cpu_engine_python`` fixtures in tests/conftest.py)."""

import os

import pytest

from specbench.launch.setup_cpu import MODEL_NAME, cache_dir

ENGINE_PY = cache_dir() / "engine" / "bin" / "python"
MODEL = cache_dir() / "models" / MODEL_NAME


def require_cpu_engine(model: bool = True) -> None:
    """Return when the engine's Python (and, with ``model``, the model) is there; otherwise skip, or fail when
    SPECBENCH_REQUIRE_ENGINE=1 (set by .ci/run), so CI cannot pass with its engine tests unrun."""
    if ENGINE_PY.exists() and (not model or (MODEL / "config.json").exists()):
        return
    if os.environ.get("SPECBENCH_REQUIRE_ENGINE") == "1":
        where = f"{ENGINE_PY}, {MODEL}" if model else f"{ENGINE_PY}"
        pytest.fail(f"CPU engine not prepared ({where}): run `specbench setup cpu`")
    pytest.skip("CPU engine not prepared: run `specbench setup cpu`")
