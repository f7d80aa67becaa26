from pathlib import Path

import pytest

from tests.support.paths import SHARED
from tests.support.scripted_server import Script, start


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
    """Start scripted servers (tests/support/scripted_server.py) on demand; all are cleaned up at the end."""
    runners = []

    async def make(**kw):
        server, runner, url = await start(Script(**kw))
        runners.append(runner)
        return server, url

    yield make
    for r in runners:
        await r.cleanup()


@pytest.fixture
def launchers(tmp_path: Path, monkeypatch) -> Path:
    """An empty SPECBENCH_LAUNCHERS folder for this test (and no SPECBENCH_ENGINE_PYTHON override)."""
    d = tmp_path / "launchers"
    d.mkdir()
    monkeypatch.setenv("SPECBENCH_LAUNCHERS", str(d))
    monkeypatch.delenv("SPECBENCH_ENGINE_PYTHON", raising=False)
    return d
