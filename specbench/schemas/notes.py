"""The notes under the tables as data: a closed set of codes (``NoteCode``), each with the values its sentence
is written from (``KINDS``), stored as ``Note`` records in a results row's ``notes`` and in meta.json's ``notes``
and ``run_dir_notes``. ``report/notes.py`` alone words them, so rewording a note changes no stored file.

A note an earlier specbench stored is its sentence (a text): it is read and printed as given. A code this version
does not know (a newer specbench's) is kept and printed as its code and values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from .record import Record, key

__all__ = ["KINDS", "Note", "NoteCode", "NoteKind", "NoteValue", "Notes"]

#: what a note's value may be: a number, a flag, a name, or a list of them
NoteValue = bool | int | float | str | list[str] | list[int] | list[float]


class NoteCode(StrEnum):
    """Every note specbench stores; each has its kind in ``KINDS`` and its wording in ``report/notes.py``."""

    # a cell's own (results.json row notes; measure/)
    ACCEPTANCE_NOT_MEASURED = "acceptance_not_measured"
    ACCEPTANCE_SOURCE = "acceptance_source"
    TOKEN_COUNTS_DOUBTED = "token_counts_doubted"
    ITL_ESTIMATED = "itl_estimated"
    SPEEDUP_VARIES = "speedup_varies"
    REPEATS_TARGET = "repeats_target"
    REQUEST_LENGTHS_MERGED = "request_lengths_merged"
    GRADED_TRUNCATED = "graded_truncated"
    SYNTHETIC_ACCEPTANCE = "synthetic_acceptance"
    # the run's (meta.json notes: how the numbers were taken, from the suite)
    DUMMY_WEIGHTS = "dummy_weights"
    DUMMY_WEIGHTS_EOS = "dummy_weights_eos"
    SPEEDUP_DEFINED = "speedup_defined"
    ITL_DEFINED = "itl_defined"
    ACCEPTANCE_DEFINED = "acceptance_defined"
    SAMPLING = "sampling"
    ARRIVALS_GAMMA = "arrivals_gamma"
    ARRIVALS_RAMP = "arrivals_ramp"
    ARRIVALS_TRACE = "arrivals_trace"
    SLO_DEFINED = "slo_defined"
    RATE_SEARCH_DEFINED = "rate_search_defined"
    ACCURACY_DEFINED = "accuracy_defined"
    MBPP_PLAIN = "mbpp_plain"
    COST_DEFINED = "cost_defined"
    CONFIG_FAILED = "config_failed"
    # the run directory's (meta.json run_dir_notes: what --resume repaired, what it lacks)
    PHASE_REMEASURED = "phase_remeasured"
    LINES_QUARANTINED = "lines_quarantined"
    READ_REPAIRED = "read_repaired"
    PROMPTS_UNCHECKED = "prompts_unchecked"
    STEPLOG_NOT_COPIED = "steplog_not_copied"
    # a cell's own, from its step log (run/steplog.py; measure/server_batch.py)
    SERVER_BATCH = "server_batch"
    # the run's (meta.json notes), added after the groups above
    PREFIX_CACHE_RESET = "prefix_cache_reset"
    # a cell's own, from its records across passes (measure/cache.py)
    RESENT_PROMPTS = "resent_prompts"


_NUMBER = (int, float)
_NONE = type(None)


@dataclass(frozen=True)
class NoteKind:
    """A code's kind: whether it is a warning (printed with ⚠), what it says (``doc``, for docs/records.md), and
    its values by name, each with the types it may hold (``type(None)`` among them: it may be left out)."""

    warning: bool
    doc: str
    values: Mapping[str, tuple[type, ...]]

    def problem(self, values: Mapping[str, object]) -> str | None:
        """Why ``values`` are not this kind's (an unknown name, a missing one, a wrong type), else None."""
        for name, value in values.items():
            types = self.values.get(name)
            if types is None:
                return f"unknown value {name!r}"
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                return f"{name}: {value!r} is not {' or '.join(t.__name__ for t in types)}"
        missing = [n for n, types in self.values.items() if _NONE not in types and n not in values]
        return f"missing {', '.join(missing)}" if missing else None


