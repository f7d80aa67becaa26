"""One typed results row: a cell's numbers as results.json holds them.

Adding a metric is three edits: the function that measures it (returning its typed group, a frozen
dataclass whose field names are the row's, which ``ResultRow.add`` sets), one field here (its
annotation is also what the loader checks a value from a file against), and, to show it in the
tables, one entry in ``report/columns.py``.

A row keeps which keys it carries and in what order, exactly as the dicts it replaces did: a key
is written when it was set (a comparison key only where there is a baseline, for instance), and a
file's keys this version does not know (from a newer or older specbench, or another tool) are kept
in ``unknown`` and written back. ``to_dict`` is therefore byte-for-byte today's results.json row.

``from_dict`` is the only way a row is read from a file. What cannot be a row (not an object, no
``run``/``dataset``) is a one-line ``ResultsError``; a value of the wrong type, and NaN/±Infinity
anywhere, become ``None`` (the cell renders ``—``), each said as one line naming file, record and key.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from .record import Record
from .run_files import RESULTS

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: the reference table's keys, first and in this order in every row
REFERENCE_KEYS = [
    "dataset", "run", "method", "num_speculative_tokens", "requests", "output_tokens",
    "request_throughput_rps", "output_throughput_tps", "speedup_vs_baseline",
    "latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
    "ttft_mean_ms", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms",
    "itl_mean_ms", "itl_p50_ms", "itl_p95_ms", "itl_p99_ms",
    "tpot_mean_ms", "tpot_p50_ms", "tpot_p95_ms",
    "acceptance_rate", "acceptance_pos_1", "acceptance_pos_2", "acceptance_pos_3", "mean_acceptance_length",
]

Numbers = list[float | None]
Obj = dict[str, Any]

#: a group's field whose key is written only when it has a value: ``field(default=None, metadata=WHEN_SET)``
WHEN_SET = MappingProxyType({"when_set": True})


@dataclass(eq=False)
class ReferenceKeys:
    """The reference table's keys (``REFERENCE_KEYS``), in its order."""

    dataset: str
    run: str
    method: str | None = None
    num_speculative_tokens: int | None = None
    requests: int | None = None
    output_tokens: int | None = None
    request_throughput_rps: float | None = None
    output_throughput_tps: float | None = None
    speedup_vs_baseline: float | None = None
    latency_mean_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    ttft_mean_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p95_ms: float | None = None
    acceptance_rate: float | None = None
    acceptance_pos_1: float | None = None
    acceptance_pos_2: float | None = None
    acceptance_pos_3: float | None = None
    mean_acceptance_length: float | None = None

@dataclass(eq=False)
class LatencyAndLoad:
    """Latency beyond the reference percentiles, and the load point and how long it ran."""

    tpot_p99_ms: float | None = None
    step_mean_ms: float | None = None
    step_p50_ms: float | None = None
    step_p95_ms: float | None = None
    step_p99_ms: float | None = None
    shared_read_chunks: int | None = None
    shared_read_share: float | None = None
    server_generation_tokens: int | None = None  # keepup.py: the client's token count against the server's counter
    client_server_token_ratio: float | None = None
    client_server_tokens_agree: bool | None = None
    client_server_token_error: str | None = None
    # --- the load point and how the cell was measured
    concurrency: int | None = None
    request_rate: float | None = None
    max_concurrency: int | None = None
    repeats: int | None = None
    duration_s: float | None = None
    prompt_tokens: int | None = None

@dataclass(eq=False)
class Acceptance:
    """Acceptance from the server's counters, from the stream's chunk sizes, and from per-request stats."""

    acceptance_per_position: Numbers | None = None
    acceptance_source: str | None = None
    acceptance_window: str | None = None
    acceptance_error: str | None = None
    spec_drafts: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    stream_steps: int | None = None
    stream_accepted_tokens: int | None = None
    stream_mean_acceptance_length: float | None = None
    stream_acceptance_rate: float | None = None
    stream_acceptance_joint: Numbers | None = None
    stream_acceptance_conditional: Numbers | None = None
    stream_tokens_per_step_histogram: Obj | None = None
    stream_merged_chunks: int | None = None
    acceptance_tokens_diff: float | None = None
    acceptance_sources_agree: bool | None = None
    draft_step_share: float | None = None
    request_stats_mean_acceptance_length: float | None = None

@dataclass(eq=False)
class Provenance:
    """Failures, which count each number came from, the server, and the spread over repeats."""

    failed_requests: int | None = None
    errors: Obj | None = None
    status: str | None = None
    server_died: bool | None = None
    token_count_source: Obj | None = None
    token_count_warnings: Obj | None = None
    itl_percentiles_estimated: bool | None = None
    notes: list[str] | None = None
    output_throughput_tps_repeats: Numbers | None = None
    categories: Obj | None = None
    engine: str | None = None
    server_version: str | None = None
    server_url: str | None = None
    std: Obj | None = None
    ci95: Obj | None = None
    weights: str | None = None  # "dummy": served with random weights (suite load_format: dummy); absent: the model's

