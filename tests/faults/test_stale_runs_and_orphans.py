"""Stale or mixed results, orphaned servers, and the cells of an open-loop sweep.

- a run into a dir that holds a run is refused unless ``--resume`` or ``--overwrite`` says what to do;
- ``--resume`` on a missing or empty dir is refused;
- ``--resume`` keeps every intact line of a damaged requests.jsonl / phases.jsonl and quarantines the bad ones;
- launched servers die with specbench (parent-death signal), and leftovers recorded in the run dir
  (pid + start time) are stopped by ``--resume`` / ``--overwrite`` — never a reused pid;
- ``load: {request_rate: [a, b]}`` gives one correct cell per rate.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.report.notes import sentence
from specbench.schemas.launched import ProcessIdentity
from specbench.schemas.meta import RunMeta
from specbench.suite import read_suite
from tests.support.paths import SCRIPTED
from tests.support.processes import alive, marked_processes, spawn_cli, wait_for
from tests.support.rundirs import check_run_dir
from tests.support.runs import run_suite
from tests.support.suites import write_fault_suite


def cli(*args: str) -> int:
    return main(["run", *args, "--quiet"])


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---- 1. a dir that holds a run ----------------------------------------------------------------------


async def test_run_into_a_dir_holding_a_run_is_refused(tmp_path, prompts_file, scripted, capsys):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 0
    before, sent = files(out), server.requests
    capsys.readouterr()

    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"specbench: {out} holds a run: use --resume {out}, or another -o, or --overwrite"]
    assert server.requests == sent, "nothing is measured"
    assert files(out) == before, "the run dir is untouched"


async def test_rerun_into_an_interrupted_dir_is_refused_not_double_counted(tmp_path, prompts_file, scripted):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                        concurrency=[1, 2])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    phases = (out / "phases.jsonl").read_text().splitlines()
    cut = json.loads(phases[1])
    cut["interrupted"] = True  # as if Ctrl-C had cut c=2
    (out / "phases.jsonl").write_text(phases[0] + "\n" + json.dumps(cut) + "\n")
    sent = server.requests
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 2
    assert server.requests == sent
    # --resume measures only the cut cell, once
    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
    rows, records, _, _ = check_run_dir(out)
    assert [(r["concurrency"], r["requests"]) for r in rows] == [(1, 6), (2, 6)]
    assert len([r for r in records if r["phase"] == "measure"]) == 12


async def test_overwrite_clears_the_old_run_and_measures_afresh(tmp_path, prompts_file, scripted):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    (out / "requests.quarantine.jsonl").write_text('{"line": 3}\n')
    (out / "logs" / "old.log").write_text("old server\n")
    (out / "keep.txt").write_text("not ours")
    sent = server.requests

    assert await asyncio.to_thread(cli, str(suite), "-o", str(out), "--overwrite") == 0
    assert server.requests - sent == 6
    rows, records, phases, meta = check_run_dir(out)
    assert len(records) == 6 and len(phases) == 1 and rows[0]["requests"] == 6
    assert len(meta["runs"]) == 1 and meta["runs"][0].get("overwrite") is True
    assert not (out / "requests.quarantine.jsonl").exists() and not (out / "logs" / "old.log").exists()
    assert (out / "keep.txt").read_text() == "not ours", "only the run's own files are removed"


def test_overwrite_and_resume_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "s.yaml", "--resume", str(tmp_path), "--overwrite"])
    assert info.value.code == 2


@pytest.mark.parametrize("how", ["missing", "empty", "unrelated"])
async def test_resume_needs_a_run_to_resume(tmp_path, prompts_file, scripted, capsys, how):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    out = tmp_path / "run"
    if how != "missing":
        out.mkdir()
    if how == "unrelated":
        (out / "notes.txt").write_text("x")
    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "nothing to resume" in err[0], err
    assert server.requests == 0
    assert out.exists() == (how != "missing") and not (out / "meta.json").exists()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
async def test_resume_with_a_damaged_meta_json_is_one_line(tmp_path, prompts_file, scripted, capsys, text):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    (out / "meta.json").write_text(text)
    sent = server.requests
    capsys.readouterr()
    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out / 'meta.json'}:" in err[0], err
    assert server.requests == sent


async def test_output_that_is_a_file_is_one_line(tmp_path, prompts_file, capsys):
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": "http://127.0.0.1:9"}])
    (tmp_path / "file").write_text("x")
    assert await asyncio.to_thread(cli, str(suite), "-o", str(tmp_path / "file")) == 2
    assert "is not a directory" in capsys.readouterr().err


async def test_parallel_run_into_a_dir_holding_a_run(tmp_path, prompts_file, scripted, monkeypatch):
    from specbench.errors import RunDirError
    from tests.support.runs import run_parallel

    monkeypatch.setenv("SPECBENCH_GPUS", "0")
    server, url = await scripted()
    suite = read_suite(write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}]))
    out = tmp_path / "run"
    await run_suite(suite, out)
    sent = server.requests
    with pytest.raises(RunDirError, match="holds a run"):
        await run_parallel(suite, out, mode="gpus")
    with pytest.raises(RunDirError, match="nothing to resume"):
        await run_parallel(suite, tmp_path / "nothing", mode="gpus", resume=True)
    assert server.requests == sent
    outcome = await run_parallel(suite, out, mode="gpus", overwrite=True)
    assert outcome.exit_code == 0, outcome.failed_configs
    assert server.requests - sent == 6
    rows, records, phases, meta = check_run_dir(out)
    assert len(records) == 6 and len(phases) == 1 and len(meta["runs"]) == 1


# ---- 3. a damaged line in the middle of the raw files ------------------------------------------------


async def test_resume_quarantines_a_corrupt_middle_line_and_keeps_the_rest(tmp_path, prompts_file, scripted, capsys):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                        concurrency=[1, 2, 3])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    requests = (out / "requests.jsonl").read_text().splitlines()
    assert len(requests) == 18
    requests[8] = requests[8][:30] + "#garbage"  # a c=2 record (lines 7-12), line 9
    (out / "requests.jsonl").write_text("\n".join(requests) + "\n")
    phases = (out / "phases.jsonl").read_text().splitlines()
    phases.insert(1, "not json at all")  # a bad line between c=1 and c=2, all three phases intact
    (out / "phases.jsonl").write_text("\n".join(phases) + "\n")
    sent = server.requests
    capsys.readouterr()

    assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
    assert server.requests - sent == 6, "only the cell that lost a record is measured again"
    rows, records, phases_after, meta = check_run_dir(out)
    assert [(r["concurrency"], r["requests"], r["status"]) for r in rows] == [(1, 6, "ok"), (2, 6, "ok"), (3, 6, "ok")]
    assert len(phases_after) == 3
    # every intact record is kept: c=1 and c=3 as measured, c=2's five survivors superseded
    assert [r["concurrency"] for r in records if r["phase"] == "measure"].count(3) == 6
    assert len([r for r in records if r["phase"] == "superseded"]) == 5
    assert len(records) == 17 + 6
    quarantined = jsonl(out / "requests.quarantine.jsonl")
    assert [(q["line"], q["text"]) for q in quarantined] == [(9, requests[8])]
    assert "JSON" in quarantined[0]["reason"]
    assert [(q["line"], q["text"]) for q in jsonl(out / "phases.quarantine.jsonl")] == [(2, "not json at all")]
    notes = " ".join(sentence(n) for n in RunMeta.from_dict(meta).notes)
    assert "requests.quarantine.jsonl" in notes and "phases.quarantine.jsonl" in notes
    err = capsys.readouterr().err
    assert "requests.quarantine.jsonl" in err and "line 9" in err
    assert "requests.quarantine.jsonl" in (out / "results.md").read_text()


async def test_a_record_of_the_wrong_shape_is_quarantined(tmp_path, prompts_file, scripted):
    _, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}], concurrency=[1, 2])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    lines = (out / "requests.jsonl").read_text().splitlines()
    bad = json.loads(lines[2])
    bad["concurrency"] = "two"
    lines[2] = json.dumps(bad)
    lines.insert(4, "[1, 2]")
    (out / "requests.jsonl").write_text("\n".join(lines) + "\n")
    outcome = await run_suite(read_suite(suite), out, resume=True)
    assert outcome.exit_code == 0
    q = jsonl(out / "requests.quarantine.jsonl")
    assert [x["line"] for x in q] == [3, 5]
    assert "concurrency" in q[0]["reason"] and "object" in q[1]["reason"]


# ---- 4. launched servers never outlive specbench -----------------------------------------------------


def _launched(out: Path) -> dict:
    try:
        return json.loads((out / "launched.json").read_text())
    except (OSError, ValueError):
        return {}


def test_sigkill_of_specbench_takes_its_server_down(tmp_path, prompts_file, fake_engines):
    configs = [{"name": "baseline", "args": ["--gap", "0.2"]}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, engine="fake", requests=4,
                        concurrency=[1], max_tokens=30)  # ~6 s per request
    out = tmp_path / "run"
    proc = spawn_cli(["run", str(suite), "--output", str(out), "--quiet"], tmp_path)
    try:
        wait_for(lambda: marked_processes(fake_engines) and "baseline" in _launched(out) or proc.poll() is not None,
                  120, "the server")
        assert proc.poll() is None, (tmp_path / "cli.err").read_text()
        record = _launched(out)["baseline"]
        assert record["pid"] in marked_processes(fake_engines)
        assert record["start_ticks"] > 0
        time.sleep(0.5)
        proc.kill()
        proc.wait()
        wait_for(lambda: not marked_processes(fake_engines), 60, "the orphaned server to exit")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _leftover(port: int, marker: str) -> subprocess.Popen:
    """A server as an earlier, SIGKILLed specbench would have left it: its own session, no parent-death signal."""
    proc = subprocess.Popen([sys.executable, str(SCRIPTED), "--port", str(port), "--model", "smol"],
                            env={**os.environ, "SPECBENCH_FAULTS_MARKER": marker}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc


def _identity(pid: int) -> dict:
    from specbench.launch.owned import process_identity

    return process_identity(pid).to_dict()


async def test_resume_stops_a_recorded_leftover_server(tmp_path, prompts_file, fake_engines, capsys):
    from specbench.launch.process import free_port

    port = free_port()
    configs = [{"name": "baseline", "port": port}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, engine="fake", concurrency=[1, 2],
                        extra={"server": {"startup_timeout_s": 30}})
    out = tmp_path / "run"
    assert (await run_suite(read_suite(suite), out)).exit_code == 0
    assert _launched(out) == {}, "a server stopped by specbench is no longer recorded"
    (out / "phases.jsonl").write_text((out / "phases.jsonl").read_text().splitlines(keepends=True)[0])
    leftover = _leftover(port, fake_engines)
    try:
        from specbench.launch.process import port_in_use

        await asyncio.to_thread(wait_for, lambda: port_in_use("127.0.0.1", port), 20, "the leftover to listen")
        (out / "launched.json").write_text(json.dumps({"baseline": _identity(leftover.pid)}))
        capsys.readouterr()
        assert await asyncio.to_thread(cli, str(suite), "--resume", str(out)) == 0
        assert leftover.wait(timeout=10) is not None
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
    err = capsys.readouterr().err
    assert f"stopped a leftover server of config 'baseline' (pid {leftover.pid})" in err
    rows, *_ , meta = check_run_dir(out)
    assert [(r["concurrency"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok")]
    assert [s["pid"] for s in meta["runs"][-1]["stopped_leftovers"]] == [leftover.pid]
    assert _launched(out) == {}
    assert marked_processes(fake_engines) == []


async def test_overwrite_stops_a_leftover_and_never_kills_a_reused_pid(tmp_path, prompts_file, scripted, capsys):
    _, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    marker = f"TRUST_{uuid.uuid4().hex}"
    from specbench.launch.process import free_port

    ours, stranger = _leftover(free_port(), marker), _leftover(free_port(), marker)
    try:
        reused = {**_identity(stranger.pid), "start_ticks": _identity(stranger.pid)["start_ticks"] - 1}
        (out / "launched.json").write_text(json.dumps({"a": _identity(ours.pid), "b": reused,
                                                       "c": {**_identity(os.getpid()), "pid": 2 ** 22 + 7}}))
        capsys.readouterr()
        assert await asyncio.to_thread(cli, str(suite), "-o", str(out), "--overwrite") == 0
        assert ours.wait(timeout=10) is not None
        assert stranger.poll() is None and alive(stranger.pid), "a pid whose start time differs is not ours"
        err = " ".join(capsys.readouterr().err.split())  # the terminal wraps a notice
        assert f"(pid {ours.pid})" in err
        assert f"not signalled: pid {stranger.pid}, recorded for config 'b' in launched.json: another process holds " \
               f"it now (started at tick {reused['start_ticks'] + 1} after boot, the server at tick {reused['start_ticks']})" in err
        assert "stopped a leftover server of config 'b'" not in err
    finally:
        for p in (ours, stranger):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_process_identity_and_stop_leftover_unit(tmp_path):
    from specbench.launch.owned import process_identity, stop_leftover

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        ident = process_identity(sleeper.pid)
        assert ident.pid == sleeper.pid and ident.start_ticks and ident.start_ticks > 0 and ident.boot_id
        assert process_identity(sleeper.pid) == ident
        assert stop_leftover(replace(ident, start_ticks=ident.start_ticks + 1)) is False
        assert stop_leftover(replace(ident, boot_id="another-boot")) is False
        assert stop_leftover(replace(ident, host="another-host")) is False
        assert stop_leftover(ProcessIdentity.from_dict({"pid": sleeper.pid, "start_ticks": "soon"}, "x", [])) is False
        assert sleeper.poll() is None
        assert stop_leftover(ident) is True
        assert sleeper.wait(timeout=10) is not None
        assert stop_leftover(ident) is False  # gone: nothing to stop
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def _group_with_a_worker(leader_exits: bool = False) -> tuple[subprocess.Popen, int]:
    """A harmless session leader with a worker in its group (both sleep; the leader exits at once when
    ``leader_exits``): the leader's Popen and the worker's pid, read from the leader's first line."""
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"print(c.pid, flush=True); time.sleep({0 if leader_exits else 60})")
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True)
    return leader, int(leader.stdout.readline())


