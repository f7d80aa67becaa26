"""Bootstrap resampling a block of resamples at a time, so memory stays flat however many prompts a cell has.

Drawn at once, 2000 resamples of n prompts is a 2000 × n index matrix (1.6 GB of int64 at
n = 100,000) plus whatever the statistic gathers through it (×2–×8 more). Drawn a block of rows
at a time from the same generator it is the same matrix: numpy's ``Generator.integers`` keeps no
buffer between calls for 32- and 64-bit draws, so each block continues the stream exactly where
one large draw would have; the statistic of each row, and so every CI, is unchanged
(tests/unit/measure/test_bootstrap.py checks them equal to the unblocked draw).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: indices drawn per block (8 MiB of int64): the most resample rows a block holds is this ÷ n, at least one
BLOCK_ELEMENTS = 1 << 20


def bootstrap_samples(stat: Callable[[np.ndarray], np.ndarray], n: int, resamples: int, seed: int) -> np.ndarray:
    """``stat`` of each of ``resamples`` rows of n indices drawn with replacement from ``range(n)``.

    The same numbers as ``stat(default_rng(seed).integers(0, n, size=(resamples, n)))``, computed a
    block of rows at a time (``BLOCK_ELEMENTS``); ``stat`` must treat rows independently.
    """
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_ELEMENTS // max(n, 1))
    parts = [np.asarray(stat(rng.integers(0, n, size=(min(rows, resamples - start), n))), dtype=float)
             for start in range(0, resamples, rows)]
    return np.concatenate(parts) if parts else np.empty(0)
