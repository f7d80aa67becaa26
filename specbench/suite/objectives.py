"""The suite's objectives beside speed, parsed where the suite is read: latency bounds (``load.slo``),
the capacity search (``load.max_rate_at_slo``), which data sets to grade (``load.grade``) and the
price of a GPU hour (``cost``). What they measure lives in measure/ (slo, grade, telemetry)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import SuiteError
from ..util.numbers import is_number
from .checks import MAX_GPU_HOUR_USD, MAX_REQUEST_RATE, MAX_SLO_MS, MIN_REQUEST_RATE, shown

SLO_KEYS = ("ttft_ms", "tpot_ms", "latency_ms")


@dataclass(frozen=True)
class Slo:
    """Upper bounds in milliseconds; None = not bounded."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_ms: float | None = None

    def bounds(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in SLO_KEYS if getattr(self, k) is not None}


@dataclass(frozen=True)
class RateSearch:
    """``--max-rate-at-slo``: which percentile must meet the SLO, and how long to search."""

    percentile: float = 99.0
    max_steps: int = 8
    start_rate: float = 1.0
    tolerance: float = 0.05  # stop bisecting once lowest fail ÷ highest pass − 1 is this small

    @property
    def label(self) -> str:
        return f"p{self.percentile:g}"


def _positive(value: Any) -> bool:
    return is_number(value) and value > 0


def parse_slo(value: Any, where: str, problems: list[str]) -> Slo | None:
    """``load.slo``: a mapping with any of ttft_ms, tpot_ms, latency_ms (positive numbers)."""
    if not isinstance(value, dict) or not value:
        problems.append(f"{where}: expected a mapping with at least one of {', '.join(SLO_KEYS)}, got {value!r}")
        return None
    clean: dict[str, float] = {}
    for key, bound in value.items():
        if key not in SLO_KEYS:
            problems.append(f"{where}.{key}: unknown key (allowed: {', '.join(SLO_KEYS)})")
        elif not _positive(bound) or bound > MAX_SLO_MS:
            problems.append(f"{where}.{key}: expected a positive number of milliseconds (at most {shown(MAX_SLO_MS)}), got {bound!r}"
                            if _positive(bound) else f"{where}.{key}: expected a positive number of milliseconds, got {bound!r}")
        else:
            clean[key] = float(bound)
    return Slo(**clean) if len(clean) == len(value) else None


def parse_percentile(value: Any) -> float:
    """``p99``, ``P99``, ``99`` or 99.9 → the percentile (0 < p ≤ 100); ValueError otherwise."""
    text = str(value).strip()
    if isinstance(value, bool) or not text:
        raise ValueError(f"expected a percentile such as p99, got {value!r}")
    try:
        p = float(text[1:] if text[0] in "pP" else text)
    except ValueError:
        raise ValueError(f"expected a percentile such as p99, got {value!r}") from None
    if not 0 < p <= 100:
        raise ValueError(f"expected a percentile between 0 and 100, got {value!r}")
    return p


def parse_search(value: Any, where: str, problems: list[str]) -> RateSearch | None:
    """``load.max_rate_at_slo``: ``p99``, or {percentile, max_steps, start_rate, tolerance}."""
    raw = value if isinstance(value, dict) else {"percentile": value}
    allowed = ("percentile", "max_steps", "start_rate", "tolerance")
    out: dict[str, Any] = {}
    for key, v in raw.items():
        at = f"{where}.{key}" if isinstance(value, dict) else where
        if key not in allowed:
            problems.append(f"{at}: unknown key (allowed: {', '.join(allowed)})")
        elif key == "percentile":
            try:
                out[key] = parse_percentile(v)
            except ValueError as err:
                problems.append(f"{at}: {err}")
        elif key == "max_steps":
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 50:
                problems.append(f"{at}: expected an integer from 2 to 50, got {v!r}")
            else:
                out[key] = v
        elif not _positive(v) or (key == "tolerance" and v >= 1):
            problems.append(f"{at}: expected a positive number{' below 1' if key == 'tolerance' else ''}, got {v!r}")
        elif key == "start_rate" and not MIN_REQUEST_RATE <= v <= MAX_REQUEST_RATE:
            problems.append(f"{at}: expected from {shown(MIN_REQUEST_RATE)} to {shown(MAX_REQUEST_RATE)} requests per second, got {v!r}")
        else:
            out[key] = float(v)
    return RateSearch(**out) if len(out) == len(raw) else None


def with_rate_search(suite, percentile: str):
    """The suite with ``--max-rate-at-slo P`` applied (its other search settings kept)."""
    if suite.load.slo is None:
        raise SuiteError(f"{suite.path}: load.slo: required by --max-rate-at-slo (give ttft_ms, tpot_ms and/or latency_ms)")
    try:
        p = parse_percentile(percentile)
    except ValueError as err:
        raise SuiteError(f"--max-rate-at-slo: {err}") from None
    search = replace(suite.load.rate_search or RateSearch(), percentile=p)
    return replace(suite, load=replace(suite.load, rate_search=search))


GRADERS = ("gsm8k", "math500", "humaneval", "mbpp")


def parse_grade(value: Any, datasets: Sequence, where: str, problems: list[str]) -> tuple[str, ...]:
    """``load.grade``: true (every data set that has a grader), false, or a list of data set names."""
    gradable = [d.name for d in datasets if d.source in GRADERS]
    if value is False:
        return ()
    if value is True:
        if datasets and not gradable:
            problems.append(f"{where}: no data set of this suite has a grader (graded sets: {', '.join(GRADERS)})")
        return tuple(gradable)
    names = value if isinstance(value, list) else [value]
    by_name = {d.name: d for d in datasets}
    out = []
    for name in names:
        if not isinstance(name, str) or name not in by_name:
            problems.append(f"{where}: {name!r} is not a data set of this suite (have: {', '.join(by_name) or 'none'})")
        elif by_name[name].source not in GRADERS:
            problems.append(f"{where}: {name!r} (source {by_name[name].source}) has no grader (graded sets: {', '.join(GRADERS)})")
        else:
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Cost:
    gpu_hour_usd: float


def parse_cost(value: Any, where: str, problems: list[str]) -> Cost | None:
    if not isinstance(value, dict) or set(value) != {"gpu_hour_usd"}:
        problems.append(f"{where}: expected a mapping with gpu_hour_usd (the price of one GPU for one hour), got {value!r}")
        return None
    price = value["gpu_hour_usd"]
    if not _positive(price):
        problems.append(f"{where}.gpu_hour_usd: expected a positive number, got {price!r}")
        return None
    if price > MAX_GPU_HOUR_USD:
        problems.append(f"{where}.gpu_hour_usd: expected at most {shown(MAX_GPU_HOUR_USD)}, got {price!r}")
        return None
    return Cost(float(price))
