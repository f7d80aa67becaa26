"""Ctrl-C (or SIGTERM) at any moment — while a server starts, while
measuring, while a server stops, a second one while it stops, during the final write — ends with
exit 130, no traceback, no process left, and ``--resume`` then completes; a signal mid-run saves what was
measured (in-flight requests let finish, or cancelled after the grace period), a second one tears down at once.

The real CLI runs in a subprocess against fake engines (tests/support/scripted_server.py) that start,
stop after SIGTERM (as a big engine freeing its GPU does) or serve a request for as long as the test
says (``--start-until``, ``--stop-until``, ``--hold-on``: a file the test writes ends the wait), and
write a file at each moment (``--started-flag``, ``--stop-flag``, ``--held-flag``). Every signal is sent
at a moment such a file, or the run's own answer on stderr, proves; none after a guessed sleep. Every
process they start carries a marker in its environment, so a test can find anything that survived.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.launch.owned import group_members
from specbench.run import RunSession, SequentialRun
from specbench.suite import read_suite
from tests.support import runs
from tests.support.paths import ROOT
from tests.support.processes import alive, marked_processes, spawn_cli, wait_for
from tests.support.rundirs import cell, check_run_dir, meta_pids
from tests.support.suites import write_fault_suite

SEEN = "stopping: finishing requests in flight"  # the run's answer to a first signal, on stderr


def suite_of(tmp_path: Path, prompts_file: Path, **waits: dict[str, object]) -> Path:
    """Two launched configs, ``baseline`` and ``second``, 3 requests of ~0.6 s each at c=1; ``waits`` per
    config: the scripted server's flags (start_until / stop_until: a file; stop_delay: seconds; hold_on …).
    Each writes ``started-<config>`` once it handles SIGTERM (before any start wait) and ``stop-<config>``
    when SIGTERM comes."""
    configs = []
    for name in ("baseline", "second"):
        args = ["--gap", "0.1", "--stop-flag", str(tmp_path / f"stop-{name}"), "--started-flag", str(tmp_path / f"started-{name}")]
        for key, value in waits.get(name, {}).items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        configs.append({"name": name, "args": args})
    return write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, engine="fake",
                             requests=3, concurrency=[1], max_tokens=6, extra={"server": {"startup_timeout_s": 600}})  # a guard


def said(tmp_path: Path, text: str) -> Callable[[], bool]:
    """The moment the CLI has written ``text`` to its stderr."""
    return lambda: text in (tmp_path / "cli.err").read_text(errors="replace")


def touch(path: Path) -> Callable[[], None]:
    return lambda: path.touch()


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


def interrupt(tmp_path: Path, suite: Path, out: Path, moments: list[tuple[Callable[[], bool], int | Callable[[], None]]],
              extra: tuple[str, ...] | list[str] = ()) -> tuple[int, str, set[int]]:
    """Run the CLI; at each moment (a predicate) send its signal, or do its action (release a wait). Its exit
    code, its stderr, and the pid of every server it was seen to launch."""
    proc = spawn_cli(["run", str(suite), "--output", str(out), *extra], tmp_path)
    pids: set[int] = set()

    def seen(moment: Callable[[], bool]) -> bool:
        pids.update(launched(out).values())
        return moment() or proc.poll() is not None

    try:
        for moment, act in moments:
            wait_for(lambda m=moment: seen(m), 300, "the moment to signal")
            assert proc.poll() is None, "the run ended before the moment: " + (tmp_path / "cli.err").read_text()
            if isinstance(act, int):
                proc.send_signal(act)
            else:
                act()
        code = proc.wait(timeout=300)  # a guard against a hang, not a speed assertion
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
                          cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=600)  # a guard
    assert done.returncode == 0, done.stderr
    rows, *_ = check_run_dir(out)
    assert sorted((r["run"], r["requests"], r["status"]) for r in rows) == [("baseline", 3, "ok"), ("second", 3, "ok")]


def test_sigint_while_a_server_starts(tmp_path, prompts_file, fake_engines):
    go = tmp_path / "go"  # the server listens only once it exists: the signal surely lands while it starts
    suite = suite_of(tmp_path, prompts_file, baseline={"start_until": go, "stop_delay": 2})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "started-baseline").exists(), signal.SIGINT)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert (tmp_path / "stop-baseline").exists() and not (tmp_path / "stop-second").exists()
    go.touch()
    assert_resume_completes(suite, out)


def test_sigterm_while_measuring(tmp_path, prompts_file, fake_engines):
    held, go = tmp_path / "held", tmp_path / "go"  # request 2 stays in flight until the run has seen the signal
    suite = suite_of(tmp_path, prompts_file, baseline={"stop_delay": 2, "hold_on": 2, "held_flag": held, "release_flag": go})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(held.exists, signal.SIGTERM), (said(tmp_path, SEEN), touch(go))])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "second" not in ready(out), "no config starts after the signal"
    rows, *_ = check_run_dir(out)
    assert [(r["run"], r["requests"], r["status"]) for r in rows] == [("baseline", 2, "interrupted")]
    assert_resume_completes(suite, out)


def test_sigint_while_a_server_stops(tmp_path, prompts_file, fake_engines):
    go = tmp_path / "go"  # the server's stop lasts until it exists: the signal surely lands inside the stop
    suite = suite_of(tmp_path, prompts_file, baseline={"stop_until": go})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "stop-baseline").exists(), signal.SIGINT),
                                                       (said(tmp_path, SEEN), touch(go))])
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
    go = tmp_path / "go"
    suite = suite_of(tmp_path, prompts_file, second={"start_until": go, "stop_delay": 600})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "started-second").exists(), signal.SIGINT),
                                                       (lambda: (tmp_path / "stop-second").exists(), signal.SIGTERM)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "stopping now: servers killed" in err, "the SIGTERM escalated"
    go.touch()
    assert_resume_completes(suite, out)


def test_sigint_and_sigterm_at_once_while_the_next_server_starts(tmp_path, prompts_file, fake_engines):
    go = tmp_path / "go"
    suite = suite_of(tmp_path, prompts_file, second={"start_until": go, "stop_delay": 600})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: (tmp_path / "started-second").exists(), signal.SIGINT),
                                                       (lambda: True, signal.SIGTERM)])
    assert_clean_exit(code, err, pids, fake_engines, out)
    assert "stopping now: servers killed" in err
    go.touch()
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


# ---- a signal mid-run saves what was measured; a second one tears down at once ----------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_saves_measured_and_reaps_servers(tmp_path, prompts_file, fake_engines, sig):
    # c=2 (requests 1-4) then c=1 (5, 6, …), then a second config. Request 6 stays in flight until the run has
    # answered the signal: the signal lands mid second cell with request 5 measured and 6 in flight, whatever the load.
    held, go = tmp_path / "held", tmp_path / "go"
    configs = [{"name": "baseline", "args": ["--gap", "0.08", "--hold-on", "6", "--held-flag", str(held), "--release-flag", str(go)]},
               {"name": "second", "args": ["--gap", "0.08"]}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, engine="fake", requests=4,
                              concurrency=[2, 1], max_tokens=6)
    out = tmp_path / "run"
    # --grace 3600: the request in flight is let finish however long the test takes to release it
    code, err, _ = interrupt(tmp_path, suite, out, [(held.exists, sig), (said(tmp_path, SEEN), touch(go))],
                             extra=["--grace", "3600"])
    assert code == 130, err
    assert "interrupted" in err
    rows, records, phases, meta = check_run_dir(out)
    assert cell(rows, "baseline", 2)["status"] == "ok" and cell(rows, "baseline", 2)["requests"] == 4
    assert cell(rows, "baseline", 1)["status"] == "interrupted"
    assert cell(rows, "baseline", 1)["requests"] == 2, "the one measured before the signal and the one in flight"
    assert not [r for r in rows if r["run"] == "second"], "nothing is sent after the signal"
    assert all(r["error"] is None for r in records), "in-flight requests were let finish"
    assert meta.get("finished_at")
    for pid in meta_pids(out).values():
        assert not alive(pid) and group_members(pid) == []
    assert marked_processes(fake_engines) == []


def test_second_sigint_tears_down_at_once(tmp_path, prompts_file, fake_engines):
    # request 1 is never released and the grace is an hour: only the second signal can end the run within the guard
    held = tmp_path / "held"
    configs = [{"name": "baseline", "args": ["--hold-on", "1", "--held-flag", str(held)]}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, engine="fake", requests=4, concurrency=[1])
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(held.exists, signal.SIGINT), (said(tmp_path, SEEN), signal.SIGINT)],
                                extra=["--quiet", "--grace", "3600"])
    assert code == 130, err
    assert "stopping now: servers killed, requests in flight cut" in err
    check_run_dir(out)
    pid = meta_pids(out)["baseline"]
    assert pids == {pid} and not alive(pid) and group_members(pid) == []
    assert marked_processes(fake_engines) == []


async def test_stop_cancels_in_flight_after_grace(tmp_path, prompts_file, scripted):
    server, url = await scripted(fault="stall", fault_on=(2,))
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                        concurrency=[1], requests=6, timeout_s=600)
    out = tmp_path / "run"
    loaded = read_suite(suite)
    run = SequentialRun(loaded, runs.RunSession(loaded, out), grace_s=0.5)
    loop = asyncio.get_running_loop()

    def interrupt_when_stalled():
        if server.requests >= 2:
            run.interrupt()  # what SIGINT does
        else:
            loop.call_later(0.05, interrupt_when_stalled)

    loop.call_later(0.05, interrupt_when_stalled)
    # request 2 stalls for an hour (and its timeout is 600 s): the run ends within the guard only by cancelling it
    outcome = await asyncio.wait_for(run.execute(), 120)
    assert outcome.exit_code == 130
    rows, records, _, _ = check_run_dir(out)
    assert rows[0]["status"] == "interrupted" and rows[0]["requests"] == 1
    cancelled = [r for r in records if r["error"]]
    assert len(cancelled) == 1 and "cancel" in cancelled[0]["error"], "the cancelled request is on disk, with a reason"


def test_signal_during_startup(tmp_path, prompts_file, fake_engines):
    # a server that never becomes healthy (`sleep` as the engine) and an hour's startup timeout: only the signal can
    # end the run within the guard
    launchers = Path(os.environ["SPECBENCH_LAUNCHERS"])
    (launchers / "never-ready.yaml").write_text(yaml.safe_dump({
        "extends": "vllm", "name": "never-ready", "python": sys.executable,
        "command": ["{python}", "-c", "import time; time.sleep(7200)"], "args": [],
        "env": {"SPECBENCH_FAULTS_MARKER": fake_engines}}))
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline"}], engine="never-ready",
                              extra={"server": {"startup_timeout_s": 3600}})
    out = tmp_path / "run"
    code, err, pids = interrupt(tmp_path, suite, out, [(lambda: "baseline" in launched(out), signal.SIGINT)], extra=["--quiet"])
    assert code == 130, err
    check_run_dir(out)
    assert pids and marked_processes(fake_engines) == []
