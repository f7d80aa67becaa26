"""The acceptance profile file (``specbench-profile/1``) as typed records: ``specbench profile`` writes a
``ProfileFile`` (``measure.profile`` makes its entries), ``whatif --profile`` reads it back strictly
(``measure.replay.read_profile``, then checks each entry as vLLM checks its rates). Every entry writes
all its keys, null or not; a file read and written back is the same bytes (``schemas.record``). Every number
is bounded in its declaration (rates in [0, 1], lengths in [1, k + 1], counts ≥ 0): a value outside, NaN or
±Infinity is refused in one line naming the file and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .record import Record, key

FORMAT = "specbench-profile/1"
#: the most draft positions (k) an entry may carry: a suite's num_speculative_tokens has the same bound
MAX_K = 128


@dataclass
class CategoryAcceptance(Record):
    """One category's acceptance, from the stream's chunk sizes (the counters are per cell)."""

    KEEP_NONE: ClassVar[bool] = True
    acceptance_per_position: list[float | None] | None = key("p_1..p_k from the stream (1-based, unconditional)",
                                                             low=0, high=1, max_len=MAX_K)
    mean_acceptance_length: float | None = key("the stream's mean acceptance length (tokens per step)",
                                               low=1, high=MAX_K + 1)
    acceptance_conditional: list[float | None] | None = key("P(draft i accepted given drafts 1..i−1 accepted); null "
                                                            "where p_(i−1) is 0 or unknown", low=0, max_len=MAX_K)
    requests: int | None = key("how many of the cell's requests are of the category", low=0)
    source: str | None = key("where the numbers come from: the stream's chunk sizes, and their caveat")


@dataclass
class ProfileProvenance(Record):
    """Where a profile comes from; ``missing`` lists what the input could not say, ``missing_why`` why (written
    only when there is a reason)."""

    KEEP_NONE: ClassVar[bool] = True
    source: str | None = key("the input the entry was read from, as given to specbench profile")
    engine: str | None = key("the engine that served the config")
    engine_version: str | None = key("the engine's version")
    target_model: str | None = key("the target model's path as served (server.model_path), else the suite's model")
    served_model: str | None = key("the suite's model name")
    drafter: str | None = key("the drafter model (null: none, e.g. ngram)")
    method: str | None = key("the speculative method")
    num_speculative_tokens: int | None = key("k, the number of draft tokens", low=1, high=MAX_K)
    temperature: float | None = key("the sampling temperature", low=0)
    recipe: str | None = key("the recipe the data set's prompts were made with")
    suite: str | None = key("the suite file of the run")
    suite_sha256: str | None = key("the suite file's sha256")
    specbench_version: str | None = key("the specbench that measured the run")
    missing: list[str] = key("the keys above left null: the input could not say them", factory=list)
    missing_why: str | None = key("why they are missing (written only when known: no meta.json)")

    def keys(self) -> list[str]:
        return [k for k in super().keys() if k != "missing_why" or self.missing_why is not None]


@dataclass
class ProfileEntry(Record):
    """One config × data set × load point: p_1..p_k (1-based, unconditional), the mean length, what was filled."""

    KEEP_NONE: ClassVar[bool] = True
    config: str | None = key("the speculative config measured")
    dataset: str | None = key("the data set")
    concurrency: float | None = key("the concurrency (open loop: the in-flight cap; null: none recorded)", low=0)
    request_rate: float | None = key("open loop: the arrival rate in req/s (null: closed loop)", low=0)
    load: str | None = key('the load point as labelled: "C=4", "2 req/s"')
    num_speculative_tokens: int | None = key("k, the number of draft positions", low=1, high=MAX_K)
    acceptance_per_position: list[float] | None = key("p_1..p_k: P(the first i drafts of a step are all accepted), "
                                                      "1-based, unconditional (checked as vLLM checks them, in "
                                                      "its words: measure.replay)", max_len=MAX_K)
    mean_acceptance_length: float | None = key("tokens per step, 1 + Σ p", low=1, high=MAX_K + 1)
    acceptance_conditional: list[float | None] | None = key("P(draft i accepted given drafts 1..i−1 accepted) = "
                                                            "p_i / p_(i−1); null where p_(i−1) is 0",
                                                            low=0, high=1, max_len=MAX_K)
    estimated_positions: list[int] | None = key("1-based positions filled by fill_rule, not measured",
                                                low=1, high=MAX_K, max_len=MAX_K)
    fill_rule: str | None = key("the rule that filled them (null: nothing filled)")
    fill_ratio: float | None = key("r of the fill rule (null: nothing filled)", low=0, high=1)
    measured_positions: int | None = key("how many positions the input gave", low=0, high=MAX_K)
    acceptance_source: str | None = key("where the acceptance came from: the engine's counters, or the results "
                                        "file's keys")
    spec_drafts: int | None = key("drafting steps the counters saw (they weight loads when pooled)", low=0)
    speedup_vs_baseline: float | None = key("the cell's speedup vs the baseline", low=0)
    speedup_ci95: list[float | None] | None = key("its 95% CI [low, high]")
    status: str | None = key('status of the results row: "ok", "failed", "interrupted" (null: not written, read as ok)')
    categories: dict[str, CategoryAcceptance] | None = key("per prompt category: its acceptance from the stream "
                                                           "(null: no categories)")
    provenance: ProfileProvenance | None = key("what measured it: engine, models, method, k, suite")


@dataclass
class ProfileSource(Record):
    """One input of ``specbench profile``: the results file read, and what came of it."""

    path: str | None = key("the input as given: a run directory or a results.json")
    results: str | None = key("the results file read")
    results_sha256: str | None = key("its sha256")
    meta: bool | None = key("a meta.json was beside it (false: only what the rows carry is known)")
    profiles: int | None = key("the entries made from it", low=0)
    refused: int | None = key("its records refused (numbers no profile can match)", low=0)


@dataclass
class ProfileFile(Record):
    """What ``specbench profile`` writes and ``whatif --profile`` replays: each input read, and one entry per
    speculative config × data set × load point."""

    FILE: ClassVar[str] = "the acceptance profile file (specbench profile)"
    format: str | None = key('"specbench-profile/1"')
    positions: str | None = key("how acceptance_per_position is indexed: 1-based, unconditional")
    fill_rule: str | None = key("the rule that fills positions an input does not give")
    created_at: str | None = key("when it was written (UTC)")
    specbench_version: str | None = key("the specbench that wrote it")
    sources: list[ProfileSource] = key("each input read", factory=list)
    profiles: list[ProfileEntry] = key("one per speculative config × data set × load point", factory=list)
