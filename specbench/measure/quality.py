"""Quality and cost beside speed, added to each results row: goodput at the SLO (``slo``),
acceptance per request (``per_request``), task accuracy (``grade``), energy and telemetry
(``telemetry``) and cost; then each against the baseline on the same data set and load point.

Keys appear only for what the suite asked for (slo, grade, cost) or what a phase recorded
(telemetry); a value that could not be measured is null with its reason, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..grade import accuracy_pairs, accuracy_summary, paired_accuracy
from ..launch.gpus import gpu_count
from ..schemas.cell import Cell
from ..schemas.notes import Note, NoteCode
from ..schemas.phase import PhaseInfo, by_cell
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..suite.model import Suite
from .compare import paired_requests, ratio
from .per_request import acceptance_summary, merged_steps, merged_steps_warning, slower_share
from .slo import slo_summary
from .telemetry import TelemetryWindow, cost_summary, telemetry_summary

#: what does not apply to a row whose acceptance the engine fixed (``ServerConfig.synthetic_acceptance``)
NOT_TARGET_OUTPUT = ("fidelity_identical", "fidelity_compared", "fidelity_unit", "fidelity_first_divergence_median",
                     "accuracy", "accuracy_compared", "accuracy_diff_vs_baseline", "accuracy_diff_ci_low",
                     "accuracy_diff_ci_high", "accuracy_mcnemar_p", "accuracy_paired_prompts")
#: ``accuracy_error`` of such a row (a results value, so a sentence; the note under the tables is a code)
SYNTHETIC_NOTE = ("synthetic acceptance: drafts are committed whether or not they match the target's tokens, so Same "
                  "output and accuracy do not apply (—)")


def add_quality(rows: list[ResultRow], phases: Sequence[PhaseInfo], records: Sequence[RequestRecord], suite: Suite) -> None:
    _add_quality(rows, phases, records, suite)
    synthetic = {c.name for c in suite.configs if getattr(c, "synthetic_acceptance", False)}
    for row in rows:
        if row.run in synthetic:
            row.update({key: None for key in NOT_TARGET_OUTPUT if row.has(key)})
            if row.has("accuracy"):
                row.accuracy_error = SYNTHETIC_NOTE
            _note(row, Note.of(NoteCode.SYNTHETIC_ACCEPTANCE))


def _add_quality(rows: list[ResultRow], phases: Sequence[PhaseInfo], records: Sequence[RequestRecord], suite: Suite) -> None:
    configs = {c.name: c for c in suite.configs}
    baseline = suite.baseline.name if suite.baseline else None
    recs, by_phase = by_cell(phases, records)
    for row in rows:
        measured, cell_phases = recs[Cell.of_row(row)], by_phase[Cell.of_row(row)]
        attained = slo_summary(measured, sum(p.wall_s for p in cell_phases), suite.load.slo)
        if attained is not None:
            row.add(attained)
        if row.num_speculative_tokens is not None or row.method != "baseline":
            row.add(acceptance_summary(measured))
            merged = merged_steps(row)
            if merged:
                row.request_acceptance_warning = merged_steps_warning(row)
                _note(row, merged)
        graded = row.dataset in (suite.load.grade or ())
        accuracy = accuracy_summary(measured, graded)
        if accuracy is not None:
            row.add(accuracy)
        if graded and row.accuracy_truncated:
            _note(row, Note.of(NoteCode.GRADED_TRUNCATED, answers=row.accuracy_truncated))
        windows = [TelemetryWindow.from_dict(p.telemetry) for p in cell_phases if p.telemetry]
        row.add(telemetry_summary(windows, row.output_tokens))
        config = configs.get(row.run)
        if suite.cost is not None and config is not None:
            cost = cost_summary(suite.cost, *gpu_count(suite, config), row.output_throughput_tps)
            if cost is not None:
                row.add(cost)
    if baseline is None:
        return
    base_rows = {Cell.of_row(r): r for r in rows if r.run == baseline}
    for row in rows:
        base = base_rows.get(Cell.of_row(row).with_config(baseline))
        if base is None or row.run == baseline:
            continue
        mine, theirs = recs[Cell.of_row(row)], recs[Cell.of_row(base)]
        row.add(slower_share(paired_requests(mine, theirs)))
        if row.has("accuracy"):
            row.add(paired_accuracy(accuracy_pairs(mine, theirs)))
        row.energy_per_token_ratio_vs_baseline = ratio(row.joules_per_output_token, base.joules_per_output_token)
        if row.has("usd_per_million_output_tokens"):
            usd = ratio(row.usd_per_million_output_tokens, base.usd_per_million_output_tokens)
            row.cost_saving_vs_baseline = None if usd is None else 1 - usd


#: what a random model's tokens cannot give: agreement with the baseline and right answers happen by chance only
_CHANCE_ONLY = ("fidelity_identical", "fidelity_first_divergence_median", "accuracy_diff_vs_baseline",
                "accuracy_diff_ci_low", "accuracy_diff_ci_high", "accuracy_mcnemar_p")


def mark_dummy_weights(rows: list[ResultRow], suite: Suite) -> None:
    """Rows of configs served with random weights (``load_format: dummy``) say so (``weights: "dummy"``)
    and carry no same-output share or accuracy (null, never a number); against a dummy baseline no
    row's same-output share or accuracy difference means anything either."""
    dummy = set(suite.dummy_configs)
    if not dummy:
        return
    base_dummy = suite.baseline is not None and suite.baseline.name in dummy
    for row in rows:
        mine = row.run in dummy
        if mine:
            row.weights = "dummy"
            if row.has("accuracy"):
                row.accuracy = None
                row.accuracy_error = "dummy weights: the answers are random tokens, not graded"
        if mine or base_dummy:
            for key in _CHANCE_ONLY:
                if row.has(key):
                    row.set(key, None)


def weights_notes(suite: Suite) -> list[Note]:
    """The notes under the table of a run on random weights (first: they bear on every other number)."""
    dummy = suite.dummy_configs
    if not dummy:
        return []
    out = [Note.of(NoteCode.DUMMY_WEIGHTS, configs=list(dummy), every=len(dummy) == len(suite.configs))]
    if not suite.load.ignore_eos:
        out.append(Note.of(NoteCode.DUMMY_WEIGHTS_EOS))
    return out


def _note(row: ResultRow, note: Note) -> None:
    row.notes = [*(row.notes or []), note]


def suite_notes(suite: Suite) -> list[Note]:
    """Notes under the table saying how the quality columns were computed (only for what was asked)."""
    out = []
    slo = suite.load.slo
    if slo is not None:
        out.append(Note.of(NoteCode.SLO_DEFINED, ttft_ms=slo.ttft_ms, tpot_ms=slo.tpot_ms, latency_ms=slo.latency_ms))
        if suite.load.rate_search is not None:
            s = suite.load.rate_search
            out.append(Note.of(NoteCode.RATE_SEARCH_DEFINED, percentile=s.percentile, max_steps=s.max_steps))
    if suite.load.grade:
        out.append(Note.of(NoteCode.ACCURACY_DEFINED, datasets=list(suite.load.grade)))
        if any(d.name in suite.load.grade and d.source == "mbpp" and d.effective_recipe == "plain" for d in suite.datasets):
            out.append(Note.of(NoteCode.MBPP_PLAIN))
    if suite.cost is not None:
        out.append(Note.of(NoteCode.COST_DEFINED, gpu_hour_usd=suite.cost.gpu_hour_usd))
    return out
