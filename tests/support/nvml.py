"""A stand-in for nvidia-ml-py's ``pynvml`` that names devices (the accelerator a run records: model, memory,
driver, CUDA version), and a stand-in ``nvidia-smi`` on PATH; put in ``sys.modules`` / PATH by a test."""

from __future__ import annotations

import shutil
import types
from pathlib import Path


class NVMLError(Exception):
    pass


def fake_nvml(names: dict[str, str], memory_mib: int = 143771, driver: str = "570.124.06", cuda: int = 12080):
    """GPU index → its name (bytes, as older nvidia-ml-py returns it); an unknown index is NVML's error."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError
    mod.calls = {"init": 0, "shutdown": 0}

    def handle(i):
        if str(i) not in names:
            raise NVMLError("Invalid Argument")
        return str(i)

    mod.nvmlInit = lambda: mod.calls.__setitem__("init", mod.calls["init"] + 1)
    mod.nvmlShutdown = lambda: mod.calls.__setitem__("shutdown", mod.calls["shutdown"] + 1)
    mod.nvmlDeviceGetHandleByIndex = handle
    mod.nvmlDeviceGetHandleByUUID = lambda u: handle(u.removeprefix("GPU-"))
    mod.nvmlDeviceGetName = lambda h: names[h].encode()
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=memory_mib * 2**20, used=0)
    mod.nvmlSystemGetDriverVersion = lambda: driver
    mod.nvmlSystemGetCudaDriverVersion = lambda: cuda
    return mod


def fake_nvidia_smi(folder: Path, lines: str, seconds: float = 0.0) -> Path:
    """``nvidia-smi`` in ``folder`` that records its arguments in ``folder/args`` and prints ``lines``
    (after ``seconds``); put ``folder`` first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    wait = f"exec {shutil.which('sleep')} {seconds}\n" if seconds else ""  # exec: one process, as nvidia-smi is
    script.write_text(f'#!/bin/sh\necho "$@" > "{folder / "args"}"\n{wait}printf "{lines}"\n')
    script.chmod(0o755)
    return folder