def _reap(*procs: subprocess.Popen, pids: tuple[int, ...] = ()) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stdout:
            p.stdout.close()
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_a_recorded_pid_another_process_holds_now_is_left_alone_with_its_group():
    """The recorded server started a tick before the process that holds its pid now: neither that process nor
    the worker it started (a member of its group, started after the record's time) is signalled."""
    from specbench.launch.owned import not_the_recorded, owned_members, process_identity, stop_leftover

    stranger, worker = _group_with_a_worker()
    try:
        now = process_identity(stranger.pid)
        assert now.start_ticks is not None
        recorded = replace(now, start_ticks=now.start_ticks - 1)
        assert owned_members(recorded) == []
        assert stop_leftover(recorded, grace_s=1) is False
        assert stranger.poll() is None and alive(worker), "another process's group was signalled"
        assert not_the_recorded(recorded) == (f"another process holds it now (started at tick {now.start_ticks} after "
                                              f"boot, the server at tick {recorded.start_ticks})")
        assert not_the_recorded(now) is None and sorted(owned_members(now)) == sorted([stranger.pid, worker])
    finally:
        _reap(stranger, pids=(worker,))


def test_a_leftover_whose_leader_is_gone_is_stopped_through_its_workers():
    """The recorded leader exited (and was reaped): the workers of its group, started after it, are still its own."""
    from specbench.launch.owned import not_the_recorded, process_identity, stop_leftover

    leader, worker = _group_with_a_worker(leader_exits=True)
    try:
        recorded = process_identity(leader.pid)
        leader.wait()
        assert alive(worker) and not_the_recorded(recorded) is None
        assert stop_leftover(recorded) is True
        wait_for(lambda: not alive(worker), 60, "the worker to die")
    finally:
        _reap(leader, pids=(worker,))


