"""Read results back: a run directory (results.json + meta.json) or a bare results.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ResultsError


@dataclass
class RunResults:
    records: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path}: not found") from None
    except json.JSONDecodeError as err:
        raise ResultsError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None


def load_run(path: str | Path) -> RunResults:
    path = Path(path)
    if path.is_dir():
        results = path / "results.json"
        if not results.exists():
            raise ResultsError(f"{path}: no results.json in this directory")
    else:
        results = path
    data = _read_json(results)
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ResultsError(f"{results}: expected a JSON list of result records")
    meta_path = results.parent / "meta.json"
    meta = _read_json(meta_path) if meta_path.exists() else {}
    return RunResults(records=data, meta=meta, path=results)


def load_results(paths: list[str | Path]) -> RunResults:
    """Concatenate the records of several runs (in the order given)."""
    runs = [load_run(p) for p in paths]
    if len(runs) == 1:
        return runs[0]
    merged = [r for run in runs for r in run.records]
    return RunResults(records=merged, meta={"merged_from": [str(r.path) for r in runs]})
