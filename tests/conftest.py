import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
SHARED = Path(os.environ.get("SPECBENCH_SHARED", ROOT.parent / "shared"))


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
    """Start scripted servers (tests/scripted_server.py) on demand; all are cleaned up at the end."""
    from scripted_server import Script, start

    runners = []

    async def make(**kw):
        server, runner, url = await start(Script(**kw))
        runners.append(runner)
        return server, url

    yield make
    for r in runners:
        await r.cleanup()
