"""The *Step* table (the engine's own step log, ``specbench.measure.steplog``) and the Why table's note of
which source its step cost came from; shown only where some cell ran with ``steplog:``."""

from __future__ import annotations

from ..measure.server_batch import WAITING_NOTE_SHARE
from ..schemas.notes import Note, NoteCode
from ..schemas.row import ResultRow
from .colspec import STEP, WHY, Column, Rows, measured, num, pct


def _steps(r: ResultRow) -> str:
    return f"{num(r.steplog_step_mean_ms, 2)}/{num(r.steplog_step_p50_ms, 2)}/{num(r.steplog_step_p95_ms, 2)}"


def _split(r: ResultRow) -> str:
    return "/".join(num(v, 2) for v in (r.steplog_fwd_ms, r.steplog_lm_head_ms, r.steplog_verify_ms,
                                        r.steplog_drafter_ms, r.steplog_gap_ms))


def _agree(agree: bool | None, a: int | None, b: int | None) -> str:
    if a is None or b is None:
        return "—"
    return f"{a} = {b}" if agree else f"{a} ≠ {b} ⚠"


def _modes(r: ResultRow) -> str:
    modes = r.steplog_graph_modes or {}
    return " ".join(f"{m} {pct(v, 0)}" for m, v in modes.items()) or "—"


def _stalls(r: ResultRow) -> str:
    if r.steplog_stalls is None:
        return "—"
    return f"{r.steplog_stalls}/{num(r.steplog_stall_ms, 0)}/{pct(r.steplog_stall_share, 1)}"


def _causes(r: ResultRow) -> str:
    causes = r.steplog_stall_causes or {}
    top = sorted(((k, v) for k, v in causes.items() if isinstance(v, (int, float))), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.0f}" for k, v in top[:3]) or ("none" if r.steplog_stalls == 0 else "—")


def _batch(r: ResultRow) -> str:
    if r.steplog_running_p50 is None and r.steplog_waiting_share is None and r.steplog_kv_peak is None:
        return "—"
    noted = any(isinstance(n, Note) and n.code == NoteCode.SERVER_BATCH for n in r.notes or [])
    return (f"{num(r.steplog_running_p50, 1).removesuffix('.0')}/{num(r.steplog_running_max, 0)}, "
            f"{pct(r.steplog_waiting_share, 0)}, {pct(r.steplog_kv_peak, 0)}" + (" ⚠" if noted else ""))


def _has_log(records: Rows) -> bool:
    return any(r.steplog_steps is not None for r in records)


STEP_COLUMNS: list[Column] = [
    Column("Steps", lambda r: num(r.steplog_steps, 0), ("steplog_steps", "steplog_window"), STEP,
           note="each pass cut from its server's step log by the wall times of its two /metrics scrapes "
                "(steplog_window)", shown=_has_log),
    Column("Step ms mean/p50/p95", _steps, ("steplog_step_mean_ms", "steplog_step_p50_ms", "steplog_step_p95_ms",
                                            "steplog_step_clock", "steplog_step_by_batch"), STEP, shown=_has_log),
    Column("Fwd/LM head/verify/draft/gap ms", _split, ("steplog_fwd_ms", "steplog_lm_head_ms", "steplog_verify_ms",
                                                       "steplog_drafter_ms", "steplog_gap_ms"), STEP, shown=_has_log),
    Column("Log tok/step", lambda r: num(r.steplog_tokens_per_step, 3), ("steplog_tokens_per_step", "steplog_hist"),
           STEP, shown=_has_log),
    Column("Accepted log = counter", lambda r: _agree(r.steplog_accepted_agree, r.steplog_accepted,
                                                      r.steplog_counter_accepted),
           ("steplog_accepted", "steplog_counter_accepted", "steplog_accepted_agree"), STEP,
           note="shown as a = b, or a ≠ b ⚠", shown=_has_log),
    Column("Hist = accepted", lambda r: _agree(r.steplog_hist_agree, r.steplog_hist_accepted, r.steplog_accepted),
           ("steplog_hist_accepted", "steplog_hist_agree"), STEP, note="⚠ with both numbers when they differ",
           shown=_has_log),
    Column("Token log = log", lambda r: _agree(r.steplog_token_agree, r.steplog_token_accepted, r.steplog_accepted),
           ("steplog_token_accepted", "steplog_token_agree", "steplog_token_guesses", "steplog_token_unplaced"), STEP,
           note="⚠ with both numbers when they differ",
           shown=lambda rows: any(r.steplog_token_guesses is not None for r in rows)),
    Column("Stalls n/ms/share", _stalls, ("steplog_stalls", "steplog_stall_ms", "steplog_stall_share",
                                          "steplog_stall_passes"), STEP, unit="steps/ms/%", shown=_has_log),
    Column("Stall causes", _causes, ("steplog_stall_causes", "steplog_stall_unknown_ms", "steplog_one_time_events"),
           STEP, shown=_has_log),
    Column("Running p50/max, waiting, KV peak", _batch,
           ("steplog_running_p50", "steplog_running_max", "steplog_waiting_share", "steplog_kv_peak"), STEP,
           unit="requests/%/%", note=f"⚠, and a note under the tables, where a closed loop's server ran a median batch "
                                     f"below C while requests waited after ≥ {WAITING_NOTE_SHARE:.0%} of its steps",
           shown=measured(lambda r: r.steplog_running_p50)),
    Column("Graph modes", _modes, ("steplog_graph_modes", "steplog_padding_share"), STEP, shown=_has_log),
    Column("Skipped rows", lambda r: str(sum((r.steplog_skipped_rows or {}).values())) if r.steplog_steps is not None else "—",
           ("steplog_skipped_rows", "steplog_error"), STEP,
           shown=lambda rows: any(r.steplog_skipped_rows or r.steplog_error for r in rows)),
]

STEP_SOURCE_COLUMN = Column("Step source", lambda r: r.step_source or "—", ("step_source", "steplog_tokens_per_step"),
                            WHY, shown=lambda rows: any(r.step_source is not None for r in rows))
