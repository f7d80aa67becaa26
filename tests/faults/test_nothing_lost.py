"""Nothing lost: faults never cost what was already measured.

Request failures are counted per cell with reasons; a dead server fails its config (with the log
tail), is reaped with its whole process group, and the run goes on; ``--resume`` measures only
what is missing and refuses an incompatible suite; an API key never reaches the run directory.
(SIGINT/SIGTERM, which write what was measured and tear every server down: test_signals.py.)

Launched servers are the scripted server run as a fake engine: a launcher directory made at test
time (``SPECBENCH_LAUNCHERS``) holds a copy of ``vllm.yaml`` plus engines that extend it. Every
process they start carries a unique marker in its environment, so a test can find (and the
fixture reap) anything that survived.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from specbench.cli import main
from specbench.errors import SuiteError
from specbench.launch.owned import group_members
from specbench.suite import read_suite
from tests.support.launchers import write_fault_launchers
from tests.support.md_tables import tables_of
from tests.support.processes import alive, marked_processes, reap, state
from tests.support.rundirs import cell, check_run_dir, count_lines, meta_pids
from tests.support.runs import run_parallel, run_suite
from tests.support.scripted_server import Script, ScriptedServer, serve_app
from tests.support.suites import write_fault_suite, write_prompts

SECRET = "sk-secret-123"

# ---- helpers -----------------------------------------------------------------------------------


async def serve(port: int = 0, **script) -> tuple[ScriptedServer, web.AppRunner, str]:
    """A scripted server in this loop; a short shutdown timeout so stalled handlers don't hold cleanup."""
    server = ScriptedServer(Script(**script))
    runner, url = await serve_app(server.app, port=port, shutdown_timeout=0.2)
    return server, runner, url


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


@pytest.fixture(scope="module")
def fault_launchers(tmp_path_factory) -> tuple[Path, str]:
    """Launchers ``fake`` and ``fake-wrapped`` (tests/support/launchers.py), shared by this module's runs,
    and the environment marker of their processes."""
    marker = f"FAULTS_{uuid.uuid4().hex}"
    d = tmp_path_factory.mktemp("fake") / "launchers"
    d.mkdir()
    write_fault_launchers(d, marker)
    yield d, marker
    reap(marker)


def run_in_thread(launchers: tuple[Path, str], suite: Path, out: Path, **kwargs):
    """A whole run in its own thread and loop, for module-scoped fixtures shared by several tests."""
    box = {}

    def target():
        try:
            box["outcome"] = asyncio.run(run_suite(read_suite(suite), out, **kwargs))
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = err

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECBENCH_LAUNCHERS", str(launchers[0]))
        mp.delenv("SPECBENCH_ENGINE_PYTHON", raising=False)
        thread = threading.Thread(target=target)
        thread.start()
        thread.join(120)
    assert not thread.is_alive(), "the run did not finish in 120 s"
    if "error" in box:
        raise box["error"]
    return box["outcome"]


# ---- 1. request failures are counted per cell, never crash the run ------------------------------

FAULTS = {  # config → (scripted fault, expected reason prefix)
    "http500": ("http500", "HTTP 500"),
    "http429": ("http429", "HTTP 429 (retry-after 1)"),
    "malformed": ("malformed", "malformed SSE data"),
    "drop": ("drop", None),  # connection reset: the reason is the client error's class
    "stall": ("stall", "timeout after 1 s"),
}