def _kind(warning: bool, doc: str, **values: tuple[type, ...]) -> NoteKind:
    return NoteKind(warning, doc, values)


_TEXT, _COUNT, _FLAG, _LIST = (str,), (int,), (bool,), (list,)

KINDS: dict[NoteCode, NoteKind] = {
    NoteCode.ACCEPTANCE_NOT_MEASURED: _kind(True, "a speculative cell's acceptance could not be measured", error=_TEXT),
    NoteCode.ACCEPTANCE_SOURCE: _kind(False, "how acceptance was counted where it is not the plain counter delta",
                                      source=_TEXT),
    NoteCode.TOKEN_COUNTS_DOUBTED: _kind(True, "requests whose token count was replaced or doubted, by reason",
                                         requests=_COUNT, reason=_TEXT),
    NoteCode.ITL_ESTIMATED: _kind(False, "requests with only a final usage total: ITL percentiles estimated",
                                  estimated=_COUNT, requests=(int, _NONE)),
    NoteCode.SPEEDUP_VARIES: _kind(True, "the repeats' speedups disagree (Cochran's Q, p < 0.05)", fresh=_FLAG,
                                   low=_NUMBER, high=_NUMBER, repeats=_COUNT, p=_NUMBER),
    NoteCode.REPEATS_TARGET: _kind(False, "repeats run for load.target_ci, and whether its half-width was met",
                                   repeats=_COUNT, fresh=_FLAG, target=_NUMBER, half_width=(int, float, _NONE)),
    NoteCode.REQUEST_LENGTHS_MERGED: _kind(True, "per-request acceptance lengths from chunks that merged steps",
                                           merged_chunks=(int, _NONE), fewer_steps=(int, float, _NONE),
                                           steps=(int, _NONE)),
    NoteCode.GRADED_TRUNCATED: _kind(False, "graded answers cut by max_tokens", answers=_COUNT),
    NoteCode.SYNTHETIC_ACCEPTANCE: _kind(False, "a config whose acceptance the engine fixes: same output and "
                                                "accuracy do not apply"),
    NoteCode.DUMMY_WEIGHTS: _kind(True, "configs served with random weights", configs=_LIST, every=_FLAG),
    NoteCode.DUMMY_WEIGHTS_EOS: _kind(True, "random weights without load.ignore_eos"),
    NoteCode.SPEEDUP_DEFINED: _kind(False, "what Speedup and its CI are"),
    NoteCode.ITL_DEFINED: _kind(False, "what ITL and TPOT are, and the clocks that stamped the chunks",
                                clocks=_LIST),
    NoteCode.ACCEPTANCE_DEFINED: _kind(False, "where acceptance comes from"),
    NoteCode.SAMPLING: _kind(False, "temperature, max_tokens and the warm-up", temperature=_NUMBER,
                             max_tokens=_COUNT, warmup=(str, int)),
    NoteCode.ARRIVALS_GAMMA: _kind(False, "open-loop arrivals with gamma gaps", burstiness=_NUMBER),
    NoteCode.ARRIVALS_RAMP: _kind(False, "open-loop arrivals on a ramp", shape=_TEXT, start=_NUMBER, end=_NUMBER,
                                  duration_s=(int, float, _NONE), burstiness=_NUMBER),
    NoteCode.ARRIVALS_TRACE: _kind(False, "open-loop arrivals from a trace", file=_TEXT, format=_TEXT,
                                   requests=_COUNT, span_s=_NUMBER, time_scale=_NUMBER),
    NoteCode.SLO_DEFINED: _kind(False, "the SLO's bounds and what SLO met and goodput are", ttft_ms=(int, float, _NONE),
                                tpot_ms=(int, float, _NONE), latency_ms=(int, float, _NONE)),
    NoteCode.RATE_SEARCH_DEFINED: _kind(False, "how the capacity at the SLO was searched", percentile=_NUMBER,
                                        max_steps=_COUNT),
    NoteCode.ACCURACY_DEFINED: _kind(False, "the graded data sets, and how accuracy and its difference are computed",
                                     datasets=_LIST),
    NoteCode.MBPP_PLAIN: _kind(True, "mbpp graded with recipe plain"),
    NoteCode.COST_DEFINED: _kind(False, "how $/M tok is computed", gpu_hour_usd=_NUMBER),
    NoteCode.CONFIG_FAILED: _kind(True, "a config that failed, with its error's first line", config=_TEXT,
                                  error=_TEXT),
    NoteCode.PHASE_REMEASURED: _kind(False, "a pass measured again: some of its request records were unreadable",
                                     cell=_TEXT, repeat=_COUNT, unreadable=_COUNT, requests=_COUNT),
    NoteCode.LINES_QUARANTINED: _kind(False, "unreadable lines moved aside by --resume (the first five named)",
                                      file=_TEXT, lines=_COUNT, target=_TEXT, line_numbers=_LIST, reasons=_LIST),
    NoteCode.READ_REPAIRED: _kind(False, "what reading the run directory counted once (as the reader says it on "
                                         "stderr)", said=_TEXT),
    NoteCode.PROMPTS_UNCHECKED: _kind(False, "a run resumed without prompt hashes to check"),
    NoteCode.STEPLOG_NOT_COPIED: _kind(True, "a Ray node's step log that was not copied back", folder=_TEXT,
                                       config=_TEXT, host=_TEXT, why=_TEXT, stays=(str, _NONE)),
    NoteCode.SERVER_BATCH: _kind(True, "a closed-loop cell whose server ran fewer requests at once than its C and queued "
                                       "the rest (the step log's running and waiting)", concurrency=_COUNT,
                                 running_p50=_NUMBER, running_max=_COUNT, waiting_share=_NUMBER,
                                 kv_peak=(int, float, _NONE)),
    NoteCode.PREFIX_CACHE_RESET: _kind(False, "load.prefix_cache reset: the server's prefix cache emptied before each "
                                              "timed pass"),
    NoteCode.RESENT_PROMPTS: _kind(True, "load.prefix_cache keep: timed requests that re-sent a prompt an earlier timed "
                                         "pass or warm-up of the same server start had sent, which the server served "
                                         "from its prefix cache (cached_tokens)", resent=_COUNT, requests=_COUNT,
                                   cached_share=_NUMBER),
}


