"""The batch the server ran, against the load point asked for (docs/steplog.md): a closed loop at C keeps C requests
in flight, but a server whose KV cache, ``--max-num-seqs`` or prefill token budget holds fewer runs its own batch
and queues the rest — the cell is labelled C=64 while the engine ran ~20 at once, and TTFT holds the queue. The
scheduler's ``running``, ``waiting`` and ``kv_usage`` after each step (the step log's ``sched`` rows) say so.

Pure functions over a cell's timed passes' steps; a field the log lacks (older logs, some hooks) is None, never 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..schemas.notes import Note, NoteCode
from ..schemas.row_steplog import ServerBatch
from .step_columns import Array, StepColumns

__all__ = ["WAITING_NOTE_SHARE", "batch_note", "server_batch"]

#: a closed-loop cell whose requests waited in the server's queue after at least this share of its steps, and whose
#: median batch was below its C, gets the note: a start-up ramp (C requests sent at once, admitted over a few
#: prefill steps) stays under it, a server that held the batch down does not (docs/steplog.md)
WAITING_NOTE_SHARE = 0.10


def _known(steps: Sequence[StepColumns], name: str) -> Array:
    """Field ``name`` over every step of the passes, the steps whose row lacks it left out."""
    columns = [s.sched[name][~s.sched.absent(name)] for s in steps]
    return np.concatenate(columns) if columns else np.zeros(0)


def server_batch(steps: Sequence[StepColumns]) -> ServerBatch:
    """Over the steps of a cell's timed passes: the median and most requests running after a step, the share of
    steps after which requests waited, and the fullest KV cache; each over the steps that recorded it."""
    running, waiting, kv = _known(steps, "running"), _known(steps, "waiting"), _known(steps, "kv_usage")
    return ServerBatch(
        steplog_running_p50=float(np.median(running)) if len(running) else None,
        steplog_running_max=int(running.max()) if len(running) else None,
        steplog_waiting_share=float(np.mean(waiting > 0)) if len(waiting) else None,
        steplog_kv_peak=float(kv.max()) if len(kv) else None,
    )


def batch_note(batch: ServerBatch, concurrency: int, closed_loop: bool) -> Note | None:
    """The note of a closed-loop cell at C > 1 whose server ran a median batch below C while requests waited after
    ≥ ``WAITING_NOTE_SHARE`` of its steps: the numbers are the server's batch's, not C's. A median below C without
    waiting is the client's (a drain, requests between sends), and waiting at a median of C is the start-up ramp's:
    neither is noted."""
    p50, share = batch.steplog_running_p50, batch.steplog_waiting_share
    if not closed_loop or concurrency <= 1 or p50 is None or share is None or batch.steplog_running_max is None:
        return None
    if p50 >= concurrency or share < WAITING_NOTE_SHARE:
        return None
    return Note.of(NoteCode.SERVER_BATCH, concurrency=concurrency, running_p50=p50, running_max=batch.steplog_running_max,
                   waiting_share=share, kv_peak=batch.steplog_kv_peak)
