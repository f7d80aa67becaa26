"""GPU energy and telemetry over each measured phase, read from NVML (through ``nvidia-ml-py``) while the
phase runs: the I/O half of ``measure.telemetry``, which computes a cell's numbers from the windows
this meter hands it (``TelemetryWindow``, kept in phases.jsonl).

Energy: each GPU's cumulative energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ) read
just before the phase's first request and just after its last, summed over the GPUs the config's
server uses. Utilisation, memory used and SM clock are sampled every ``SAMPLE_INTERVAL_S`` in a
thread while the phase runs. Anything that cannot be read is null with the reason
(``telemetry_error``), never 0: no ``nvidia-ml-py``, no NVIDIA driver, a CPU engine, a server at a
URL whose GPUs the suite does not name (``configs[].gpus``), a GPU without an energy counter.

Which GPUs: ``launch.gpus.server_gpus`` (the config's ``gpus``, else ``CUDA_VISIBLE_DEVICES`` of the
server's environment, else the first N). Numeric ids are read as NVML indices, which match CUDA's
order when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or the GPUs are all alike; ``GPU-…``/``MIG-…`` UUIDs are exact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..launch.gpus import server_gpus
from ..measure.telemetry import GpuSamples, TelemetryWindow
from ..suite.model import ServerConfig, Suite
from ..util.numbers import is_number

SAMPLE_INTERVAL_S = 0.25


def open_nvml() -> Any:  # pynvml has no type stubs: the module is Any to mypy
    """The ``pynvml`` module of nvidia-ml-py, initialised; raises ImportError or its NVMLError."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _err(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".strip().rstrip(":")


def nvml_handle(nvml: Any, gpu: str) -> Any:
    """The NVML device handle of a GPU id: a number is an NVML index, else a ``GPU-``/``MIG-`` UUID."""
    if gpu.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(gpu))
    return nvml.nvmlDeviceGetHandleByUUID(gpu)


class PhaseMeter:
    """Energy counters at the ends of a phase and sampled telemetry in between, for some GPUs."""

    def __init__(self, gpus: Sequence[str] | None, reason: str | None = None,
                 interval_s: float | None = None) -> None:
        self.gpus, self.reason = list(gpus or []), reason
        self.interval_s = SAMPLE_INTERVAL_S if interval_s is None else interval_s  # read at start: a test may set it
        self.nvml: Any = None  # the pynvml module once started; it has no type stubs
        self.handles: list[Any] = []
        self.energy0: list[float | None] = []
        self.samples = GpuSamples()
        self._result: TelemetryWindow | None = None
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
            self.nvml = open_nvml()
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
        return nvml_handle(self.nvml, gpu)

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
        self.samples.t_s.append(round(time.perf_counter() - self._t0, 3))
        self.samples.gpu_util_pct.append(util)
        self.samples.mem_used_mib.append(mem)
        self.samples.sm_clock_mhz.append(clock)

    def _sample_loop(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass

    def stop(self) -> TelemetryWindow:
        """End the window (idempotent): the phase's telemetry for phases.jsonl."""
        if self._result is None:
            self._result = self._end()
        return self._result

    def _end(self) -> TelemetryWindow:
        gpus = self.gpus or None
        if self._thread is None:
            return TelemetryWindow(gpus, telemetry_error=self.reason or "no GPU to meter")
        self._stop.set()
        self._thread.join()
        self._sample()
        energy1 = [self._energy(h) for h in self.handles]
        self._shutdown()
        per_gpu = [None if a is None or b is None or b < a else (b - a) / 1000 for a, b in zip(self.energy0, energy1)]
        missing = None in per_gpu
        return TelemetryWindow(
            gpus, energy_j=None if missing else sum(e for e in per_gpu if e is not None), energy_j_per_gpu=per_gpu,
            telemetry_error=(self.energy_error or "NVML energy counter missing, invalid or lower after the phase than before")
            if missing else None,
            window_s=round(time.perf_counter() - self._t0, 3), samples=self.samples)