@dataclass
class Note(Record):
    """A note under the tables: its code (one of ``NoteCode``, listed below with the values of each) and the
    values its sentence is written from; the report words it (``report/notes.py``)."""

    FILE: ClassVar[str] = "a note (results.json row notes, meta.json notes and run_dir_notes)"

    code: str | None = key("what the note says: one of the codes listed below (required in what specbench writes; "
                           "a note without one, from another tool, is printed as its values)")
    values: dict[str, NoteValue] | None = key("the numbers and names its sentence is written from, by the code's own "
                                               "value names (absent: none)")

    @classmethod
    def of(cls, code: NoteCode, **values: NoteValue | None) -> Note:
        """A note of ``code``; a value None is left out. Values that are not the code's (``KINDS``) are a
        ``ValueError``: a note is written from its declaration only."""
        given = {name: value for name, value in values.items() if value is not None}
        why = KINDS[code].problem(given)
        if why:
            raise ValueError(f"note {code}: {why}")
        return cls(str(code), given or None)

    @property
    def kind(self) -> NoteKind | None:
        """The code's kind; None for a code this version does not know."""
        try:
            return KINDS[NoteCode(str(self.code))]
        except ValueError:  # not a code (a newer specbench's), or none
            return None


#: a ``notes`` key's items: a note, or the sentence an earlier specbench stored
Notes = list[str | Note]
