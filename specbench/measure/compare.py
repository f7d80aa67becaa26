"""Pure comparisons: against the baseline config (speedup, paired bootstrap CI, output fidelity), and
of one run against an earlier run of the same suite (judged with the gate's noise rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..schemas.row_baseline import Decomposition, Fidelity, PairedSpeedup
from ..util.bootstrap import bootstrap_samples
from .acceptance import decode_steps


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference


def mean_ci95(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    """Mean and Student-t 95% interval over repeats (hyperfine-style error bars)."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return None
    arr = np.asarray(vals, dtype=float)
    m, sd = float(arr.mean()), float(arr.std(ddof=1))
    half = t975(len(arr) - 1) * sd / math.sqrt(len(arr))
    return m, m - half, m + half


def t975(df: int) -> float:
    """Student-t 0.975 quantile from a table; a df between rows takes the lower row's (wider) value."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
             10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}
    if df in table:
        return table[df]
    return table[max(k for k in table if k <= df)] if df < 30 else 1.96


def _key(r: RequestRecord) -> tuple[str, int, int]:
    return (r.prompt_id, r.turn, r.repeat)


def paired_requests(config: Sequence[RequestRecord], baseline: Sequence[RequestRecord]) -> list[tuple[RequestRecord, RequestRecord]]:
    """Successful requests of the same prompt, turn and repeat under both configs."""
    base = {_key(r): r for r in baseline if r.ok and r.phase == "measure"}
    return [(r, base[_key(r)]) for r in config if r.ok and r.phase == "measure" and _key(r) in base]


def paired_bootstrap(columns: np.ndarray, stat: Callable[[np.ndarray], np.ndarray], resamples: int = 2000,
                     seed: int = 0) -> tuple[float | None, float | None, float | None]:
    """A statistic of per-prompt columns and its bootstrap 95% CI, resampling prompts (rows).

    ``stat`` receives an index array (one row of indices, or a block of resample rows:
    ``bootstrap.bootstrap_samples``) and returns the statistic per row of indices; resampling whole
    prompts keeps each prompt's pairing intact.
    """
    n = len(columns)
    if not n:
        return None, None, None
    point = float(stat(np.arange(n)))
    if n < 2:
        return point, None, None
    samples = bootstrap_samples(stat, n, resamples, seed)
    samples = samples[np.isfinite(samples)]
    if not samples.size:
        return point, None, None
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return point, float(lo), float(hi)


def paired_speedup(pairs: Sequence[tuple[RequestRecord, RequestRecord]], resamples: int = 2000,
                   seed: int = 0) -> PairedSpeedup:
    """Speedup of per-request decode rate over paired prompts, with a bootstrap 95% CI over prompts.

    The statistic is Σ tokens/Σ latency of the config ÷ the same for the baseline, on the same
    prompts; resampling prompts (not requests) keeps the pairing.
    """
    if not pairs:
        return PairedSpeedup()
    tok = np.array([[c.output_tokens or 0, b.output_tokens or 0] for c, b in pairs], dtype=float)
    lat = np.array([[c.latency, b.latency] for c, b in pairs], dtype=float)

    def stat(idx: np.ndarray) -> np.ndarray:
        t: npt.NDArray[np.float64] = tok[idx].sum(axis=-2)
        l: npt.NDArray[np.float64] = lat[idx].sum(axis=-2)
        return (t[..., 0] / l[..., 0]) / (t[..., 1] / l[..., 1])

    point, lo, hi = paired_bootstrap(tok, stat, resamples, seed)
    return PairedSpeedup(point, lo, hi, len(pairs))


def _decode_columns(r: RequestRecord) -> tuple[float, float, float, float]:
    """Decode tokens and steps (as stream acceptance counts them) and Σ/count of chunk gaps (as step_ms does)."""
    steps = decode_steps(r)
    gaps = len(r.chunk_times) - 1 if len(r.chunk_times) > 1 else 0
    return float(sum(steps)), float(len(steps)), (r.chunk_times[-1] - r.chunk_times[0]) if gaps else 0.0, float(gaps)


def paired_decomposition(pairs: Sequence[tuple[RequestRecord, RequestRecord]], resamples: int = 2000,
                         seed: int = 0) -> tuple[float | None, float | None, float | None]:
    """Tokens per step ÷ step cost ratio over paired prompts, with the bootstrap CI of ``paired_speedup``.

    Per side: (Σ decode tokens ÷ Σ decode steps) ÷ (Σ chunk gaps ÷ number of gaps), pooled the way
    ``stream_mean_acceptance_length`` and ``step_mean_ms`` pool them; config ÷ baseline. Decode steps
    and gaps are counted alike, so it is the ratio of decode-phase token rates (TTFT left out).
    """
    cols = np.array([[*_decode_columns(c), *_decode_columns(b)] for c, b in pairs], dtype=float).reshape(-1, 8)

    def stat(idx: np.ndarray) -> np.ndarray:
        s: npt.NDArray[np.float64] = cols[idx].sum(axis=-2)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate: Callable[[int], npt.NDArray[np.float64]] = lambda o: (s[..., o] / s[..., o + 1]) / (s[..., o + 2] / s[..., o + 3])  # noqa: E731
            return rate(0) / rate(4)

    point, lo, hi = paired_bootstrap(cols, stat, resamples, seed)
    if point is not None and not math.isfinite(point):
        return None, None, None
    return point, lo, hi


#: results keys of the speedup decomposition, in results.json's order
DECOMPOSITION_KEYS = Decomposition.names()


def decomposition(row: ResultRow, base: ResultRow, pairs: Sequence[tuple[RequestRecord, RequestRecord]]) -> Decomposition:
    """Speedup = tokens per step ÷ step cost × residual, for one row against its baseline row.

    ``step_cost_ratio`` = step_mean_ms ÷ the baseline's time per decode step (its step_mean_ms ÷ its
    stream tokens per chunk: a plain decode step makes one token, so a baseline chunk of n tokens is n
    steps merged by the engine); ``speedup_decomposed`` = stream tokens per step ÷ step_cost_ratio, the
    decode-phase gain (the ratio of decode token rates, which merged chunks leave unchanged).
    ``speedup_residual`` = speedup_vs_baseline ÷ speedup_decomposed: what is won or lost outside decode
    steps (prefill/TTFT, queueing, scheduling). The CI is the paired bootstrap of
    ``paired_decomposition``, scaled onto the row's point value like the speedup's.
    """
    if row is base or row.run == base.run:
        return Decomposition()
    base_tokens = base.stream_mean_acceptance_length  # unknown: its chunks are taken as single steps
    base_step = ratio(base.step_mean_ms, base_tokens) if base_tokens is not None and base_tokens >= 1 else base.step_mean_ms
    cost = ratio(row.step_mean_ms, base_step)
    tokens = row.stream_mean_acceptance_length
    if cost is None or cost <= 0 or tokens is None or base_tokens is None:
        return Decomposition(step_cost_ratio=cost)
    decomposed = tokens / cost
    point, lo, hi = paired_decomposition(pairs)
    ci_low = ci_high = None
    if point and lo is not None and hi is not None:
        scale = tokens / cost / point
        ci_low, ci_high = lo * scale, hi * scale
    return Decomposition(cost, decomposed, ci_low, ci_high, ratio(row.speedup_vs_baseline, decomposed))


def first_divergence(a: Sequence[object], b: Sequence[object]) -> int | None:
    """Index of the first differing element, or None when one is a prefix of the other and equal length."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def fidelity(pairs: Sequence[tuple[RequestRecord, RequestRecord]]) -> Fidelity:
    """Share of outputs identical to the baseline's, and where they first diverge otherwise.

    Compares token ids when both sides returned them, the text otherwise (then positions are
    characters). Only meaningful at temperature 0.
    """
    if not pairs:
        return Fidelity()
    use_ids = all(c.output_token_ids and b.output_token_ids for c, b in pairs)
    diverge: list[int] = []
    same = 0
    for c, b in pairs:
        a, r = (c.output_token_ids or [], b.output_token_ids or []) if use_ids else (c.text, b.text)
        pos = first_divergence(a, r)
        if pos is None:
            same += 1
        else:
            diverge.append(pos)
    return Fidelity(same / len(pairs), len(pairs), "token" if use_ids else "char",
                    float(np.median(diverge)) if diverge else None)


def crossover(points: Sequence[tuple[float, float | None]]) -> float | None:
    """The lowest load (concurrency or rate) from which speculation stops paying off (speedup < 1)."""
    measured = sorted((c, s) for c, s in points if s is not None)
    for i, (c, s) in enumerate(measured):
        if s < 1.0 and all(t < 1.0 for _, t in measured[i:]):
            return c
    return None
