"""GPU energy and telemetry over each measured phase (NVML, through ``nvidia-ml-py``), and cost.

Energy: each GPU's cumulative energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ) read
just before the phase's first request and just after its last, summed over the GPUs the config's
server uses. Utilisation, memory used and SM clock are sampled once a second in a thread while
the phase runs and kept in phases.jsonl. Anything that cannot be read is null with the reason
(``telemetry_error``), never 0: no ``nvidia-ml-py``, no NVIDIA driver, a CPU engine, a server at a
URL whose GPUs the suite does not name (``configs[].gpus``), a GPU without an energy counter.

Which GPUs: the config's ``gpus`` (also what ``--parallel`` assigns), else ``CUDA_VISIBLE_DEVICES``
of the server's environment, else the first N, N from the config's parallel size or
``server.gpus_per_server`` (``parallel.planning.config_gpu_count``). Numeric ids are read as NVML
indices, which match CUDA's order when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or the GPUs are all alike;
``GPU-…``/``MIG-…`` UUIDs are exact.

Cost: ``cost: {gpu_hour_usd: P}`` → ``usd_per_million_output_tokens`` = P × GPUs per server ÷
(output tokens/s × 3600) × 10⁶, and the saving vs the baseline on the same cell.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..launch.gpus import server_gpus
from ..suite.model import ServerConfig, Suite
from ..suite.objectives import Cost
from ..util.numbers import is_number

SAMPLE_INTERVAL_S = 0.25
# NVML's utilisation is the busy share of its last sample period (up to 1 s on current drivers): a sample
# taken earlier than that into a phase partly describes the time before it (an idle GPU reads 0 %).
UTIL_SETTLE_S = 1.0


def load_nvml() -> Any:  # pynvml has no type stubs: the module is Any to mypy
    """The ``pynvml`` module of nvidia-ml-py, initialised; raises ImportError or its NVMLError."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _err(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".strip().rstrip(":")