@dataclass(eq=False)
class AgainstBaseline:
    """Against the baseline on the same data set and load point (compare.py): speed-up CIs, fidelity, decomposition."""

    paired_speedup: float | None = None
    paired_speedup_ci_low: float | None = None
    paired_speedup_ci_high: float | None = None
    paired_prompts: int | None = None
    fidelity_identical: float | None = None
    fidelity_compared: int | None = None
    fidelity_unit: str | None = None
    fidelity_first_divergence_median: float | None = None
    step_cost_ratio: float | None = None
    speedup_decomposed: float | None = None
    speedup_decomposed_ci_low: float | None = None
    speedup_decomposed_ci_high: float | None = None
    speedup_residual: float | None = None
    speedup_ci_method: str | None = None

@dataclass(eq=False)
class QualityAndCost:
    """Goodput at the SLO, acceptance per request, accuracy, energy and cost (quality.py), and the SLO capacity search (slo.py)."""

    slo: Obj | None = None
    slo_attainment: float | None = None
    slo_met_requests: int | None = None
    goodput_rps: float | None = None
    request_acceptance_p10: float | None = None
    request_acceptance_p50: float | None = None
    request_acceptance_p90: float | None = None
    request_acceptance_mean: float | None = None
    request_acceptance_token_weighted_mean: float | None = None
    request_acceptance_requests: int | None = None
    request_acceptance_source: str | None = None
    request_acceptance_warning: str | None = None  # per_request.merged_steps_warning
    accuracy: float | None = None
    accuracy_compared: int | None = None
    accuracy_ungraded: int | None = None
    accuracy_truncated: int | None = None
    accuracy_error: str | None = None
    grade_network_guard: str | None = None
    energy_j: float | None = None
    joules_per_output_token: float | None = None
    gpu_util_mean_pct: float | None = None
    gpu_mem_used_max_mib: float | None = None
    sm_clock_mean_mhz: float | None = None
    telemetry_gpus: Any = None
    telemetry_error: str | None = None
    gpu_hour_usd: float | None = None
    cost_gpus: int | None = None
    usd_per_million_output_tokens: float | None = None
    cost_error: str | None = None
    slower_than_baseline_share: float | None = None
    slower_than_baseline_compared: int | None = None
    accuracy_diff_vs_baseline: float | None = None
    accuracy_diff_ci_low: float | None = None
    accuracy_diff_ci_high: float | None = None
    accuracy_mcnemar_p: float | None = None
    accuracy_paired_prompts: int | None = None
    accuracy_diff_method: str | None = None
    energy_per_token_ratio_vs_baseline: float | None = None
    cost_saving_vs_baseline: float | None = None
    slo_search_percentile: float | None = None
    slo_max_rate_rps: float | None = None
    slo_max_rate_bracket: Numbers | None = None
    slo_search_steps: int | None = None
    slo_capacity_speedup: float | None = None
    slo_capacity_speedup_range: Numbers | None = None


@dataclass(eq=False)
class ClientLag:
    """The openai SDK client's own lag (keepup.client_lag): written only for a run over it."""

    client_lag_p99_ms: float | None = None
    client_limited: bool | None = None


@dataclass(eq=False)
class O200kLengths:
    """Output and prompt lengths in tiktoken's o200k_base tokens, one tokenizer for every model (o200k.py):
    written only where counted, or null with ``o200k_error`` where the encoding file was not there."""

    output_tokens_o200k: int | None = None
    output_throughput_o200k_tps: float | None = None
    o200k_per_output_token: float | None = None
    prompt_tokens_o200k_mean: float | None = None
    prompt_tokens_o200k_p50: float | None = None
    prompt_tokens_o200k_max: int | None = None
    o200k_error: str | None = field(default=None, metadata=WHEN_SET)


@dataclass(eq=False)
class RepeatSpread:
    """Speed over repeats against the baseline (measure/repeat_spread.py): per repeat, on which server
    starts, whether they disagree (Cochran's Q), and the adaptive target; the last keys of a row."""

    speedup_repeats: Numbers | None = None
    speedup_repeats_fresh_servers: bool | None = None
    speedup_between_p: float | None = None
    speedup_varies: bool | None = None
    repeats_target: float | None = None
    repeats_target_met: bool | None = None


