"""docs/records.md, written from the record declarations themselves: every file and line specbench
writes, each key with what it holds (type, unit and range, from its annotation and ``key(...)``) and what
it means (``key``'s doc); results.json's row group by group, its metric groups in declaration order.
``tests/unit/test_docs.py`` keeps the page equal to what this renders."""

from __future__ import annotations

import typing

from .accelerator import Accelerator
from .launched import ProcessIdentity, StoppedLeftover
from .meta import Comparability, GitState, Host, PromptSet, RunMeta, RunStart, ServerMeta, SteplogPlugin, SuiteFile, SuiteInfo, Timing
from .notes import KINDS, Note
from .phase import PhaseInfo, SupersededPhase
from .placement import Placement, WorkerPlace
from .plans import (
    Candidate,
    KCell,
    ProfileRef,
    ProfileSpeedup,
    ReplayedConfig,
    Schedule,
    ScheduleCheck,
    ScheduleFile,
    SyntheticLength,
    TunedConfig,
    TuneFamily,
    TunePlan,
    TuneResult,
    WhatifPlan,
)
from .profile_file import CategoryAcceptance, ProfileEntry, ProfileFile, ProfileProvenance, ProfileSource
from .quarantine import QuarantinedLine
from .record import FieldSpec, Record, type_name
from .request import ProbeRequest, RequestRecord
from .row import GROUPS, REFERENCE_KEYS, ResultRow, own_names
from .slo_search import SloProbe, SloSearch
from .steplog import EventRow, GpuRow, SchedRow, StepHeader, TokenRow

#: (title, records) in the page's order: a record nested in another follows it
SECTIONS: tuple[tuple[str, tuple[type[Record], ...]], ...] = (
    ("The raw data: one line per request and per measured phase",
     (RequestRecord, PhaseInfo, ProbeRequest, QuarantinedLine)),
    ("results.json: one row per cell, the product", (ResultRow,)),
    ("meta.json: the run's metadata",
     (RunMeta, SuiteInfo, SuiteFile, GitState, Comparability, PromptSet, Host, ServerMeta, Accelerator, SteplogPlugin,
      RunStart, Timing,
      SupersededPhase, StoppedLeftover, Placement, WorkerPlace, SloSearch, SloProbe)),
    ("launched.json: the servers a run started and has not stopped yet (config → identity)",
     (ProcessIdentity,)),
    ("meta.json: the derived suites' plans (whatif, tune; docs/explain.md) and schedule.json",
     (WhatifPlan, SyntheticLength, ReplayedConfig, ProfileRef, ProfileSpeedup, TunePlan, TunedConfig, TuneFamily,
      TuneResult, KCell, Candidate, Schedule, ScheduleCheck, ScheduleFile)),
    ("The notes under the tables", (Note,)),
    ("The acceptance profile (`specbench profile`, `whatif --profile`)",
     (ProfileFile, ProfileSource, ProfileEntry, ProfileProvenance, CategoryAcceptance)),
    ("The step log (logs/steplog/, docs/steplog.md)",
     (StepHeader, SchedRow, GpuRow, TokenRow, EventRow)),
)


def _range(spec: FieldSpec) -> str:
    low, high, most, length = (spec.meta.get(k) for k in ("low", "high", "max_len", "length"))
    parts = [spec.unit] if spec.unit else []
    if length is not None:
        parts.append(f"exactly {length} items")
    if low is not None and high is not None:
        parts.append(f"in [{low:g}, {high:g}]")
    elif low is not None:
        parts.append(f"≥ {low:g}")
    elif high is not None:
        parts.append(f"≤ {high:g}")
    if most is not None:
        parts.append(f"at most {most} {'characters' if spec.hint in (str, str | None) else 'items'}")
    return ", ".join(parts)


def holds(spec: FieldSpec) -> str:
    """What a key holds, as the page says it: its type, its range, null where null is allowed."""
    text = type_name(spec.hint)
    bounds = _range(spec)
    if bounds:
        text += f" ({bounds})"
    if spec.nullable and spec.hint is not typing.Any:
        text += " or null"
    return text + ("; required" if spec.required else "")


