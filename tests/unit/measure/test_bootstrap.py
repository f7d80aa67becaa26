"""The paired bootstraps resample a block of rows at a time: the same numbers as the whole index matrix
drawn at once, for the same seed, with memory that does not grow with resamples × prompts
(benchmarks/bootstrap_memory.py measures the memory)."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.grade import paired_accuracy
from specbench.measure.compare import paired_bootstrap, paired_decomposition, paired_speedup
from specbench.schemas.request import RequestRecord
from specbench.util import bootstrap


def _record(rng: np.random.Generator, pid: str, config: str) -> RequestRecord:
    chunks = [1, *rng.integers(1, 5, size=int(rng.integers(2, 12))).tolist()]
    times = np.cumsum(rng.uniform(0.001, 0.05, size=len(chunks))).tolist()
    return RequestRecord(prompt_id=pid, dataset="d", config=config, send_time=0.0, chunk_times=times,
                         chunk_tokens=chunks, output_tokens=sum(chunks), token_source="usage_continuous")


def _pairs(n: int, seed: int = 1) -> list[tuple[RequestRecord, RequestRecord]]:
    rng = np.random.default_rng(seed)
    return [(_record(rng, str(i), "spec"), _record(rng, str(i), "base")) for i in range(n)]


def _unblocked(columns: np.ndarray, stat, resamples: int = 2000, seed: int = 0):
    """paired_bootstrap as it was: the whole resamples × n index matrix in one draw."""
    n = len(columns)
    samples = stat(np.random.default_rng(seed).integers(0, n, size=(resamples, n)))
    samples = samples[np.isfinite(samples)]
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return float(stat(np.arange(n))), float(lo), float(hi)


@pytest.mark.parametrize("n", [2, 3, 37, 501])
@pytest.mark.parametrize("rows_per_block", [1, 7, 333])
def test_blocked_ci_is_identical_to_the_unblocked_draw(monkeypatch, n, rows_per_block):
    values = np.random.default_rng(n).lognormal(size=(n, 2))
    stat = lambda idx: values[idx, 0].sum(axis=-1) / values[idx, 1].sum(axis=-1)  # noqa: E731
    monkeypatch.setattr(bootstrap, "BLOCK_ELEMENTS", rows_per_block * n)  # 2000 is no multiple of 7 or 333: a short last block
    assert paired_bootstrap(values, stat) == _unblocked(values, stat)


def test_speedup_decomposition_and_accuracy_cis_do_not_depend_on_the_block(monkeypatch):
    pairs = _pairs(300)
    right = [(bool(i % 3), bool(i % 4)) for i in range(300)]

    def everything():
        return paired_speedup(pairs), paired_decomposition(pairs), paired_accuracy(right)

    monkeypatch.setattr(bootstrap, "BLOCK_ELEMENTS", 2000 * 300)  # one block: the matrix drawn at once
    whole = everything()
    monkeypatch.setattr(bootstrap, "BLOCK_ELEMENTS", 11 * 300 + 5)
    assert everything() == whole
    assert whole[0].paired_speedup_ci_low is not None and whole[1][1] is not None
    assert whole[2].accuracy_diff_ci_low is not None


def test_no_bootstrap_draws_the_whole_index_matrix_at_once(monkeypatch):
    """2000 resamples of 3,000 prompts is 6 M indices (and ×2–×8 that gathered); each draw holds at most one block."""
    drawn: list[int] = []
    real = np.random.default_rng

    class Spy:
        def __init__(self, seed=None):
            self.rng = real(seed)

        def integers(self, low, high=None, size=None, **kw):
            drawn.append(int(np.prod(size)) if size is not None else 1)
            return self.rng.integers(low, high, size=size, **kw)

    n = 3000
    pairs = _pairs(n)
    monkeypatch.setattr(np.random, "default_rng", Spy)
    paired_speedup(pairs)
    paired_decomposition(pairs)
    paired_accuracy([(bool(i % 2), bool(i % 5)) for i in range(n)])
    assert drawn and sum(drawn) == 3 * 2000 * n
    assert max(drawn) <= 1 << 20


@pytest.mark.parametrize("b,c", [(0, 7), (5, 5), (12, 40), (301, 355), (1500, 1480)])
def test_mcnemar_tail_summed_term_by_term_is_the_exact_comb_sum(b, c):
    """paired_accuracy's p-value at 100,000 prompts: the tail is summed from each term to the next, not one
    ``math.comb`` per term (minutes at n = 50,000); the same exact integers, so the same float."""
    import math

    from specbench.grade import mcnemar_exact

    n = b + c
    assert mcnemar_exact(b, c) == min(1.0, 2 * (sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n))
