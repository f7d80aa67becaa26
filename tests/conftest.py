import sys
import uuid
from pathlib import Path

import pytest
import requests
import tiktoken.load

from tests.support.cpu_engine import require_cpu_engine
from tests.support.hooks import reloaded_hooks
from tests.support.launchers import write_fault_launchers, write_launcher
from tests.support.o200k import write_encoding
from tests.support.paths import PACKAGE_ENV, SHARED, SUPPORT
from tests.support.processes import reap
from tests.support.scripted_server import ScriptedServers
from tests.support.suites import write_prompts


@pytest.fixture(autouse=True)
def no_o200k_file_but_the_tests_own(tmp_path_factory, monkeypatch):
    """An empty tiktoken cache and no SPECBENCH_TIKTOKEN_FILE: a machine that has o200k_base cached runs
    the same tests (rows without o200k counts, o200k_error set) as one that has not."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "empty-tiktoken-cache"))
    monkeypatch.delenv("SPECBENCH_TIKTOKEN_FILE", raising=False)


@pytest.fixture
def o200k_file(tmp_path: Path, monkeypatch) -> Path:
    """A small real tiktoken encoding (tests/support/o200k.py), accepted as o200k_base: its sha256 patched in."""
    path = tmp_path / "o200k_fixture.tiktoken"
    monkeypatch.setattr("specbench.run.o200k_file.O200K_SHA256", write_encoding(path))
    return path


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch):
    """The step recorder's modules reloaded under this test's environment: ``hooks(level)`` (tests/support/hooks.py)."""
    yield from reloaded_hooks(tmp_path, monkeypatch)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt of tiktoken's to fetch a file fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a download was attempted: {args[:2]}")

    monkeypatch.setattr(requests, "get", refuse)
    monkeypatch.setattr(requests.Session, "request", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)


@pytest.fixture
def shared() -> Path:
    return SHARED


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    return write_prompts(tmp_path / "prompts.jsonl")


@pytest.fixture
async def scripted():
    """Scripted servers (tests/support/scripted_server.py) on demand: ``await scripted(**script)`` → (server, URL),
    ``await scripted.serve(instance)`` → URL; all stopped at the end."""
    servers = ScriptedServers()
    yield servers
    await servers.close()


@pytest.fixture
def launchers(tmp_path: Path, monkeypatch) -> Path:
    """An empty SPECBENCH_LAUNCHERS folder for this test (and no SPECBENCH_ENGINE_PYTHON override)."""
    d = tmp_path / "launchers"
    d.mkdir()
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(d))
    monkeypatch.delenv("SPECBENCH_ENGINE_PYTHON", raising=False)
    return d


@pytest.fixture
def fake_engine(launchers: Path) -> None:
    """Launcher ``fake``: tests/support/fake_engine.py as vLLM (synthetic acceptance declared), 10 ms steps +
    4.5 ms per draft token per request in flight, the real drafter accepting min(K, 2) tokens per step."""
    write_launcher(launchers, "fake", extends="vllm", python=sys.executable, env=PACKAGE_ENV,
                   command=["{python}", str(SUPPORT / "fake_engine.py")],
                   args=["--port", "{port}", "--host", "{host}", "--served-model-name", "{model}"],
                   speculative={"synthetic_acceptance": True})


@pytest.fixture
def fake_engines(launchers: Path):
    """Launchers ``fake`` / ``fake-wrapped`` (tests/support/launchers.py) in this test's SPECBENCH_LAUNCHERS;
    yields their processes' environment marker and reaps whatever of them survived the test."""
    marker = f"FAKE_{uuid.uuid4().hex}"
    write_fault_launchers(launchers, marker)
    yield marker
    reap(marker)


@pytest.fixture(scope="module")
def cpu_engine() -> None:
    """The CPU engine and its model (tests/support/cpu_engine.py), or the module skips (fails under
    SPECBENCH_REQUIRE_ENGINE=1); an engine test module asks for it with ``pytest.mark.usefixtures``."""
    require_cpu_engine()


@pytest.fixture(scope="module")
def cpu_engine_python() -> None:
    """As ``cpu_engine``, for a module that needs only the engine's Python (its torch), not the model."""
    require_cpu_engine(model=False)
