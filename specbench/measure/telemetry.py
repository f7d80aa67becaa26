"""A cell's GPU energy and telemetry from its phases' windows (``TelemetryWindow``: what
``run.telemetry``'s NVML meter read over each measured phase, kept in phases.jsonl), and cost.

Energy: Σ over the cell's repeats of each window's energy (Σ over the server's GPUs); utilisation,
memory used and SM clock from the samples taken while the phases ran. Anything that could not be
read is null with the reason (``telemetry_error``), never 0.

Cost: ``cost: {gpu_hour_usd: P}`` → ``usd_per_million_output_tokens`` = P × GPUs per server ÷
(output tokens/s × 3600) × 10⁶, and the saving vs the baseline on the same cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ..schemas.row_quality import CostSummary, TelemetrySummary
from ..suite.objectives import Cost

# NVML's utilisation is the busy share of its last sample period (up to 1 s on current drivers): a sample
# taken earlier than that into a phase partly describes the time before it (an idle GPU reads 0 %).
UTIL_SETTLE_S = 1.0

PerGpu = list[float | None]


def _number(value: object) -> float | None:
    return value if isinstance(value, (int, float)) else None


@dataclass(frozen=True)
class GpuSamples:
    """Telemetry sampled while a phase ran: each sample's time into the phase (s) and one value per GPU
    (None: not read)."""

    t_s: list[float | None] = field(default_factory=list)
    gpu_util_pct: list[PerGpu] = field(default_factory=list)
    mem_used_mib: list[PerGpu] = field(default_factory=list)
    sm_clock_mhz: list[PerGpu] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[float | None] | list[PerGpu]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> GpuSamples:
        """The samples as phases.jsonl holds them (a hand-edited file too): what is not a number is None."""
        def listed(value: object) -> list[object]:
            return value if isinstance(value, list) else []

        def per_gpu(key: str) -> list[PerGpu]:
            return [[_number(v) for v in listed(row)] for row in listed(d.get(key))]
        return cls(t_s=[_number(t) for t in listed(d.get("t_s"))], gpu_util_pct=per_gpu("gpu_util_pct"),
                   mem_used_mib=per_gpu("mem_used_mib"), sm_clock_mhz=per_gpu("sm_clock_mhz"))


@dataclass(frozen=True)
class TelemetryWindow:
    """One phase's GPU energy and samples: phases.jsonl's ``telemetry`` object (``to_dict``)."""

    gpus: list[str] | None
    energy_j: float | None = None
    energy_j_per_gpu: PerGpu | None = None
    telemetry_error: str | None = None  # written only when set
    window_s: float | None = None  # with samples: only for a window that was metered
    samples: GpuSamples | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"gpus": self.gpus, "energy_j": self.energy_j, "energy_j_per_gpu": self.energy_j_per_gpu}
        if self.telemetry_error is not None:
            out["telemetry_error"] = self.telemetry_error
        if self.samples is not None:
            out["window_s"] = self.window_s
            out["samples"] = self.samples.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> TelemetryWindow:
        """The window as phases.jsonl holds it, checked: a value of the wrong type reads as missing."""
        gpus, per_gpu, error, samples = d.get("gpus"), d.get("energy_j_per_gpu"), d.get("telemetry_error"), d.get("samples")
        return cls(gpus=[str(g) for g in gpus] if isinstance(gpus, list) else None, energy_j=_number(d.get("energy_j")),
                   energy_j_per_gpu=[_number(e) for e in per_gpu] if isinstance(per_gpu, list) else None,
                   telemetry_error=str(error) if error else None, window_s=_number(d.get("window_s")),
                   samples=GpuSamples.from_dict(samples) if isinstance(samples, dict) else None)


# ---- per cell ------------------------------------------------------------------------------------

def _flat(series: Sequence[tuple[list[float | None], list[PerGpu]]], settle_s: float = 0.0) -> list[float]:
    """Every sample of one quantity over the phases (each: its stamps, its samples), leaving out those stamped
    less than ``settle_s`` into their phase."""
    out: list[float] = []
    for stamps, rows in series:
        for i, row in enumerate(rows):
            t = stamps[i] if i < len(stamps) else None
            if t is not None and t < settle_s:
                continue
            out.extend(v for v in row if v is not None)
    return out


def telemetry_summary(windows: Sequence[TelemetryWindow], output_tokens: int | None) -> TelemetrySummary:
    """A cell's energy (Σ over its repeats) and sampled telemetry, or null fields with the reason."""
    if not windows:
        return TelemetrySummary(telemetry_error="no telemetry recorded for this cell (measured before telemetry existed)")
    errors = [w.telemetry_error for w in windows if w.telemetry_error]
    energies = [w.energy_j for w in windows]
    error, energy, per_token = None, None, None
    if errors or None in energies:
        error = errors[0] if errors else "energy missing in a repeat"
    else:
        energy = float(sum(e for e in energies if e is not None))
        per_token = energy / output_tokens if output_tokens else None
    samples = [w.samples for w in windows if w.samples is not None]
    util = _flat([(s.t_s, s.gpu_util_pct) for s in samples], UTIL_SETTLE_S)
    mem, clock = _flat([(s.t_s, s.mem_used_mib) for s in samples]), _flat([(s.t_s, s.sm_clock_mhz) for s in samples])
    return TelemetrySummary(energy_j=energy, joules_per_output_token=per_token,
                            gpu_util_mean_pct=float(np.mean(util)) if util else None,
                            gpu_mem_used_max_mib=float(max(mem)) if mem else None,
                            sm_clock_mean_mhz=float(np.mean(clock)) if clock else None,
                            telemetry_gpus=windows[0].gpus, telemetry_error=error)


def cost_summary(cost: Cost | None, gpus: int | None, reason: str | None, tps: float | None) -> CostSummary | None:
    """None (no key at all) when the suite prices nothing; else the price or why there is none."""
    if cost is None:
        return None
    if not gpus:
        return CostSummary(cost.gpu_hour_usd, gpus, cost_error=reason)
    if not tps:
        return CostSummary(cost.gpu_hour_usd, gpus, cost_error="no output throughput measured")
    return CostSummary(cost.gpu_hour_usd, gpus, usd_per_million_output_tokens=cost.gpu_hour_usd * gpus / (tps * 3600) * 1e6)
