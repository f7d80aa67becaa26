"""Reading a run directory back in the tests, checking on the way that every file of it is whole."""

from __future__ import annotations

import json
from pathlib import Path


def check_run_dir(out: Path) -> tuple[list[dict], list[dict], list[dict], dict]:
    """Every file of the run is valid JSON (no torn line, no temp file left); returns its contents."""
    assert not list(out.glob(".*.tmp")), "a temporary file was left behind"
    rows = json.loads((out / "results.json").read_text())
    meta = json.loads((out / "meta.json").read_text())
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()] \
        if (out / "requests.jsonl").exists() else []
    phases = [json.loads(line) for line in (out / "phases.jsonl").read_text().splitlines()] \
        if (out / "phases.jsonl").exists() else []
    assert (out / "results.md").exists()
    return rows, records, phases, meta


def cell(rows: list[dict], run: str, concurrency: int | None = None) -> dict:
    found = [r for r in rows if r["run"] == run and (concurrency is None or r.get("concurrency") == concurrency)]
    assert len(found) == 1, (run, concurrency, [(r["run"], r.get("concurrency")) for r in rows])
    return found[0]


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def meta_pids(out: Path) -> dict[str, int]:
    """The launched servers' pids as meta.json holds them so far ({} while it is unreadable)."""
    try:
        meta = json.loads((out / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return {name: s["pid"] for name, s in meta.get("servers", {}).items() if s.get("pid")}
