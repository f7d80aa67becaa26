"""The one rule for "a number" in specbench: a finite int or float, never a bool (JSON ``true`` is
not 1) and never NaN/±Infinity (a value that is not finite was not measured). Missing is ``None``.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard


def is_number(value: Any) -> TypeGuard[int | float]:
    """A finite int or float; bool is not a number here."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def finite(value: Any) -> Any:
    """A copy of ``value`` with every non-finite float (at any depth, tuples as lists) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
