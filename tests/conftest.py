from pathlib import Path

import pytest

from tests.support.paths import SHARED
from tests.support.scripted_server import ScriptedServers
from tests.support.suites import write_prompts


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
