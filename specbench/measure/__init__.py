"""The numbers, computed from what a run recorded (pure: records, phases and counters in, rows out):
latency and throughput, acceptance from the counters and from the stream, per-request acceptance,
the comparison with the baseline (paired bootstrap, decomposition, fidelity), quality, SLO, energy
and cost, o200k-normalised lengths, and the analyses behind `whatif`, `tune` and `profile`.

Each metric returns its typed group, whose field names are the result row's (``ResultRow.add`` sets
it). What reads devices or files is the run stage's: the NVML meter (``run.telemetry``) hands
``telemetry`` typed windows, and the o200k_base file is found and checked by ``run.o200k_file``."""

from ..schemas.plans import TuneResult
from .break_even import Curve, whatif_curves
from .compare import paired_decomposition, paired_speedup
from .engine_counters import read_acceptance
from .latency import latency_stats, throughput
from .profile import profiles_from
from .summarize import add_comparisons, summarize_cell

__all__ = ["Curve", "TuneResult", "add_comparisons", "latency_stats", "paired_decomposition", "paired_speedup",
           "profiles_from", "read_acceptance", "summarize_cell", "throughput", "whatif_curves"]
