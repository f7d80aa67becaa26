from pathlib import Path

import pytest

from tests.support.paths import SHARED
from tests.support.scripted_server import ScriptedServers


@pytest.fixture
def shared() -> Path:
    return SHARED


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    rows = [f'{{"prompt": "question number {i} about topic {i % 3}", "category": "cat{i % 2}"}}' for i in range(6)]
    path.write_text("\n".join(rows) + "\n")
    return path


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