@dataclass(eq=False)
class StepLogStats:
    """The engine's own step log over the cell's timed passes (measure/steplog.py, docs/steplog.md): written
    only for a cell whose server ran with ``steplog`` on; ``step_source`` says what the Why table's step
    cost came from."""

    steplog_steps: int | None = None
    steplog_step_mean_ms: float | None = None
    steplog_step_p50_ms: float | None = None
    steplog_step_p95_ms: float | None = None
    steplog_step_clock: str | None = None
    steplog_step_by_batch: Obj | None = None
    steplog_fwd_ms: float | None = None
    steplog_lm_head_ms: float | None = None
    steplog_verify_ms: float | None = None
    steplog_drafter_ms: float | None = None
    steplog_gap_ms: float | None = None
    steplog_tokens_per_step: float | None = None
    steplog_hist: Numbers | None = None
    steplog_accepted: int | None = None
    steplog_counter_accepted: int | None = None
    steplog_accepted_agree: bool | None = None
    steplog_hist_accepted: int | None = None
    steplog_hist_agree: bool | None = None
    steplog_graph_modes: Obj | None = None
    steplog_padding_share: float | None = None
    steplog_window: str | None = None
    steplog_skipped_rows: Obj | None = None
    steplog_error: str | None = None
    step_source: str | None = None
    steplog_token_guesses: int | None = None
    steplog_token_accepted: int | None = None
    steplog_token_agree: bool | None = None
    steplog_token_unplaced: Obj | None = None
    steplog_stalls: int | None = None
    steplog_stall_ms: float | None = None
    steplog_stall_share: float | None = None
    steplog_stall_causes: Obj | None = None
    steplog_stall_unknown_ms: float | None = None
    steplog_one_time_events: int | None = None
    steplog_stall_passes: list[Obj] | None = None
    warmup_steady_passes: list[int] | None = None
    warmup_steady: bool | None = None
    warmup_steady_events: list[list[int]] | None = None
    # open loop, from when each request was due (measure/arrivals.py); written only for cells with due times
    latency_from_schedule_mean_ms: float | None = None
    latency_from_schedule_p95_ms: float | None = None
    ttft_from_schedule_mean_ms: float | None = None
    ttft_from_schedule_p95_ms: float | None = None
    client_behind_ms_p99: float | None = None
    client_behind_schedule: bool | None = None


@dataclass(eq=False)
class ResultRow(StepLogStats, RepeatSpread, O200kLengths, ClientLag, QualityAndCost, AgainstBaseline, Provenance, Acceptance,
                LatencyAndLoad, ReferenceKeys, Record):
    """One cell's results (``measure.summarize_cell``), a line of results.json: the fields of its bases,
    grouped by where they are measured, in results.json's order, on the one record machinery
    (``schemas/record.py``): it carries the keys set on it, in the order they were set or read, a
    key set to null stays (``KEEP_NONE``), and keys this version has no field for (acceptance_pos_4..,
    a newer version's) are kept in ``unknown`` and written back.

    Adding a metric: its function returns a typed group (``add`` sets it), one field in a group above,
    and one column entry in ``report/columns.py`` to show it. ``start`` builds a row that carries only
    ``dataset`` and ``run``; the constructor sets every field; ``row_read.read_row`` reads one from a
    file, leniently, since results files come from other tools and versions too."""

    FILE: ClassVar[str] = f"{RESULTS} row"
    KEEP_NONE: ClassVar[bool] = True

    @classmethod
    def start(cls, dataset: str, run: str) -> ResultRow:
        """A row carrying only ``dataset`` and ``run``; each key set afterwards joins it, in that order."""
        row = cls.empty()
        row.dataset, row.run = dataset, run
        return row

    @property
    def cell_status(self) -> Any:
        """``status``; a row without the key (from another tool) counts as "ok", a null one does not."""
        return self.status if self.has("status") else "ok"

    def add(self, group: DataclassInstance) -> None:
        """A metric's typed group, its keys set in field order (``row_keys``)."""
        self.update(row_keys(group))

    def to_dict(self, reference_first: bool = True) -> dict[str, Any]:
        """The results.json object: the reference keys first (null when unset), then every other key
        the row carries, in the order it was set or read. ``reference_first=False``: only the keys
        carried, in that order (a file echoed as it was read)."""
        out = {k: self.get(k) for k in REFERENCE_KEYS} if reference_first else {}
        out.update({k: self.get(k) for k in self.keys() if k not in out})
        return out


FIELD_NAMES = list(ResultRow.specs())
FIELD_SET = frozenset(FIELD_NAMES)


def row_keys(group: DataclassInstance) -> dict[str, object]:
    """A metric's typed group as the keys ``ResultRow.add`` sets, in field order (the order results.json
    writes them), leaving out a ``WHEN_SET`` field that is None. Its field names are the row's: one
    that is not raises here."""
    out = {f.name: getattr(group, f.name) for f in fields(group)
           if not (f.metadata.get("when_set") and getattr(group, f.name) is None)}
    stray = [key for key in out if key not in FIELD_SET]
    if stray:
        raise TypeError(f"{type(group).__name__}: not a ResultRow field: {', '.join(stray)}")
    return out