async def test_request_faults_counted_per_cell(tmp_path, prompts_file, scripted, capsys):
    urls = {"baseline": (await scripted())[1]}
    for name, (fault, _) in FAULTS.items():
        urls[name] = (await scripted(fault=fault, fault_on=(2,)))[1]
    urls["mostly_500"] = (await scripted(fault="http500", fault_on=(1, 2, 3, 4)))[1]  # 4/6 > 0.5
    configs = [{"name": n, "url": u} for n, u in urls.items()]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, timeout_s=1)
    out = tmp_path / "run"

    code = await asyncio.to_thread(main, ["run", str(suite), "--output", str(out), "--quiet"])
    printed = capsys.readouterr().out

    assert code == 1, "a failed cell makes the run fail"
    rows, records, phases, _ = check_run_dir(out)
    assert [r["run"] for r in rows] == list(urls) and len(phases) == len(urls)
    base = cell(rows, "baseline")
    assert base["status"] == "ok" and base["failed_requests"] == 0 and base["errors"] is None
    for name, (_, reason) in FAULTS.items():
        row = cell(rows, name)
        assert row["status"] == "ok", (name, row["errors"])  # 1 of 6 is under the threshold
        assert row["failed_requests"] == 1, (name, row["errors"])
        assert row["requests"] == 5, name
        (got, count), = row["errors"].items()
        assert count == 1
        if reason:
            assert got == reason, name
        else:
            assert got and "timeout" not in got and "HTTP" not in got, got
    bad = cell(rows, "mostly_500")
    assert bad["status"] == "failed" and bad["failed_requests"] == 4 and bad["errors"] == {"HTTP 500": 4}

    # every request is on disk, the failed ones with their error
    assert len(records) == 6 * len(urls)
    errors = [r["error"] for r in records if r["error"]]
    assert len(errors) == 5 + 4
    assert any("retry-after 1" in e for e in errors)

    md = (out / "results.md").read_text()
    assert tables_of(md)["Checks"][0][-1] == "Failed"
    assert "cell failed" in md
    assert "| prompts | http500 |" in md and "| prompts | baseline |" in md
    assert "Failed" in printed and "cell failed" in printed


async def test_failures_under_threshold_exit_zero(tmp_path, prompts_file, scripted):
    _, url = await scripted(fault="http429", fault_on=(1, 3, 5))  # exactly half: not more than 0.5
    suite = read_suite(write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}]))
    outcome = await run_suite(suite, tmp_path / "run")
    rows, *_ = check_run_dir(tmp_path / "run")
    assert rows[0]["status"] == "ok" and rows[0]["failed_requests"] == 3
    assert rows[0]["errors"] == {"HTTP 429 (retry-after 1)": 3}
    assert outcome.exit_code == 0


async def test_every_request_failing_fails_the_cell_not_the_run(tmp_path, prompts_file, scripted):
    _, dead = await scripted(fault="drop", fault_on=tuple(range(1, 7)))
    _, good = await scripted()
    suite = read_suite(write_fault_suite(tmp_path / "suite.yaml", prompts_file,
                                   [{"name": "baseline", "url": dead}, {"name": "second", "url": good}]))
    outcome = await run_suite(suite, tmp_path / "run")
    rows, *_ = check_run_dir(tmp_path / "run")
    assert cell(rows, "baseline")["status"] == "failed" and cell(rows, "baseline")["failed_requests"] == 6
    assert cell(rows, "second")["status"] == "ok" and cell(rows, "second")["requests"] == 6
    assert outcome.exit_code == 1 and outcome.failed_configs == {}


# ---- 2. a launched server that dies mid-run ---------------------------------------------------

def dying_suite(path: Path, prompts_file: Path, second: bool = True, die: tuple[str, ...] = ("--die-after", "8")) -> Path:
    # three load points of 6 requests; the first server dies on its 9th request (2nd load point),
    # leaving behind a worker of its process group (as vLLM's engine core would)
    configs = [{"name": "baseline", "args": [*die, "--spawn-child"]}] + ([{"name": "second"}] if second else [])
    return write_fault_suite(path, prompts_file, configs, engine="fake-wrapped",
                       concurrency=[1, 2, 3], extra={"server": {"startup_timeout_s": 30}})


@pytest.fixture(scope="module")
def died(fault_launchers, tmp_path_factory):
    """The dying suite, no restart: (run dir, outcome, live marked processes right after the run)."""
    tmp = tmp_path_factory.mktemp("died")
    out = tmp / "run"
    outcome = run_in_thread(fault_launchers, dying_suite(tmp / "suite.yaml", write_prompts(tmp / "prompts.jsonl")), out)
    return out, outcome, marked_processes(fault_launchers[1])


@pytest.fixture(scope="module")
def restarted(fault_launchers, tmp_path_factory):
    """The dying suite with restart_on_failure; the crash happens once, the restarted server lives on."""
    tmp = tmp_path_factory.mktemp("restarted")
    out = tmp / "run"
    suite = dying_suite(tmp / "suite.yaml", write_prompts(tmp / "prompts.jsonl"), second=False,
                        die=("--die-once", f"{tmp / 'died-once'}:8"))
    outcome = run_in_thread(fault_launchers, suite, out, restart_on_failure=True)
    return out, outcome, marked_processes(fault_launchers[1])


