"""The one rule for "a number" in specbench: a finite int or float, never a bool (JSON ``true`` is
not 1) and never NaN/±Infinity (a value that is not finite was not measured). Missing is ``None``.
"""

from __future__ import annotations

import math
import sys
from typing import Any, TypeGuard

#: the largest finite float: an int beyond it (JSON allows 400 digits) is no number a float can hold
_MAX = sys.float_info.max


def is_number(value: Any) -> TypeGuard[int | float]:
    """A finite int or float; bool is not a number here, nor an int too large to be a float."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and -_MAX <= value <= _MAX


def finite(value: Any) -> Any:
    """A copy of ``value`` with every non-finite float (at any depth, tuples as lists) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
