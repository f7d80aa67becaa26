"""The run directory: append-only raw data, and derived files rewritten atomically after each cell.

- ``requests.jsonl``  every request record (warm-up included, marked), appended per phase
- ``phases.jsonl``    one line per measured phase: wall time, acceptance window, server
- ``results.json``    derived rows (reference keys first); ``results.md`` the table
- ``meta.json``       suite, comparability fingerprint, servers (engine, version, argv), timings

Raw files are the source of truth: results can be rebuilt from them, and ``--resume`` reads them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .measure import PhaseInfo
from .records import RequestRecord


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.logs = path / "logs"

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)

    def append_phase(self, info: PhaseInfo, records: list[RequestRecord]) -> None:
        """Requests first, then the phase line: a phase counts as done only once both are on disk."""
        with (self.path / "requests.jsonl").open("a") as f:
            for r in records:
                f.write(json.dumps(r.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with (self.path / "phases.jsonl").open("a") as f:
            f.write(json.dumps(info.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _jsonl(self, name: str) -> list[dict[str, Any]]:
        path = self.path / name
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by a crash: everything after it is incomplete
        return out

    def load_phases(self) -> list[PhaseInfo]:
        return [PhaseInfo.from_dict(d) for d in self._jsonl("phases.jsonl")]

    def load_requests(self) -> list[RequestRecord]:
        return [RequestRecord.from_dict(d) for d in self._jsonl("requests.jsonl")]

    def load_meta(self) -> dict[str, Any]:
        path = self.path / "meta.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json(self.path / "meta.json", meta)

    def write_results(self, rows: list[dict[str, Any]], markdown: str) -> None:
        write_json(self.path / "results.json", rows)
        write_atomic(self.path / "results.md", markdown + "\n")