def test_server_death_fails_config_and_run_continues(died):
    out, outcome, survivors = died
    rows, records, _, meta = check_run_dir(out)
    assert set(outcome.failed_configs) == {"baseline"} and outcome.exit_code == 1
    assert meta["failed_configs"].keys() == {"baseline"}
    assert "logs/baseline.log" in meta["failed_configs"]["baseline"]
    # measured before the death: kept; measured during it: failed; after it: never sent
    assert cell(rows, "baseline", 1)["status"] == "ok" and cell(rows, "baseline", 1)["requests"] == 6
    assert cell(rows, "baseline", 2)["status"] == "failed" and cell(rows, "baseline", 2)["server_died"] is True
    assert not [r for r in rows if r["run"] == "baseline" and r.get("concurrency") == 3]
    assert all(cell(rows, "second", c)["status"] == "ok" for c in (1, 2, 3))
    assert len([r for r in records if r["config"] == "baseline"]) == 12
    # the dead server's group (its orphaned worker included) is gone; nothing launched survives
    pid = meta["servers"]["baseline"]["pid"]
    assert not alive(pid) and group_members(pid) == []
    assert "worker pid" in (out / "logs" / "baseline.log").read_text()
    assert survivors == []


def test_server_death_reports_log_tail(died):
    out, _, _ = died
    message = json.loads((out / "meta.json").read_text())["failed_configs"]["baseline"]
    assert "fake engine: serving" in message, message  # the tail of logs/baseline.log
    assert "code 3" in message, message  # the scripted server's exit status
    assert "'prompts'" in message and "C=2" in message, message  # where it happened


def test_restart_on_failure_completes_remaining_cells(restarted):
    out, outcome, survivors = restarted
    rows, _, _, meta = check_run_dir(out)
    assert outcome.failed_configs == {} and meta["failed_configs"] == {}
    assert meta["restarts"] == {"baseline": 1}
    assert cell(rows, "baseline", 1)["status"] == "ok"
    assert cell(rows, "baseline", 3)["status"] == "ok" and cell(rows, "baseline", 3)["requests"] == 6
    for log in ("baseline.log", "baseline.start1.log"):  # launched twice, a log per start (run/servers.py server_log_name)
        assert (out / "logs" / log).read_text().count("fake engine: serving") == 1
    assert survivors == []


def test_restart_remeasures_the_cell_cut_by_the_death(restarted):
    out, outcome, _ = restarted
    rows, records, _, meta = check_run_dir(out)
    row = cell(rows, "baseline", 2)
    assert row["status"] == "ok" and row["requests"] == 6 and row["repeats"] == 1, row["errors"]
    assert outcome.exit_code == 0
    # the cut attempt is kept, out of the numbers: its phase in meta.json, its requests marked superseded
    assert [(p["concurrency"], p["server_died"]) for p in meta["superseded_phases"]] == [(2, True)]
    superseded = [r for r in records if r["phase"] == "superseded"]
    assert len(superseded) == 6 and {r["concurrency"] for r in superseded} == {2}
    assert len([r for r in records if r["phase"] == "measure"]) == 18


async def test_parallel_restart_supersedes_the_cut_phase_in_the_run_dir(tmp_path, launchers, fake_engines, monkeypatch):
    """--parallel gpus with restart_on_failure: the worker's restart reaches the one run dir, so the
    phase cut by the death is set aside there as in a sequential run (not counted next to its re-measure)."""
    d = tmp_path / "gpu-launchers"
    shutil.copytree(launchers, d)
    wrapped = yaml.safe_load((d / "fake-wrapped.yaml").read_text())
    (d / "fake-wrapped.yaml").write_text(yaml.safe_dump({**wrapped, "gpu_env": "CUDA_VISIBLE_DEVICES"}))
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(d))
    monkeypatch.setenv("SPECBENCH_GPUS", "0")
    suite = dying_suite(tmp_path / "suite.yaml", write_prompts(tmp_path / "prompts.jsonl"), second=False,
                        die=("--die-once", f"{tmp_path / 'died-once'}:8"))
    out = tmp_path / "run"
    outcome = await run_parallel(read_suite(suite), out, mode="gpus", restart_on_failure=True)
    rows, records, _, meta = check_run_dir(out)
    assert outcome.exit_code == 0 and meta["restarts"] == {"baseline": 1}
    assert [(p["concurrency"], p["server_died"]) for p in meta["superseded_phases"]] == [(2, True)]
    superseded = [r for r in records if r["phase"] == "superseded"]
    assert len(superseded) == 6 and {r["concurrency"] for r in superseded} == {2}
    assert len([r for r in records if r["phase"] == "measure"]) == 18
    assert [(r["concurrency"], r["status"], r["requests"]) for r in rows] == [(1, "ok", 6), (2, "ok", 6), (3, "ok", 6)]


