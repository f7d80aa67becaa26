"""The acceptance profile file (``specbench-profile/1``) as typed records: ``specbench profile`` writes a
``ProfileFile`` (``measure.profile`` makes its entries), ``whatif --profile`` reads it back strictly
(``measure.replay.read_profile``, then checks each entry as vLLM checks its rates). Every entry writes
all its keys, null or not; a file read and written back is the same bytes (``schemas.record``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .record import Record

FORMAT = "specbench-profile/1"


@dataclass
class CategoryAcceptance(Record):
    """One category's acceptance, from the stream's chunk sizes (the counters are per cell)."""

    KEEP_NONE: ClassVar[bool] = True
    acceptance_per_position: list[float | None] | None = None
    mean_acceptance_length: float | None = None
    acceptance_conditional: list[float | None] | None = None
    requests: int | None = None
    source: str | None = None


@dataclass
class ProfileProvenance(Record):
    """Where a profile comes from; ``missing`` lists what the input could not say, ``missing_why`` why (written
    only when there is a reason)."""

    KEEP_NONE: ClassVar[bool] = True
    source: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    target_model: str | None = None
    served_model: str | None = None
    drafter: str | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    temperature: float | None = None
    recipe: str | None = None
    suite: str | None = None
    suite_sha256: str | None = None
    specbench_version: str | None = None
    missing: list[str] = field(default_factory=list)
    missing_why: str | None = None

    def keys(self) -> list[str]:
        return [k for k in super().keys() if k != "missing_why" or self.missing_why is not None]


@dataclass
class ProfileEntry(Record):
    """One config × data set × load point: p_1..p_k (1-based, unconditional), the mean length, what was filled."""

    KEEP_NONE: ClassVar[bool] = True
    config: str | None = None
    dataset: str | None = None
    concurrency: float | None = None
    request_rate: float | None = None
    load: str | None = None
    num_speculative_tokens: int | None = None
    acceptance_per_position: list[float] | None = None
    mean_acceptance_length: float | None = None
    acceptance_conditional: list[float | None] | None = None
    estimated_positions: list[int] | None = None
    fill_rule: str | None = None
    fill_ratio: float | None = None
    measured_positions: int | None = None
    acceptance_source: str | None = None
    spec_drafts: int | None = None
    speedup_vs_baseline: float | None = None
    speedup_ci95: list[float | None] | None = None
    status: str | None = None
    categories: dict[str, CategoryAcceptance] | None = None
    provenance: ProfileProvenance | None = None


@dataclass
class ProfileSource(Record):
    """One input of ``specbench profile``: the results file read, and what came of it."""

    path: str | None = None
    results: str | None = None
    results_sha256: str | None = None
    meta: bool | None = None
    profiles: int | None = None
    refused: int | None = None


@dataclass
class ProfileFile(Record):
    format: str | None = None
    positions: str | None = None
    fill_rule: str | None = None
    created_at: str | None = None
    specbench_version: str | None = None
    sources: list[ProfileSource] = field(default_factory=list)
    profiles: list[ProfileEntry] = field(default_factory=list)
