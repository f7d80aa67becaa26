"""Ctrl-C (or SIGTERM) at any moment — while a server starts, while
measuring, while a server stops, a second one while it stops, during the final write — ends with
exit 130, no traceback, no process left, and ``--resume`` then completes.

The real CLI runs in a subprocess against fake engines (tests/support/scripted_server.py) that take
seconds to start (``--start-delay``) and to stop after SIGTERM (``--stop-delay``, as a big engine
freeing its GPU does), and write ``--stop-flag`` the moment SIGTERM reaches them. Every process they
start carries a marker in its environment, so a test can find anything that survived.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from specbench.cli import main
from specbench.launch.process import group_members
from specbench.run import RunSession
from tests.support.paths import ROOT
from tests.support.processes import alive, marked_processes, spawn_cli, wait_for
from tests.support.rundirs import check_run_dir
from tests.support.suites import write_fault_suite


def suite_of(tmp_path: Path, prompts_file: Path, **delays: dict[str, float]) -> Path:
    """Two launched configs, ``baseline`` and ``second``, 3 requests of ~0.6 s each at c=1; ``delays``
    per config: start_delay / stop_delay (seconds). Each writes ``started-<config>`` once it handles SIGTERM
    (before its start delay) and ``stop-<config>`` when SIGTERM comes."""
    configs = []
    for name in ("baseline", "second"):
        args = ["--gap", "0.1", "--stop-flag", str(tmp_path / f"stop-{name}"), "--started-flag", str(tmp_path / f"started-{name}")]
        for key, value in delays.get(name, {}).items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        configs.append({"name": name, "args": args})
    return write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, engine="fake",
                             requests=3, concurrency=[1], max_tokens=6, extra={"server": {"startup_timeout_s": 60}})


def launched(out: Path) -> dict[str, int]:
    try:
        return {k: v["pid"] for k, v in json.loads((out / "launched.json").read_text()).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def ready(out: Path) -> set[str]:
    try:
        return set(json.loads((out / "meta.json").read_text()).get("servers", {}))
    except (OSError, ValueError):
        return set()


def interrupt(tmp_path: Path, suite: Path, out: Path, moments: list[tuple[Callable[[], bool], int]],
              extra: tuple[str, ...] | list[str] = ()) -> tuple[int, str, set[int]]:
    """Run the CLI; at each moment (a predicate) send its signal. Its exit code, its stderr, and the
    pid of every server it was seen to launch."""
    proc = spawn_cli(["run", str(suite), "--output", str(out), *extra], tmp_path)
    pids: set[int] = set()

    def seen(moment: Callable[[], bool]) -> bool:
        pids.update(launched(out).values())
        return moment() or proc.poll() is not None

    try:
        for moment, sig in moments:
            wait_for(lambda m=moment: seen(m), 90, "the moment to signal")
            assert proc.poll() is None, "the run ended before the moment: " + (tmp_path / "cli.err").read_text()
            proc.send_signal(sig)
        code = proc.wait(timeout=90)  # a guard against a hang, not a speed assertion
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    pids.update(launched(out).values())
    return code, (tmp_path / "cli.err").read_text(), pids


def assert_clean_exit(code: int, err: str, pids: set[int], marker: str, out: Path) -> None:
    assert code == 130, err
    assert "Traceback" not in err and "Event loop" not in err, err
    assert "interrupted: what was measured is saved" in err, "the run ended through its own path, not a KeyboardInterrupt"
    assert pids, "the run launched a server before the signal"
    for pid in pids:
        assert not alive(pid) and group_members(pid) == [], f"server {pid} outlived the run"
    assert marked_processes(marker) == []
    rows, _, _, meta = check_run_dir(out)
    assert meta.get("finished_at")


def assert_resume_completes(suite: Path, out: Path, extra: tuple[str, ...] | list[str] = ()) -> None:
    done = subprocess.run([sys.executable, "-m", "specbench.cli", "run", str(suite), "--resume", str(out), "--quiet", *extra],
                          cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows, *_ = check_run_dir(out)
    assert sorted((r["run"], r["requests"], r["status"]) for r in rows) == [("baseline", 3, "ok"), ("second", 3, "ok")]


def test_sigint_while_a_server_starts(tmp_path, prompts_file, fake_engines):
    suite = suite_of(tmp_path, prompts_file, baseline={"start_delay": 4, "stop_delay": 2})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "started-baseline").exists(), signal.SIGINT)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert (tmp_path / "stop-baseline").exists() and not (tmp_path / "stop-second").exists()
    assert_resume_completes(suite, out)


def test_sigterm_while_measuring(tmp_path, prompts_file, fake_engines):
    suite = suite_of(tmp_path, prompts_file, baseline={"stop_delay": 2})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: "baseline" in ready(out), signal.SIGTERM)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "second" not in ready(out), "no config starts after the signal"
    assert_resume_completes(suite, out)


def test_sigint_while_a_server_stops(tmp_path, prompts_file, fake_engines):
    suite = suite_of(tmp_path, prompts_file, baseline={"stop_delay": 6})  # the signal lands well inside the stop
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "stop-baseline").exists(), signal.SIGINT)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert not (tmp_path / "stop-second").exists() and "second" not in ready(out)
    assert_resume_completes(suite, out)


def test_second_sigint_while_a_server_stops_kills_it(tmp_path, prompts_file, fake_engines):
    # this server would take 10 minutes to stop by itself: only the second signal's SIGKILL ends it early
    suite = suite_of(tmp_path, prompts_file, baseline={"stop_delay": 600})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: "baseline" in ready(out), signal.SIGINT),
                                                       (lambda: (tmp_path / "stop-baseline").exists(), signal.SIGINT)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "stopping now: servers killed" in err
    assert_resume_completes(suite, out)


def test_sigint_while_the_next_server_starts_then_sigterm_while_it_stops(tmp_path, prompts_file, fake_engines):
    """What was seen on the H200: Ctrl-C while the next config's server started, SIGTERM while it was stopped."""
    suite = suite_of(tmp_path, prompts_file, second={"start_delay": 4, "stop_delay": 600})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "started-second").exists(), signal.SIGINT),
                                                       (lambda: (tmp_path / "stop-second").exists(), signal.SIGTERM)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "stopping now: servers killed" in err, "the SIGTERM escalated"
    assert_resume_completes(suite, out)


