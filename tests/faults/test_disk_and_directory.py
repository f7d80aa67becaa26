"""Disk and directory faults as one line, one run per directory (a refused warm-up:
test_refused_warmup.py; Ctrl-C at any moment: test_signals.py).

- a disk that fills mid-run (a small tmpfs), a read-only output, an output under a file: one line
  naming the path, never a traceback; what was written stays whole and ``--resume`` finishes it;
- two runs into one directory: the second is refused (exit 2, one line); temporary names are per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from specbench.cli import main
from specbench.errors import RunDirWriteError
from specbench.run import RunSession
from specbench.run.rundir import write_json
from specbench.util.diskio import append_text, write_atomic
from tests.support.paths import ROOT
from tests.support.rundirs import cell, check_run_dir
from tests.support.scripted_server import Script, ScriptedServer
from tests.support.suites import write_fault_suite


def cli(*args: str) -> int:
    return main(["run", *args, "--quiet"])


# ---- disk and directory faults -----------------------------------------------------------------

@contextlib.contextmanager
def tmpfs(where: Path, size: str, *options: str):
    """A small tmpfs at ``where`` (root only; skips elsewhere)."""
    where.mkdir()
    opts = ",".join((f"size={size}", *options))
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"cannot mount a tmpfs here ({err}); diskio's own ENOSPC tests still run")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Fill the file system of ``disk`` to the last byte."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
    return filler


async def test_disk_full_mid_run_is_one_line_and_resume_finishes(tmp_path, prompts_file, scripted, capsys, monkeypatch):
    _, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                              concurrency=[1, 2, 3])
    with tmpfs(tmp_path / "disk", "2m") as disk:
        out = disk / "run"
        stored = RunSession.store_phase
        filler: list[Path] = []

        def store_then_fill(self, info, records):
            stored(self, info, records)
            if not filler:
                filler.append(fill(disk))  # the disk is full from the second cell on

        monkeypatch.setattr(RunSession, "store_phase", store_then_fill)
        assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 1
        printed = capsys.readouterr().err
        err = [line for line in printed.splitlines() if line.startswith("specbench:")]
        assert len(err) == 1 and "Traceback" not in printed, printed
        assert err[0].startswith(f"specbench: {out / 'requests.jsonl'}: cannot write: No space left on device"), err
        assert not list(out.glob(".*.tmp")), "no temporary file is left on the full disk"
        filler[0].unlink()
        rows, records, phases, meta = check_run_dir(out)  # whole, as written before the disk filled
        assert [(r["concurrency"], r["requests"]) for r in rows] == [(1, 6)]
        assert len(records) == 6 and len(phases) == 1
        monkeypatch.setattr(RunSession, "store_phase", stored)
        assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
        rows, *_ = check_run_dir(out)
        assert [(r["concurrency"], r["requests"], r["status"]) for r in rows] == [(1, 6, "ok"), (2, 6, "ok"), (3, 6, "ok")]


async def test_read_only_output_is_one_line_exit_2(tmp_path, prompts_file, scripted, capsys):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    with tmpfs(tmp_path / "ro", "64k", "ro") as ro:
        assert await asyncio.to_thread(cli, str(suite), "-o", str(ro / "run")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(ro / "run") in err[0] and "Read-only file system" in err[0], err
    assert server.requests == 0


async def test_output_under_a_file_is_one_line_exit_2(tmp_path, prompts_file, scripted, capsys):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    (tmp_path / "file").write_text("x")
    assert await asyncio.to_thread(cli, str(suite), "-o", str(tmp_path / "file" / "run")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "file" / "run") in err[0] and "Not a directory" in err[0], err
    assert server.requests == 0
    assert (tmp_path / "file").read_text() == "x"


def test_a_failed_append_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    """Without a tmpfs: ENOSPC injected into the one write call of the append, after part of it went out."""
    path = tmp_path / "requests.jsonl"
    path.write_text('{"a": 1}\n')
    real = os.write
    calls = []

    def short_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[:5]))  # a torn line on disk …
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(RunDirWriteError, match=f"^{path}: cannot write: No space left on device"):
        append_text(path, '{"b": 2}\n{"c": 3}\n')
    monkeypatch.undo()
    assert path.read_text() == '{"a": 1}\n', "… cut back off"


def test_a_failed_rewrite_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "meta.json"
    path.write_text("old\n")

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(RunDirWriteError, match=f"^{path}: cannot write"):
        write_atomic(path, "new\n")
    assert path.read_text() == "old\n" and list(tmp_path.iterdir()) == [path]


# ---- one run per directory ----------------------------------------------------------------------

class GatedServer(ScriptedServer):
    """Answers no completion until ``gate`` is set: a run against it is provably still running."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.gate = asyncio.Event()

    async def complete(self, request: web.Request) -> web.StreamResponse:
        await self.gate.wait()
        return await super().complete(request)


def spawn(args: list[str], tmp_path: Path, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specbench.cli", *args], cwd=ROOT, env=os.environ.copy(),
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / f"{name}.err").open("w"))


async def test_two_runs_into_one_dir_the_second_is_refused(tmp_path, prompts_file, scripted):
    server = GatedServer(Script())
    url = await scripted.serve(server)
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    out = tmp_path / "run"
    runs = [spawn(["run", str(suite), "-o", str(out), "--quiet"], tmp_path, name) for name in ("a", "b")]
    try:
        ended = await asyncio.to_thread(first_to_end, runs, 60)
        assert ended is not None, "neither run was refused: both are measuring into one directory"
        loser = "ab"[runs.index(ended)]
        err = (tmp_path / f"{loser}.err").read_text().strip().splitlines()
        assert ended.returncode == 2, err
        assert len(err) == 1 and err[0].startswith(f"specbench: {out} is in use by another specbench run"), err
        server.gate.set()
        winner = runs[1 - runs.index(ended)]
        assert await asyncio.to_thread(winner.wait, 60) == 0
    finally:
        server.gate.set()
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    rows, records, phases, _ = check_run_dir(out)
    assert cell(rows, "baseline")["requests"] == 6 and len(records) == 6 and len(phases) == 1
    assert server.requests == 6
    assert not (out / ".specbench.lock").exists(), "the lock goes with the run"


def first_to_end(procs: list[subprocess.Popen], timeout_s: float) -> subprocess.Popen | None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                return proc
        time.sleep(0.05)
    return None


def _hammer(path: str, tag: int, rounds: int, errors) -> None:
    try:
        for i in range(rounds):
            write_json(Path(path), {"writer": tag, "round": i, "pad": "x" * 20_000})
    except Exception as err:  # noqa: BLE001 - reported to the test
        errors.put(f"{type(err).__name__}: {err}")


def test_writers_in_two_processes_never_share_a_temporary_file(tmp_path):
    path = tmp_path / "meta.json"
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    writers = [ctx.Process(target=_hammer, args=(str(path), tag, 300, errors)) for tag in range(2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert json.loads(path.read_text())["round"] == 299
    assert not list(tmp_path.glob(".*.tmp"))
