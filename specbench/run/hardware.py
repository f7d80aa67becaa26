"""What a config's server ran on (meta.json ``servers.<config>.accelerator``), read once per server start on
the machine the server runs on (a parallel worker's, a Ray node's): from NVML (``nvidia-ml-py``, optional),
else from ``nvidia-smi`` restricted to the server's GPUs with a short timeout. A CPU engine has none
(``count`` 0); a server at a URL, or a GPU that neither could read, names none and says why.

Which GPUs: ``launch.gpus.server_gpus``, as the energy meter (``run.telemetry``) takes them. The engine itself
is not asked: vLLM's /version and /metrics name no device.
"""

from __future__ import annotations

import subprocess
from typing import Any

from ..launch.gpus import server_gpus
from ..schemas.accelerator import NAMES_SEP, Accelerator
from ..suite.model import ServerConfig, Suite
from ..util.numbers import is_number
from .telemetry import nvml_handle, open_nvml

NVIDIA_SMI = "nvidia-smi"
SMI_TIMEOUT_S = 10.0
MAX_TEXT = 100  # a name or version longer than this is not one


def _why(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".strip().rstrip(":")[:200]


def _text(value: Any) -> str | None:
    """A driver's string (bytes in older nvidia-ml-py), or None when it is not a short text."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value.strip() if isinstance(value, str) and 0 < len(value.strip()) <= MAX_TEXT else None


def _mib(value: Any) -> int | None:
    return int(value) if is_number(value) and value > 0 else None


def _found(names: list[str | None], memory: list[int | None], driver: str | None, cuda: str | None,
           gpus: list[str], source: str) -> Accelerator:
    """One record for the GPUs read: the distinct names, the smallest memory, a missing value said."""
    known = [n for n in names if n]
    sizes = [m for m in memory if m is not None]
    missing = [what for what, bad in (("name", len(known) < len(names)), ("memory", len(sizes) < len(memory)),
                                      ("driver version", driver is None)) if bad]
    return Accelerator(name=NAMES_SEP.join(dict.fromkeys(known)) or None, count=len(gpus),
                       memory_mib=min(sizes) if sizes else None, driver=driver, cuda=cuda, gpus=list(gpus), source=source,
                       why=f"{source} gave no {', '.join(missing)}" if missing else None)


def cuda_version(value: Any) -> str | None:
    """NVML's CUDA driver version (12040) as CUDA writes it (12.4)."""
    if not is_number(value) or isinstance(value, bool) or value <= 0:
        return None
    return f"{int(value) // 1000}.{int(value) % 1000 // 10}"


def from_nvml(gpus: list[str]) -> Accelerator:
    """The GPUs ``gpus`` as NVML names them; raises ImportError or NVML's error when it cannot."""
    nvml = open_nvml()
    try:
        handles = [nvml_handle(nvml, g) for g in gpus]
        names = [_text(nvml.nvmlDeviceGetName(h)) for h in handles]
        memory = [_mib(nvml.nvmlDeviceGetMemoryInfo(h).total / 2**20) for h in handles]
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            cuda = cuda_version(nvml.nvmlSystemGetCudaDriverVersion())
        except Exception:  # an old driver: the version is only missing
            cuda = None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return _found(names, memory, driver, cuda, gpus, "nvml")


def from_nvidia_smi(gpus: list[str]) -> Accelerator:
    """The GPUs ``gpus`` (``-i``) as ``nvidia-smi --query-gpu`` names them; raises OSError, TimeoutExpired or
    ValueError (one line) when it cannot."""
    argv = [NVIDIA_SMI, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits", "-i", ",".join(gpus)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=SMI_TIMEOUT_S, errors="replace")
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or len(lines) != len(gpus):
        said = (out.stderr or out.stdout).strip().splitlines()
        raise ValueError(f"exit {out.returncode}, {len(lines)} GPU line(s) for {len(gpus)} GPU(s)"
                         + (f": {said[0][:150]}" if said else ""))
    parts = [[p.strip() for p in line.split(",")] for line in lines]
    if any(len(p) != 3 for p in parts):
        raise ValueError(f"not name, memory, driver: {lines[0][:150]!r}")
    memory = [_mib(int(p[1])) if p[1].isdigit() else None for p in parts]
    drivers = {_text(p[2]) for p in parts}
    return _found([_text(p[0]) for p in parts], memory, drivers.pop() if len(drivers) == 1 else None, None, gpus,
                  NVIDIA_SMI)


def read_accelerator(suite: Suite, config: ServerConfig) -> Accelerator:
    """What ``config``'s server runs on (never raises): NVML, else nvidia-smi; none for a CPU engine."""
    try:
        gpus, reason = server_gpus(suite, config)
    except Exception as err:  # a launcher that cannot be read fails elsewhere, with its own message
        return Accelerator(why=_why(err))
    if not gpus:
        return Accelerator(count=0, source="none", why=reason) if config.launched else Accelerator(why=reason)
    tried = []
    for source, read in (("NVML", from_nvml), (NVIDIA_SMI, from_nvidia_smi)):
        try:
            return read(gpus)
        except ImportError:
            tried.append("NVML: nvidia-ml-py is not installed")
        except FileNotFoundError:
            tried.append(f"{NVIDIA_SMI}: not found")
        except subprocess.TimeoutExpired:
            tried.append(f"{NVIDIA_SMI}: no answer within {SMI_TIMEOUT_S:g} s")
        except Exception as err:  # the driver's own errors (NVMLError, a bad answer): said, never raised
            tried.append(f"{source}: {_why(err)}")
    return Accelerator(gpus=list(gpus), why=f"GPU {','.join(gpus)} not read: " + "; ".join(tried))


def accelerator_of(suite: Suite, name: str) -> Accelerator:
    """``read_accelerator`` of the suite's config ``name``."""
    config = next((c for c in suite.configs if c.name == name), None)
    return read_accelerator(suite, config) if config is not None else Accelerator(why=f"no config {name!r} in the suite")
