"""Pure comparisons against the baseline config: speedup, paired bootstrap CI, output fidelity."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .records import RequestRecord


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float] | None:
    """Mean and Student-t 95% interval over repeats (hyperfine-style error bars)."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return None
    arr = np.asarray(vals, dtype=float)
    m, sd = float(arr.mean()), float(arr.std(ddof=1))
    half = _t975(len(arr) - 1) * sd / math.sqrt(len(arr))
    return m, m - half, m + half


def _t975(df: int) -> float:
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


def paired_speedup(pairs: Sequence[tuple[RequestRecord, RequestRecord]], resamples: int = 2000,
                   seed: int = 0) -> dict[str, float | None]:
    """Speedup of per-request decode rate over paired prompts, with a bootstrap 95% CI over prompts.

    The statistic is Σ tokens/Σ latency of the config ÷ the same for the baseline, on the same
    prompts; resampling prompts (not requests) keeps the pairing.
    """
    out: dict[str, float | None] = {"paired_speedup": None, "paired_speedup_ci_low": None,
                                    "paired_speedup_ci_high": None, "paired_prompts": len(pairs) or None}
    if not pairs:
        return out
    tok = np.array([[c.output_tokens or 0, b.output_tokens or 0] for c, b in pairs], dtype=float)
    lat = np.array([[c.latency, b.latency] for c, b in pairs], dtype=float)

    def stat(idx: np.ndarray) -> np.ndarray:
        t, l = tok[idx].sum(axis=-2), lat[idx].sum(axis=-2)
        return (t[..., 0] / l[..., 0]) / (t[..., 1] / l[..., 1])

    out["paired_speedup"] = float(stat(np.arange(len(pairs))))
    if len(pairs) >= 2:
        rng = np.random.default_rng(seed)
        samples = stat(rng.integers(0, len(pairs), size=(resamples, len(pairs))))
        lo, hi = np.percentile(samples, [2.5, 97.5])
        out["paired_speedup_ci_low"], out["paired_speedup_ci_high"] = float(lo), float(hi)
    return out


def first_divergence(a: Sequence, b: Sequence) -> int | None:
    """Index of the first differing element, or None when one is a prefix of the other and equal length."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def fidelity(pairs: Sequence[tuple[RequestRecord, RequestRecord]]) -> dict[str, float | int | str | None]:
    """Share of outputs identical to the baseline's, and where they first diverge otherwise.

    Compares token ids when both sides returned them, the text otherwise (then positions are
    characters). Only meaningful at temperature 0.
    """
    if not pairs:
        return {"fidelity_identical": None, "fidelity_compared": None, "fidelity_unit": None,
                "fidelity_first_divergence_median": None}
    use_ids = all(c.output_token_ids and b.output_token_ids for c, b in pairs)
    diverge: list[int] = []
    same = 0
    for c, b in pairs:
        a, r = (c.output_token_ids, b.output_token_ids) if use_ids else (c.text, b.text)
        pos = first_divergence(a, r)
        if pos is None:
            same += 1
        else:
            diverge.append(pos)
    return {
        "fidelity_identical": same / len(pairs),
        "fidelity_compared": len(pairs),
        "fidelity_unit": "token" if use_ids else "char",
        "fidelity_first_divergence_median": float(np.median(diverge)) if diverge else None,
    }


def crossover(points: Sequence[tuple[float, float | None]]) -> float | None:
    """The lowest load (concurrency or rate) from which speculation stops paying off (speedup < 1)."""
    measured = sorted((c, s) for c, s in points if s is not None)
    for i, (c, s) in enumerate(measured):
        if s < 1.0 and all(t < 1.0 for _, t in measured[i:]):
            return c
    return None
