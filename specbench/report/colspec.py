"""One table column as one entry: its header, the results fields it shows (their meaning and unit are
the fields' own, declared once in ``schemas/row_*.py``), the table it belongs to, when it is shown and how its
cell is written (AIPerf's "header, unit and formula in one place").

``columns.py``, ``steplog_columns.py``, ``quality_columns.py`` and ``o200k_columns.py`` hold the entries; the
markdown tables, the HTML table and docs/metrics.md are all drawn from them. Missing values are ``—`` (``-``
inside the per-position cell), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..schemas.row import ResultRow
from ..util.numbers import is_number

DASH = "—"

Rows = Sequence[ResultRow]


@dataclass(frozen=True)
class Group:
    """A table of the report: the question it answers, and the note that travels right below it."""

    key: str
    title: str
    question: str
    note: str = ""


DECOMPOSITION_NOTE = (
    "Decomposition: Speedup = Tok/step ÷ Step cost × Residual. Tok/step = decode tokens per streamed chunk (one "
    "target step); Step cost = mean chunk gap (step_mean_ms) ÷ the baseline's time per decode step (its mean chunk gap "
    "÷ its Tok/step, 1 unless the engine merged steps into one chunk); Decomposed speedup = Tok/step ÷ Step cost, the "
    "ratio of decode token rates (merged chunks leave it unchanged), with the 95% CI of the same paired bootstrap as "
    "the speedup; Residual = Speedup ÷ Decomposed speedup: below 1 is lost, above 1 won, outside decode steps "
    "(prefill/TTFT, queueing, scheduling).")

MAIN = Group("main", "Comparison", "How fast is each config, and how much of its draft is accepted? The table "
             "people paste; its first twelve columns are the reference table's.")
WHY = Group("why", "Why: tokens per step vs step cost", "Where does the speedup come from: more tokens per target "
            "step, a costlier step, or time outside decode steps?", DECOMPOSITION_NOTE)
STEP = Group("step", "Step: the engine's own step log", "Where does an engine step's time go, and does the step log "
             "agree with the server's counters? (cells run with `steplog:`, docs/steplog.md)")
STEADY = Group("steady", "Steady state: ramp-up and drain cut", "Over the span of each timed pass that ran at the "
               "cell's load, how fast is each config, and does its speedup hold there? (the comparison table's numbers "
               "are over whole passes)", "Steady window: closed loop, from the moment C requests are in flight to the "
               "first end after the pass's last send; open loop, the first and last 10 % of sends cut. Throughput "
               "counts the tokens that arrived inside it; the latencies are over the requests wholly inside it "
               "(docs/measurement.md).")
CACHE = Group("cache", "Prefix cache: cached vs cold", "How much of the prompts came from the server's prefix cache, "
              "and what did that do to TTFT, ITL and acceptance?", "Cached = the server reported at least half the "
              "request's prompt tokens as cached (usage.prompt_tokens_details.cached_tokens); Paired = the same question "
              "cold and cached (the same prompt, or the same shared-prefix group).")
PER_REQUEST = Group("per_request", "Per request", "How are acceptance and speed spread over the requests, and is "
                    "the output the baseline's?")
QUALITY = Group("quality", "Quality & cost", "Is the answer still right, within the SLO, and what does a token "
                "cost in energy and money?")
CHECKS = Group("checks", "Checks", "Can the numbers above be trusted: did the client see every token the server "
               "generated, and did every request succeed?")
#: the tables in the order they print
GROUPS = (MAIN, WHY, STEP, STEADY, PER_REQUEST, CACHE, QUALITY, CHECKS)


def always(records: Rows) -> bool:
    return True


#: how a field's unit reads in a column: a share (a fraction of 1) is shown as a percentage
SHOWN_UNIT = {"share": "%"}


@dataclass(frozen=True)
class Column:
    """A column shows the row's fields ``keys``, its meaning and unit those of the first (the field's
    ``key(...)`` in ``schemas/row_*.py``: one source for this page, docs/metrics.md and docs/records.md);
    ``note`` adds what the cell shows beyond it (its ⚠, the other keys it brings in), ``unit`` the cell's unit
    where it is not the field's. ``cell`` writes one row's text; ``shown`` says whether these records get the
    column at all; ``identity`` columns (data set, config, swept load) are repeated in every small table."""

    header: str
    cell: Callable[[ResultRow], str]
    keys: tuple[str, ...]
    group: Group = MAIN
    note: str = ""
    unit: str | None = None
    shown: Callable[[Rows], bool] = always
    identity: bool = False
    #: the header these records get, where it depends on them (``header`` is its general form)
    header_for: Callable[[Rows], str] | None = None

    @property
    def definition(self) -> str:
        doc = ResultRow.specs()[self.keys[0]].doc
        return f"{doc}; {self.note}" if self.note else doc

    @property
    def shown_unit(self) -> str:
        if self.unit is not None:
            return self.unit
        unit = ResultRow.specs()[self.keys[0]].unit
        return SHOWN_UNIT.get(unit, unit)

    def for_rows(self, records: Rows) -> Column:
        return self if self.header_for is None else replace(self, header=self.header_for(records))


def is_missing(text: str) -> bool:
    """A cell with no measured value in it: ``—``, or only dashes and separators (``—/—``, ``-/-/-``)."""
    return text == DASH or bool(text) and set(text) <= {"-", "/", DASH}


def num(value: Any, digits: int, suffix: str = "", missing: str = DASH) -> str:
    if not is_number(value):
        return missing
    return f"{value:.{digits}f}{suffix}"


def pct(value: Any, digits: int = 2, missing: str = DASH) -> str:
    return f"{value * 100:.{digits}f}%" if is_number(value) else missing


def measured(value: Callable[[ResultRow], Any]) -> Callable[[Rows], bool]:
    """``shown`` for a column that some record measured (``value`` not None)."""
    return lambda records: any(value(r) is not None for r in records)


def spread_digits(spread: Any, least: int, most: int) -> int:
    """Decimals a value with this spread (a CI's half-width, a σ) is shown to, between ``least`` and ``most``: its
    spread to two significant digits when they begin 10–35, else one (the Particle Data Group's rounding rule), so
    the digits shown are the ones the spread leaves meaningful and an interval's ends differ. No spread: ``most``."""
    if not is_number(spread) or spread <= 0:
        return most
    exponent = math.floor(math.log10(spread))
    lead = spread / 10 ** exponent  # in [1, 10)
    if lead >= 9.5:  # rounds up to 10: two digits of the next power
        exponent, lead = exponent + 1, 1.0
    return max(least, min(most, (2 if lead < 3.55 else 1) - 1 - exponent))


def with_ci(value: Any, low: Any, high: Any, suffix: str = "x", least: int = 1, most: int = 3) -> str:
    """``1.51x [1.22–1.86]``: a value and its 95% CI in one cell, to the digits the CI's half-width sets
    (``spread_digits``); without an interval the value to ``most`` digits, as the reference table has it."""
    if not is_number(value):
        return DASH
    if not (is_number(low) and is_number(high)):
        return f"{value:.{most}f}{suffix}"
    digits = spread_digits((high - low) / 2, least, most)
    return f"{value:.{digits}f}{suffix} [{low:.{digits}f}–{high:.{digits}f}]"


def with_sd(value: Any, sd: Any, digits: int = 2) -> str:
    """``327 ± 4``: a mean and its standard deviation over repeats, to the digits the σ sets (at most ``digits``, the
    mean's own without a σ)."""
    if not is_number(value):
        return DASH
    if not is_number(sd):
        return f"{value:.{digits}f}"
    shown = spread_digits(sd, 0, digits)
    return f"{value:.{shown}f} ± {sd:.{shown}f}"