async def test_restart_gives_up_after_one_retry(tmp_path, prompts_file, fake_engines):
    # the server dies on its first request, every time: one restart, then the config fails
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "args": ["--die-after", "0"]}],
                        engine="fake-wrapped", concurrency=[1, 2])
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite), out, restart_on_failure=True)
    rows, _, _, meta = check_run_dir(out)
    assert set(outcome.failed_configs) == {"baseline"} and meta["restarts"] == {"baseline": 1}
    assert meta["failed_configs"].keys() == {"baseline"}
    assert [(out / "logs" / log).read_text().count("fake engine: serving") for log in ("baseline.log", "baseline.start1.log")] == [1, 1]
    assert rows and all(r["status"] == "failed" for r in rows)
    assert marked_processes(fake_engines) == []


async def test_restart_with_nothing_left_keeps_the_failure(tmp_path, prompts_file, fake_engines):
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "args": ["--die-after", "0"]}],
                        engine="fake-wrapped")
    outcome = await run_suite(read_suite(suite), tmp_path / "run", restart_on_failure=True)
    rows, *_ = check_run_dir(tmp_path / "run")
    assert rows[0]["status"] == "failed" and rows[0]["failed_requests"] == 6
    assert set(outcome.failed_configs) == {"baseline"}, "every request failed, yet the config is reported fine"


# ---- 3. resume ----------------------------------------------------------------------------------

async def _first_run_with_dead_second(tmp_path, prompts_file, scripted):
    base, base_url = await scripted()
    port = closed_port()
    configs = [{"name": "baseline", "url": base_url}, {"name": "spec", "url": f"http://127.0.0.1:{port}"}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, concurrency=[1, 2], warmup=1)
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite), out)
    assert set(outcome.failed_configs) == {"spec"} and outcome.exit_code == 1
    assert "cannot reach" in outcome.failed_configs["spec"]
    rows, *_ = check_run_dir(out)
    assert [r["run"] for r in rows] == ["baseline", "baseline"]
    assert base.requests == 2 * (1 + 6)
    return base, configs, port, out


def _check_resumed(out: Path, base: ScriptedServer, spec: ScriptedServer) -> None:
    assert base.requests == 2 * (1 + 6), "resume re-sent requests for cells already measured"
    assert spec.requests == 2 * (1 + 6)
    rows, records, phases, meta = check_run_dir(out)
    assert sorted((r["run"], r["concurrency"]) for r in rows) == [("baseline", 1), ("baseline", 2), ("spec", 1), ("spec", 2)]
    assert all(r["status"] == "ok" and r["requests"] == 6 for r in rows)
    assert len(phases) == 4 and len(records) == 4 * 7
    assert [r["resume"] for r in meta["runs"]] == [False, True]
    assert cell(rows, "spec", 1)["speedup_vs_baseline"] is not None


async def test_resume_same_suite_once_the_server_is_up(tmp_path, prompts_file, scripted):
    base, configs, port, out = await _first_run_with_dead_second(tmp_path, prompts_file, scripted)
    spec, runner, _ = await serve(port)
    try:
        outcome = await run_suite(read_suite(tmp_path / "suite.yaml"), out, resume=True)
    finally:
        await runner.cleanup()
    assert outcome.exit_code == 0 and outcome.failed_configs == {}
    _check_resumed(out, base, spec)


async def test_resume_after_fixing_the_url(tmp_path, prompts_file, scripted):
    base, configs, _, out = await _first_run_with_dead_second(tmp_path, prompts_file, scripted)
    spec, spec_url = await scripted()
    configs[1]["url"] = spec_url
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, concurrency=[1, 2], warmup=1)
    outcome = await run_suite(read_suite(suite), out, resume=True)
    assert outcome.exit_code == 0 and outcome.failed_configs == {}
    _check_resumed(out, base, spec)