@pytest.mark.parametrize("how", ["stop", "kill_all"])
def test_a_reaped_server_whose_pid_is_another_processs_is_not_signalled(tmp_path, how):
    """A server stopped (or killed with a second Ctrl-C) after its leader exited and was reaped: the pid is
    then free, and here another session leader holds it. Neither it nor its group is signalled."""
    from specbench.launch import ServerProcess, kill_all

    server = ServerProcess("gone", [sys.executable, "-c", "pass"], {}, tmp_path / "gone.log", "http://127.0.0.1:9",
                           "/health", "/v1/models", "m", 5)
    server.start()
    server.proc.wait()  # exited and reaped: its pid may be given to any process now
    stranger, worker = _group_with_a_worker()
    try:  # as if the kernel had given the server's pid to the stranger, started after the server
        server.proc.pid = stranger.pid
        server._identity = replace(server.identity(), pid=stranger.pid, start_ticks=process_identity_ticks(stranger.pid) - 1)
        if how == "stop":
            server.stop(grace_s=1)
        else:
            kill_all()
            server.stop(grace_s=1)
        assert stranger.poll() is None and alive(worker), "another process's group was signalled"
    finally:
        _reap(stranger, pids=(worker,))


def process_identity_ticks(pid: int) -> int:
    from specbench.launch.owned import process_identity

    ticks = process_identity(pid).start_ticks
    assert ticks is not None
    return ticks


