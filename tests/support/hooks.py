"""The step recorder's modules reloaded per test under its own environment (``hooks`` fixture in tests/conftest.py),
and what its tests read back: the rows, the header, the events a launch folder holds."""

from __future__ import annotations

import gc
import importlib
import json
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specbench.hooks import steplog_files, vllm_events, vllm_onetime, vllm_runner, vllm_scheduler, vllm_steplog, vllm_tokens


class _Running:
    """Stands in for a started flusher thread: ``start_flusher`` sees it alive and starts none."""

    def is_alive(self) -> bool:
        return True


#: in import order: each imports names from the ones before it
MODULES = (steplog_files, vllm_events, vllm_onetime, vllm_tokens, vllm_scheduler, vllm_runner, vllm_steplog)


def reloaded_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., SimpleNamespace]]:
    """Fresh hook modules for one test; ``hooks(level, control=None)`` sets the environment and reloads."""
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # the CPU engine's clock: perf_counter
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    registered: list[Any] = []
    monkeypatch.setattr("atexit.register", lambda fn, *a, **k: registered.append(fn))
    monkeypatch.setattr("os.register_at_fork", lambda **k: registered.append(k))
    monkeypatch.setattr("multiprocessing.util.Finalize", lambda *a, **k: registered.append(a))

    def load(level: str | None, control: Path | None = None) -> SimpleNamespace:
        if level is None:
            monkeypatch.delenv("SPECBENCH_STEPLOG", raising=False)
        else:
            monkeypatch.setenv("SPECBENCH_STEPLOG", level)
        monkeypatch.setenv("SPECBENCH_STEPLOG_DIR", str(tmp_path))
        if control is None:
            monkeypatch.delenv("SPECBENCH_STEPLOG_CONTROL", raising=False)
        else:
            monkeypatch.setenv("SPECBENCH_STEPLOG_CONTROL", str(control))
        for mod in MODULES:
            importlib.reload(mod)
        steplog_files.flusher_thread = _Running()  # type: ignore[assignment]
        return SimpleNamespace(files=steplog_files, sched=vllm_scheduler, runner=vllm_runner, events=vllm_events,
                               onetime=vllm_onetime,
                               plugin=vllm_steplog, dir=tmp_path, registered=registered)

    callbacks = list(gc.callbacks)
    yield load
    gc.callbacks[:] = callbacks  # the interpreter keeps this very list: restored in place
    monkeypatch.undo()
    for mod in MODULES:
        importlib.reload(mod)  # the next importer gets state read from its own environment


def fake_module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def rows(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(folder.glob(f"{kind}-*.jsonl")) for line in p.read_text().splitlines()]


def header(folder: Path) -> dict[str, Any]:
    (path,) = folder.glob("header-*.json")
    return json.loads(path.read_text())


def events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(folder.glob("events-*.jsonl")) for line in p.read_text().splitlines()]