class PhaseMeter:
    """Energy counters at the ends of a phase and sampled telemetry in between, for some GPUs."""

    def __init__(self, gpus: Sequence[str] | None, reason: str | None = None,
                 interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.gpus, self.reason, self.interval_s = list(gpus or []), reason, interval_s
        self.nvml: Any = None  # the pynvml module once started; it has no type stubs
        self.handles: list[Any] = []
        self.energy0: list[float | None] = []
        self.samples: dict[str, list[Any]] = {"t_s": [], "gpu_util_pct": [], "mem_used_mib": [], "sm_clock_mhz": []}
        self._result: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.energy_error: str | None = None

    @classmethod
    def for_config(cls, suite: Suite, config: ServerConfig) -> PhaseMeter:
        try:
            gpus, reason = server_gpus(suite, config)
        except Exception as err:  # a suite the launcher cannot read fails elsewhere, with its own message
            gpus, reason = None, _err(err)
        return cls(gpus, reason)

    def start(self) -> None:
        if not self.gpus:
            return
        try:
            self.nvml = load_nvml()
        except ImportError:
            self.reason = "nvidia-ml-py is not installed (pip install 'specbench[gpu]')"
            return
        except Exception as err:
            self.reason = f"NVML: {_err(err)}"
            return
        try:
            self.handles = [self._handle(g) for g in self.gpus]
        except Exception as err:
            self.reason = f"NVML: GPU {self.gpus}: {_err(err)}"
            self._shutdown()
            return
        self.energy0 = [self._energy(h) for h in self.handles]
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._sample_loop, name="specbench-telemetry", daemon=True)
        self._thread.start()

    def _handle(self, gpu: str) -> Any:  # an NVML device handle (pynvml has no type stubs)
        if gpu.isdigit():
            return self.nvml.nvmlDeviceGetHandleByIndex(int(gpu))
        return self.nvml.nvmlDeviceGetHandleByUUID(gpu)

    def _energy(self, handle: Any) -> float | None:
        try:
            value = self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except Exception as err:
            self.energy_error = f"NVML energy counter: {_err(err)}"
            return None
        return float(value) if is_number(value) and value >= 0 else None

    def _read(self, fn: Callable[[Any], float], handle: Any) -> float | None:
        try:
            return fn(handle)
        except Exception:
            return None

    def _sample(self) -> None:
        nv = self.nvml
        util = [self._read(lambda h: float(nv.nvmlDeviceGetUtilizationRates(h).gpu), h) for h in self.handles]
        mem = [self._read(lambda h: nv.nvmlDeviceGetMemoryInfo(h).used / 2**20, h) for h in self.handles]
        clock = [self._read(lambda h: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)), h) for h in self.handles]
        self.samples["t_s"].append(round(time.perf_counter() - self._t0, 3))
        self.samples["gpu_util_pct"].append(util)
        self.samples["mem_used_mib"].append(mem)
        self.samples["sm_clock_mhz"].append(clock)

    def _sample_loop(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass

    def stop(self) -> dict[str, Any]:
        """End the window (idempotent): the phase's telemetry for phases.jsonl."""
        if self._result is not None:
            return self._result
        out: dict[str, Any] = {"gpus": self.gpus or None, "energy_j": None, "energy_j_per_gpu": None}
        if self._thread is None:
            out["telemetry_error"] = self.reason or "no GPU to meter"
            self._result = out
            return out
        self._stop.set()
        self._thread.join()
        self._sample()
        energy1 = [self._energy(h) for h in self.handles]
        self._shutdown()
        per_gpu = [None if a is None or b is None or b < a else (b - a) / 1000 for a, b in zip(self.energy0, energy1)]
        out["energy_j_per_gpu"] = per_gpu
        if None in per_gpu:
            out["telemetry_error"] = self.energy_error or \
                "NVML energy counter missing, invalid or lower after the phase than before"
        else:
            out["energy_j"] = sum(per_gpu)
        out["window_s"] = round(time.perf_counter() - self._t0, 3)
        out["samples"] = self.samples
        self._result = out
        return out


# ---- per cell ------------------------------------------------------------------------------------

def _flat(samples: Sequence[dict[str, Any]], key: str, settle_s: float = 0.0) -> list[float]:
    """Every numeric sample of ``key``, leaving out those stamped less than ``settle_s`` into their phase."""
    out: list[float] = []
    for s in samples:
        t_s = s.get("t_s")
        stamps: list[Any] = t_s if isinstance(t_s, list) else []
        for i, row in enumerate(s.get(key) or []):
            t = stamps[i] if i < len(stamps) else None
            if isinstance(t, (int, float)) and t < settle_s:
                continue
            out.extend(v for v in row or [] if isinstance(v, (int, float)))
    return out


@dataclass(frozen=True)
class TelemetrySummary:
    """A cell's GPU energy and sampled telemetry, named as the result row names them."""

    energy_j: float | None = None
    joules_per_output_token: float | None = None
    gpu_util_mean_pct: float | None = None
    gpu_mem_used_max_mib: float | None = None
    sm_clock_mean_mhz: float | None = None
    telemetry_gpus: Any = None
    telemetry_error: str | None = None


def telemetry_summary(windows: Sequence[dict[str, Any]], output_tokens: int | None) -> TelemetrySummary:
    """A cell's energy (Σ over its repeats) and sampled telemetry, or null fields with the reason."""
    if not windows:
        return TelemetrySummary(telemetry_error="no telemetry recorded for this cell (measured before telemetry existed)")
    errors = [w["telemetry_error"] for w in windows if w.get("telemetry_error")]
    energies = [w.get("energy_j") for w in windows]
    error, energy, per_token = None, None, None
    if errors or None in energies:
        error = errors[0] if errors else "energy missing in a repeat"
    else:
        energy = float(sum(e for e in energies if e is not None))
        per_token = energy / output_tokens if output_tokens else None
    samples = [w["samples"] for w in windows if isinstance(w.get("samples"), dict)]
    util = _flat(samples, "gpu_util_pct", UTIL_SETTLE_S)
    mem, clock = _flat(samples, "mem_used_mib"), _flat(samples, "sm_clock_mhz")
    return TelemetrySummary(energy_j=energy, joules_per_output_token=per_token,
                            gpu_util_mean_pct=float(np.mean(util)) if util else None,
                            gpu_mem_used_max_mib=float(max(mem)) if mem else None,
                            sm_clock_mean_mhz=float(np.mean(clock)) if clock else None,
                            telemetry_gpus=windows[0].get("gpus"), telemetry_error=error)


def cost_summary(cost: Cost | None, gpus: int | None, reason: str | None, tps: float | None) -> dict[str, Any]:
    if cost is None:
        return {}
    out: dict[str, Any] = {"gpu_hour_usd": cost.gpu_hour_usd, "cost_gpus": gpus, "usd_per_million_output_tokens": None}
    if not gpus:
        out["cost_error"] = reason
    elif not tps:
        out["cost_error"] = "no output throughput measured"
    else:
        out["usd_per_million_output_tokens"] = cost.gpu_hour_usd * gpus / (tps * 3600) * 1e6
    return out