def test_sigint_and_sigterm_at_once_while_the_next_server_starts(tmp_path, prompts_file, fake_engines):
    suite = suite_of(tmp_path, prompts_file, second={"start_delay": 4, "stop_delay": 600})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "started-second").exists(), signal.SIGINT),
                                                       (lambda: True, signal.SIGTERM)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "stopping now: servers killed" in err
    assert_resume_completes(suite, out)


def test_signal_during_the_final_write(tmp_path, prompts_file, fake_engines, monkeypatch, capsys):
    """In this process (the main thread, where signals land): SIGINT arrives as the results are written
    for the last time; they are still written whole, and the run says it was interrupted."""
    finish = RunSession.finish

    def signalled_finish(self, timing):
        os.kill(os.getpid(), signal.SIGINT)
        return finish(self, timing)

    monkeypatch.setattr(RunSession, "finish", signalled_finish)
    suite = suite_of(tmp_path, prompts_file)
    out = tmp_path / "run"
    assert main(["run", str(suite), "-o", str(out), "--quiet"]) == 130
    assert "Traceback" not in capsys.readouterr().err
    rows, _, _, meta = check_run_dir(out)
    assert meta.get("finished_at") and len(rows) == 2
    assert marked_processes(fake_engines) == []


def test_parallel_gpus_second_sigint_while_servers_stop(tmp_path, prompts_file, fake_engines, launchers, monkeypatch):
    """--parallel gpus shares the path: the collector forwards each signal to its workers, which stop
    (first) or kill (second) their own servers; nothing is raised into the collector's loop."""
    fake = yaml.safe_load((launchers / "fake.yaml").read_text())
    (launchers / "fake-gpu.yaml").write_text(yaml.safe_dump({**fake, "name": "fake-gpu", "gpu_env": "CUDA_VISIBLE_DEVICES"}))
    monkeypatch.setenv("SPECBENCH_GPUS", "0,1")
    suite = suite_of(tmp_path, prompts_file, baseline={"stop_delay": 600}, second={"stop_delay": 600})
    suite.write_text(suite.read_text().replace("engine: fake", "engine: fake-gpu"))
    out = tmp_path / "run"
    both_stopping = lambda: (tmp_path / "stop-baseline").exists() and (tmp_path / "stop-second").exists()  # noqa: E731
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: ready(out) == {"baseline", "second"}, signal.SIGINT),
                                                       (both_stopping, signal.SIGINT)], extra=["--parallel", "gpus"])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "stopping now" in err
    assert_resume_completes(suite, out, extra=["--parallel", "gpus"])