def record_markdown(record: type[Record]) -> str:
    doc = " ".join((record.__doc__ or "").split())
    own = {name: spec for name, spec in record.specs().items()
           if not any(name in base.specs() for base in record.__mro__[1:] if isinstance(base, type)
                      and issubclass(base, Record) and base is not Record)}
    lines = [f"### {record.FILE or record.__name__} — `{record.__name__}`, version {record.VERSION}", "", doc, "",
             "| key | holds | meaning |", "| --- | --- | --- |"]
    # a trailing underscore is Python's for a keyword key (``from_`` holds ``from``)
    lines += [f"| `{name.rstrip('_')}` | {holds(spec)} | {spec.doc or '—'} |" for name, spec in own.items()]
    return "\n".join(lines)


_WORDS = {int: "integer", float: "number", str: "text", bool: "true/false", list: "list"}


def notes_markdown() -> str:
    """The note record, then its closed set of codes with their values (``schemas/notes.py``)."""
    lines = [record_markdown(Note), "", "The codes, each with the values its sentence is written from; "
             "`specbench/report/notes.py` words each, and a test fails on a code without wording. ⚠: printed as a "
             "warning.", "", "| code | | says | values |", "| --- | --- | --- | --- |"]
    for code, kind in KINDS.items():
        values = []
        for name, types in kind.values.items():
            words = dict.fromkeys("number" if t is int and float in types else _WORDS[t] for t in types
                                  if t is not type(None))
            values.append(f"`{name}` ({' or '.join(words)}{', optional' if type(None) in types else ''})")
        lines.append(f"| `{code}` | {'⚠' if kind.warning else ''} | {kind.doc} | {', '.join(values) or '—'} |")
    return "\n".join(lines)


def row_markdown() -> str:
    """results.json's row: every key, group by group (``schemas/row_*.py``), in the order the file has them."""
    doc = " ".join((ResultRow.__doc__ or "").split())
    lines = [f"### {ResultRow.FILE} — `{ResultRow.__name__}`, version {ResultRow.VERSION}", "", doc, "",
             "A row's keys are written in one order: the reference table's "
             f"({', '.join(f'`{k}`' for k in REFERENCE_KEYS)}), every one of them even when null; then "
             "`acceptance_pos_4` … `acceptance_pos_K` where K > 3; then the other keys the row carries, group by group "
             "as below; then keys this version does not know, as read. A key is written only when its group was "
             "measured (each group says when); null means not measured, never 0.", ""]
    for group in GROUPS:
        specs = ResultRow.specs()
        lines += [f"#### `{group.__name__}`", "", " ".join((group.__doc__ or "").split()), "",
                  "| key | holds | meaning |", "| --- | --- | --- |"]
        for name in own_names(group):
            meaning = specs[name].doc.replace("|", "\\|")  # a pipe in a meaning would end its table cell
            lines.append(f"| `{name}` | {holds(specs[name])} | {meaning} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def records_markdown() -> str:
    """The whole page."""
    out = ["# Records: every file and line specbench writes", "",
           "Written from the declarations in `specbench/schemas/` (`schemas/docs.py`); do not edit by hand. "
           "Each record is read strictly (a wrong type or a value out of its range is one line naming the key; "
           "NaN/±Infinity is null where a key declares no range and such a line where it does), "
           "keys a newer version adds are kept and written back, and version 1 is implied by the absence of "
           "`schema_version` (a later version writes it first: `--resume` and the gate refuse a file of a newer "
           "version, the report reads it with what it knows and says which keys it ignored, "
           "[history.md](history.md#a-run-a-newer-specbench-wrote)). results.json's row is read leniently instead (results "
           "files come from other tools too): a wrong value is shown as — and said. The report's columns over its keys: "
           "[metrics.md](metrics.md).", ""]
    for title, records in SECTIONS:
        out += [f"## {title}", ""]
        for record in records:
            out += [row_markdown() if record is ResultRow else notes_markdown() if record is Note
                    else record_markdown(record), ""]
    return "\n".join(out)
