"""A metric group: the results-row keys one measurement gives, declared once.

Each group is a dataclass whose fields are results.json keys, each with its meaning, unit and range
(``key("…", unit=, low=, high=)``). A measure (or grade) function returns its group; ``ResultRow`` is
composed of every group (``row.py``), so a group's field is the row's field — typed, never a second
declaration — and ``ResultRow.add`` sets the keys a group carries. A field declared
``key(omit_none=True)`` is written only when set: a group that leaves it None adds no key.

A group is a value: its fields are set by its constructor, once (``MetricGroup.__setattr__``).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, fields
from typing import Any

from .record_values import key

__all__ = ["MetricGroup", "Numbers", "mean_ms", "percentile_ms", "written"]

#: a list of numbers, null where one was not measured (per position, per repeat)
Numbers = list[float | None]


@dataclass
class MetricGroup:
    """The base of every metric group (see the module's docstring)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__:
            raise FrozenInstanceError(f"{type(self).__name__}.{name}: a metric group is set by its constructor only")
        object.__setattr__(self, name, value)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The group's keys, in declaration order (a base group's first)."""
        return tuple(f.name for f in fields(cls))


def written(group: MetricGroup) -> dict[str, Any]:
    """The keys ``ResultRow.add`` sets from ``group``, in declaration order: a field written only when set
    (``key(omit_none=True)``) is left out while None."""
    return {f.name: getattr(group, f.name) for f in fields(group)
            if not (f.metadata.get("omit_none") and getattr(group, f.name) is None)}


def mean_ms(what: str) -> Any:
    """The ``_mean_ms`` key of a spread of times (≥ 0 ms): ``what`` is one sample, its siblings the percentiles."""
    return key(f"{what}; their mean (the p50/p95/p99 keys beside it: percentiles, numpy's linear interpolation, as "
               "every percentile here)", unit="ms", low=0)


def percentile_ms(mean_key: str, p: int) -> Any:
    """The ``_pNN_ms`` key of a spread of times (≥ 0 ms)."""
    return key(f"{p}th percentile of the samples {mean_key} averages", unit="ms", low=0)