def test_the_parallel_watchdog_leaves_a_recorded_pid_another_process_holds_alone():
    """The watchdog of a --parallel worker records each server it sees (pid, start time) and, once the worker is
    dead, stops what is still that server, never a process that took the pid since (nor its group)."""
    from specbench.run.parallel.node import WATCHDOG_STOP

    watchdog: dict = {}
    exec(WATCHDOG_STOP, watchdog)  # the watchdog's own code, as `python -c` runs it
    stranger, worker = _group_with_a_worker()
    ours, our_worker = _group_with_a_worker()
    try:
        watchdog["stop_seen"]({stranger.pid: process_identity_ticks(stranger.pid) - 1,
                               ours.pid: process_identity_ticks(ours.pid)}, grace_s=30)
        assert stranger.poll() is None and alive(worker), "another process's group was signalled"
        assert ours.wait(timeout=60) is not None
        wait_for(lambda: not alive(our_worker), 60, "our server's worker to die")
    finally:
        _reap(stranger, ours, pids=(worker, our_worker))


# ---- 5. an open-loop sweep: one cell per request rate --------------------------------------------------


async def test_request_rate_sweep_gives_one_cell_per_rate(tmp_path, prompts_file, scripted, capsys):
    _, base_url = await scripted(pattern=[1], gap_s=0.002)
    _, spec_url = await scripted(pattern=[3], k=2, gap_s=0.002)
    configs = [{"name": "baseline", "url": base_url},
               {"name": "spec", "url": spec_url, "method": "ngram", "num_speculative_tokens": 2}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, request_rate=[4, 16], concurrency=8,
                        max_tokens=10)
    out = tmp_path / "run"
    code = await asyncio.to_thread(cli, str(suite), "-o", str(out))
    printed = capsys.readouterr().out
    rows, records, phases, _ = check_run_dir(out)
    assert code == 0, [(r["run"], r["request_rate"], r["status"], r["requests"], r["errors"]) for r in rows]
    assert sorted((r["run"], r["request_rate"]) for r in rows) == [
        ("baseline", 4), ("baseline", 16), ("spec", 4), ("spec", 16)]
    for row in rows:
        assert row["status"] == "ok" and row["requests"] == 6 and row["failed_requests"] == 0, row
        assert row["concurrency"] is None and row["max_concurrency"] == 8
        # the cell holds exactly its own phase's requests: 6 × 10 tokens, all at its rate
        assert row["output_tokens"] == 60
    spec4, spec16 = (next(r for r in rows if r["run"] == "spec" and r["request_rate"] == rate) for rate in (4, 16))
    for row in (spec4, spec16):
        assert row["acceptance_sources_agree"] is True, row
        assert row["spec_drafts"] == row["stream_steps"] == 6 * 3
        assert row["speedup_vs_baseline"] is not None and row["paired_prompts"] == 6
    assert {(r["config"], r["request_rate"]) for r in records} == {
        ("baseline", 4), ("baseline", 16), ("spec", 4), ("spec", 16)}
    assert "cell failed" not in printed
    assert "| Dataset | Run | Rate/s |" in printed and "| prompts | spec | 16 |" in printed
    from specbench.report.html import write_html

    page = write_html([out], tmp_path / "report.html").read_text()
    assert "<h4>prompts · 4 req/s</h4>" in page and "<h4>prompts · 16 req/s</h4>" in page, "one latency CDF per rate"
    assert page.count("(n=6 requests)") == 4


