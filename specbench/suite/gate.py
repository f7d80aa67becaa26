"""Gate thresholds: ``METRIC[:CONFIG][@DATASET]`` selectors, checks, and the ``gate:`` section of a suite.

See docs/gate.md for the threshold syntax.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import SpecbenchError, SuiteError
from ..schemas.cell import Cell
from ..schemas.row_read import in_bounds
from ..util.numbers import is_number

Kind = Literal["min", "max", "max_drop"]
Outcome = Literal["pass", "within noise", "fail"]

KINDS: tuple[Kind, ...] = ("min", "max", "max_drop")
FLAGS: dict[Kind, str] = {"min": "--min", "max": "--max", "max_drop": "--max-drop"}
CLI_ORIGIN = "command line"

LOWER_IS_BETTER_SUFFIX = "_ms"
LOWER_IS_BETTER_NAMES = frozenset({"failed_requests"})
NON_METRIC_KEYS = frozenset(
    {"dataset", "run", "method", "status", "ci95", "std", "concurrency"}
)

_SELECTOR = re.compile(
    r"^(?P<metric>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?::(?P<config>[^:@=\s]+))?"
    r"(?:@(?P<dataset>[^:@=\s]+))?$"
)
_PERCENT = re.compile(r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*%\s*$")


class GateError(SpecbenchError):
    """The gate cannot judge: bad threshold, missing cell or metric, runs that are not comparable."""


@dataclass(frozen=True)
class Selector:
    """Which cells a threshold applies to; ``None`` config or dataset means every one."""

    metric: str
    config: str | None = None
    dataset: str | None = None

    @classmethod
    def parse(cls, text: str) -> Selector:
        """Parse ``METRIC[:CONFIG][@DATASET]``; raises ValueError with the reason."""
        match = _SELECTOR.match(text.strip())
        if not match:
            raise ValueError(f"{text!r} is not METRIC[:CONFIG][@DATASET]")
        metric = match["metric"]
        if metric in NON_METRIC_KEYS:
            raise ValueError(f"{metric!r} is a key column, not a numeric metric")
        return cls(metric, match["config"], match["dataset"])

    def __str__(self) -> str:
        text = self.metric
        if self.config:
            text += f":{self.config}"
        if self.dataset:
            text += f"@{self.dataset}"
        return text

    def matches(self, cell: Cell) -> bool:
        return (self.config is None or self.config == cell.config) and (
            self.dataset is None or self.dataset == cell.dataset
        )


@dataclass(frozen=True)
class Check:
    """One threshold. ``value`` is the floor/ceiling, or for ``max_drop`` the allowed fraction."""

    kind: Kind
    selector: Selector
    value: float
    origin: str = CLI_ORIGIN

    @property
    def metric(self) -> str:
        return self.selector.metric

    @property
    def lower_is_better(self) -> bool:
        return lower_is_better(self.metric)

    def label(self) -> str:
        value = f"{self.value * 100:g}%" if self.kind == "max_drop" else f"{self.value:g}"
        return f"{FLAGS[self.kind]} {self.selector}={value}"

    def describe(self) -> str:
        """The label plus where the threshold came from, for error messages."""
        return self.label() if self.origin == CLI_ORIGIN else f"{self.label()} (from {self.origin})"



def lower_is_better(metric: str) -> bool:
    """Latencies (``*_ms``) and ``failed_requests`` improve downwards; everything else upwards."""
    return metric.endswith(LOWER_IS_BETTER_SUFFIX) or metric in LOWER_IS_BETTER_NAMES


# ------------------------------------------------------------------------------ threshold parsing


def parse_percent(value: Any) -> float:
    """``"5%"`` -> 0.05. A bare number is refused: 5 vs 0.05 vs 500% is too easy to get wrong."""
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"expected a percentage like '5%', got {value!r}")
    return float(match["num"]) / 100


def parse_number(value: Any) -> float:
    if not is_number(value):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


#: the most a lower-is-better metric may be allowed to rise under ``max_drop`` (1000 %: eleven times the reference)
MAX_RISE = 10.0


def threshold_problem(kind: Kind, metric: str, number: float) -> str | None:
    """Why a threshold can never fail (or never pass), else None: a floor or ceiling outside what the metric
    can be (``schemas.row_read.bounds``), an allowed drop of 100 % or more of a higher-is-better metric
    (every value down to 0 passes), a rise beyond ``MAX_RISE``."""
    if kind == "max_drop":
        if not lower_is_better(metric) and number >= 1:
            return f"expected a drop below 100% ({metric} is higher-is-better: {number * 100:g}% lets every value pass)"
        if lower_is_better(metric) and number > MAX_RISE:
            return f"expected at most {MAX_RISE * 100:g}%, got {number * 100:g}%"
        return None
    outside = in_bounds(metric, number)
    if outside:
        return f"expected {outside}: {metric} is never outside it, so the check could never fail or never pass; got {number:g}"
    return None


def make_check(kind: Kind, key: str, value: Any, origin: str = CLI_ORIGIN) -> Check:
    """Build a check from a selector string and a raw value; raises ValueError with the reason."""
    selector = Selector.parse(key)
    number = parse_percent(value) if kind == "max_drop" else parse_number(value)
    why = threshold_problem(kind, selector.metric, number)
    if why:
        raise ValueError(why)
    return Check(kind, selector, number, origin)


def parse_cli_threshold(kind: Kind, text: str) -> Check:
    """Parse one ``--min/--max/--max-drop`` argument, ``METRIC[:CONFIG][@DATASET]=VALUE``."""
    key, sep, raw = text.partition("=")
    try:
        if not sep:
            raise ValueError("missing '=VALUE'")
        value: Any = raw.strip()
        if kind != "max_drop":
            try:
                value = float(value)
            except ValueError:
                raise ValueError(f"expected a number, got {raw!r}") from None
        return make_check(kind, key, value)
    except ValueError as err:
        raise GateError(f"{FLAGS[kind]} {text}: {err}") from None


@dataclass(frozen=True)
class GateSpec:
    """The thresholds of one gate, from a suite's ``gate:`` section or the command line."""

    checks: tuple[Check, ...] = ()

    @classmethod
    def from_mapping(cls, data: Any, where: str) -> GateSpec:
        """Validate a suite's ``gate:`` mapping; ``where`` locates it (``"suites/x.yaml: gate"``)
        and SuiteError messages read ``{where}.SECTION.SELECTOR: why``.

        Schema: ``{min: {SELECTOR: number}, max: {SELECTOR: number}, max_drop: {SELECTOR: "PCT%"}}``,
        every section optional; SELECTOR is ``METRIC[:CONFIG][@DATASET]``.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise SuiteError(f"{where}: expected a mapping with min/max/max_drop")
        checks: list[Check] = []
        for section, entries in data.items():
            if section not in KINDS:
                raise SuiteError(
                    f"{where}.{section}: unknown key (expected one of {', '.join(KINDS)})"
                )
            if entries is None:
                continue
            if not isinstance(entries, Mapping):
                raise SuiteError(f"{where}.{section}: expected a mapping SELECTOR: VALUE")
            for key, value in entries.items():
                try:
                    if not isinstance(key, str):
                        raise ValueError(f"selector must be a string, got {key!r}")
                    checks.append(make_check(section, key, value, f"{where}.{section}"))
                except ValueError as err:
                    raise SuiteError(f"{where}.{section}.{key}: {err}") from None
        return cls(tuple(checks))

    def merged(self, override: GateSpec) -> GateSpec:
        """Thresholds of ``override`` replace ours with the same kind and selector, others add."""
        replaced = {(c.kind, c.selector) for c in override.checks}
        kept = tuple(c for c in self.checks if (c.kind, c.selector) not in replaced)
        return GateSpec(kept + dedupe(override.checks))


def dedupe(checks: Iterable[Check]) -> tuple[Check, ...]:
    """Later thresholds with the same kind and selector win (a repeated flag overrides)."""
    latest: dict[tuple[Kind, Selector], Check] = {}
    for check in checks:
        latest.pop((check.kind, check.selector), None)
        latest[(check.kind, check.selector)] = check
    return tuple(latest.values())


def cli_spec(mins: Sequence[str], maxes: Sequence[str], drops: Sequence[str]) -> GateSpec:
    checks = [parse_cli_threshold("min", t) for t in mins]
    checks += [parse_cli_threshold("max", t) for t in maxes]
    checks += [parse_cli_threshold("max_drop", t) for t in drops]
    return GateSpec(dedupe(checks))
