"""Standard JSON out: a non-finite float (NaN, ±Infinity) is written as ``null``, never as a bare
``NaN``/``Infinity`` token that strict parsers (jq, JavaScript, Go, pandas' ``orient`` readers) reject.
A number that is not finite was not measured, and missing is ``null`` everywhere in specbench.
JSON in: a file that cannot be read as JSON is one ``ResultsError`` line naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from .diskio import write_atomic
from .numbers import finite


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never emits NaN/Infinity; the copy is made only when one is present."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, **kwargs)


def write_json(path: Path, data: Any) -> None:
    """The layout of every JSON file a run writes (meta.json, results.json, schedule.json): indent 2,
    a trailing newline, written atomically."""
    write_atomic(path, dumps(data, indent=2, default=str) + "\n")


def read_json(path: Path) -> Any:
    """A JSON file's content; anything that keeps it from being JSON is one line naming the file."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: not found") from None
    except IsADirectoryError:
        raise ResultsError(f"{path}: is a directory, not a JSON file") from None
    except OSError as err:
        raise ResultsError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ResultsError(f"{path}: not UTF-8 text (byte at offset {err.start}): not a results file") from None
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None
    except RecursionError:
        raise ResultsError(f"{path}: nested too deeply to be a results file") from None