async def test_rate_sweep_resume_measures_only_the_missing_rate(tmp_path, prompts_file, scripted):
    server, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                        request_rate=[20, 40], concurrency=4)
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    phases = (out / "phases.jsonl").read_text().splitlines()
    cut = json.loads(phases[1])
    cut["interrupted"] = True
    (out / "phases.jsonl").write_text(phases[0] + "\n" + json.dumps(cut) + "\n")
    sent = server.requests
    outcome = await run_suite(read_suite(suite), out, resume=True)
    assert outcome.exit_code == 0 and server.requests - sent == 6
    rows, records, _, _ = check_run_dir(out)
    assert [(r["request_rate"], r["requests"], r["status"]) for r in rows] == [(20, 6, "ok"), (40, 6, "ok")]
    superseded = [r for r in records if r["phase"] == "superseded"]
    assert len(superseded) == 6 and {r["request_rate"] for r in superseded} == {40}


def test_gate_keeps_rate_cells_apart():
    from specbench.gate import index_cells
    from specbench.schemas.row_read import read_row

    rows = [{"run": "spec", "dataset": "d", "concurrency": None, "request_rate": rate, "max_concurrency": 8}
            for rate in (4.0, 16.0)]
    cells = index_cells([read_row(r) for r in rows], "results.json")
    assert len(cells) == 2
    assert sorted(str(k) for k in cells) == ["spec / d / 16 req/s", "spec / d / 4 req/s"]


def test_cell_keys_agree_across_phase_record_and_row():
    from specbench.schemas.cell import Cell, LoadPoint
    from specbench.schemas.phase import PhaseInfo
    from specbench.schemas.request import RequestRecord
    from specbench.schemas.row_read import read_row

    phase = PhaseInfo(config="spec", dataset="d", concurrency=8, request_rate=4.0, repeat=0, wall_s=1.0)
    record = RequestRecord(prompt_id="p", dataset="d", config="spec", concurrency=8, request_rate=4.0)
    row = read_row({"run": "spec", "dataset": "d", "concurrency": None, "request_rate": 4.0, "max_concurrency": 8})
    cell = Cell("spec", "d", 8, 4.0)
    assert Cell.of_phase(phase) == Cell.of_record(record) == Cell.of_row(row) == cell
    assert Cell.of_row(read_row({"run": "spec", "dataset": "d", "concurrency": 8, "request_rate": None})) != cell
    assert cell.point == LoadPoint(8, 4.0) and cell.point.label == "4 req/s"
    assert cell.with_config("baseline") == Cell("baseline", "d", 8, 4.0)