async def test_resume_clears_the_old_failure(tmp_path, prompts_file, scripted):
    _, _, port, out = await _first_run_with_dead_second(tmp_path, prompts_file, scripted)
    _, runner, _ = await serve(port)
    try:
        await run_suite(read_suite(tmp_path / "suite.yaml"), out, resume=True)
    finally:
        await runner.cleanup()
    assert json.loads((out / "meta.json").read_text())["failed_configs"] == {}


async def test_resume_refuses_a_changed_suite(tmp_path, prompts_file, scripted):
    base, configs, _, out = await _first_run_with_dead_second(tmp_path, prompts_file, scripted)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, concurrency=[1, 2], warmup=1, max_tokens=16)
    with pytest.raises(SuiteError, match="max_tokens"):
        await run_suite(read_suite(suite), out, resume=True)
    assert base.requests == 2 * 7, "nothing is sent before the check"
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before, "the run dir was touched"
    # through the CLI: one line, exit code 2
    assert await asyncio.to_thread(main, ["run", str(suite), "--resume", str(out), "--quiet"]) == 2


async def test_resume_remeasures_a_torn_and_an_interrupted_phase(tmp_path, prompts_file, scripted):
    """A crash mid-append leaves a torn last line; an interrupt leaves a phase marked interrupted."""
    base, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}],
                        concurrency=[1, 2, 3])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    lines = (out / "phases.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["interrupted"] = True  # as if c=1 had been cut by Ctrl-C
    (out / "phases.jsonl").write_text(json.dumps(first) + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2])
    sent = base.requests
    outcome = await run_suite(read_suite(suite), out, resume=True)
    assert base.requests - sent == 12, "only c=1 and the torn c=3 are measured again"
    rows, records, phases, _ = check_run_dir(out)
    assert outcome.exit_code == 0
    assert sorted(r["concurrency"] for r in rows) == [1, 2, 3]
    assert all(r["status"] == "ok" and r["requests"] == 6 and r["repeats"] == 1 for r in rows)
    assert len(phases) == 3
    # nothing deleted: the cut phases' requests stay on disk, marked superseded, out of the numbers
    assert len([r for r in records if r["phase"] == "measure"]) == 18
    assert sorted(r["concurrency"] for r in records if r["phase"] == "superseded") == [1] * 6 + [3] * 6


async def test_resume_after_a_crash_mid_append(tmp_path, prompts_file, scripted):
    """A crash while a phase's requests were being appended: a torn requests line, no phase line."""
    base, url = await scripted()
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}], concurrency=[1, 2])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    lines = (out / "requests.jsonl").read_text().splitlines(keepends=True)
    (out / "requests.jsonl").write_text("".join(lines[:9]) + lines[9][:40])  # c=2: 3 records and a torn one
    (out / "phases.jsonl").write_text((out / "phases.jsonl").read_text().splitlines(keepends=True)[0])
    sent = base.requests
    outcome = await run_suite(read_suite(suite), out, resume=True)
    assert base.requests - sent == 6 and outcome.exit_code == 0
    rows, records, phases, _ = check_run_dir(out)
    assert [(r["concurrency"], r["requests"], r["status"]) for r in rows] == [(1, 6, "ok"), (2, 6, "ok")]
    assert len(phases) == 2
    assert len([r for r in records if r["phase"] == "measure"]) == 12
    assert len([r for r in records if r["phase"] == "superseded"]) == 3  # the torn line itself is unreadable


# ---- 4. API key -----------------------------------------------------------------------------------

def _files_containing(root: Path, needle: str) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


async def test_api_key_sent_as_bearer_never_stored(tmp_path, prompts_file, scripted, monkeypatch, capsys):
    monkeypatch.setenv("MY_KEY", SECRET)
    server, url = await scripted(fault="http500", fault_on=(3,))  # a failure: its message is stored too
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}], warmup=1,
                        extra={"api_key_env": "MY_KEY"})
    out = tmp_path / "run"
    code = await asyncio.to_thread(main, ["run", str(suite), "--output", str(out), "--quiet"])
    assert code == 0
    assert server.headers and all(h.get("Authorization") == f"Bearer {SECRET}" for h in server.headers)
    check_run_dir(out)
    assert _files_containing(out, SECRET) == []
    printed = capsys.readouterr()
    assert SECRET not in printed.out and SECRET not in printed.err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["suite"]["raw"]["api_key_env"] == "MY_KEY"  # the variable's name is recorded, not its value


