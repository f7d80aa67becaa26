"""Standard JSON out: a non-finite float (NaN, ±Infinity) is written as ``null``, never as a bare
``NaN``/``Infinity`` token that strict parsers (jq, JavaScript, Go, pandas' ``orient`` readers) reject.
A number that is not finite was not measured, and missing is ``null`` everywhere in specbench.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """A copy of ``obj`` with every non-finite float (at any depth) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never emits NaN/Infinity; the copy is made only when one is present."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, **kwargs)