@pytest.fixture(scope="module")
def keyed_launch(fault_launchers, tmp_path_factory):
    """A launched config given the key as a server flag (and the client the key from MY_KEY)."""
    tmp = tmp_path_factory.mktemp("keyed")
    suite = write_fault_suite(tmp / "suite.yaml", write_prompts(tmp / "prompts.jsonl"),
                        [{"name": "baseline", "args": ["--api-key", SECRET]}],
                        engine="fake-wrapped", requests=2, extra={"api_key_env": "MY_KEY"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MY_KEY", SECRET)
        outcome = run_in_thread(fault_launchers, suite, tmp / "run")
    return tmp / "run", outcome


def test_api_key_flag_of_a_launched_server_is_redacted(keyed_launch):
    out, outcome = keyed_launch
    assert outcome.exit_code == 0, outcome.failed_configs
    _, _, _, meta = check_run_dir(out)
    argv = meta["servers"]["baseline"]["argv"]
    assert argv[argv.index("--api-key") + 1] == "***"
    assert SECRET not in json.dumps(meta["servers"])
    log = (out / "logs" / "baseline.log").read_text()
    assert "--api-key ***" in log and SECRET not in log


def test_api_key_flag_in_no_file_of_the_run(keyed_launch):
    out, _ = keyed_launch
    assert _files_containing(out, SECRET) == []


# ---- 5. real vLLM on the CPU: kill the first server mid-run -----------------------------------------

@pytest.mark.engine
@pytest.mark.usefixtures("cpu_engine")
async def test_real_vllm_killed_mid_run(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECBENCH_LAUNCHERS", raising=False)
    marker = f"FAULTS_{uuid.uuid4().hex}"
    env = {"SPECBENCH_FAULTS_MARKER": marker}
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({
        "name": "real_kill", "model": "smol", "endpoint": "chat", "engine": "vllm-cpu",
        "configs": [{"name": "baseline", "env": env}, {"name": "second", "env": env}],
        "datasets": [{"name": "builtin", "categories": ["math"], "requests": 3}],
        "load": {"concurrency": [1, 2], "max_tokens": 32, "temperature": 0, "warmup": 1},
        "server": {"startup_timeout_s": 400},
    }))
    out = tmp_path / "run"
    killed: dict[str, int] = {}

    async def killer():
        # once the first server has finished a cell, kill its whole group in the middle of the next
        while not (meta_pids(out).get("baseline") and count_lines(out / "phases.jsonl") >= 1):
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)
        pid = meta_pids(out)["baseline"]
        killed["pid"], killed["members"] = pid, len(group_members(pid))
        os.killpg(pid, signal.SIGKILL)

    task = asyncio.create_task(killer())
    try:
        outcome = await run_suite(read_suite(suite_file), out)
        # what is left of every launched group: a SIGKILLed engine core can take a moment to finish
        # exiting (seen once in state R right after the run), so allow a few seconds, then nothing
        for _ in range(100):
            left = {name: [(m, state(m)) for m in group_members(pid)] for name, pid in meta_pids(out).items()}
            if not any(left.values()):
                break
            await asyncio.sleep(0.1)
        survivors = marked_processes(marker)
        assert killed, "the run finished before the first server could be killed"
        assert killed["members"] >= 2, "vLLM's API server and engine core share the group"
        rows, _, _, meta = check_run_dir(out)
        assert set(outcome.failed_configs) == {"baseline"} and outcome.exit_code == 1
        message = meta["failed_configs"]["baseline"]
        assert "code -9" in message and "baseline.log" in message, message  # killed by SIGKILL
        assert len(message.splitlines()) > 1, "no log tail"
        assert cell(rows, "baseline", 1)["status"] == "ok" and cell(rows, "baseline", 1)["requests"] == 3
        assert all(cell(rows, "second", c)["status"] == "ok" and cell(rows, "second", c)["requests"] == 3 for c in (1, 2))
        assert left == {"baseline": [], "second": []}, left
        assert survivors == []
        for pid in meta_pids(out).values():
            assert not alive(pid)
    finally:
        task.cancel()
        reap(marker)
