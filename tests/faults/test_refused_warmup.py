"""A refused warm-up: fail fast where the answer cannot change.

Every warm-up request refused with the same client error (vLLM on a model folder without a chat
template: HTTP 400) stops that config after its warm-up, with the server's own message (trimmed,
secrets scrubbed) in the terminal, meta.json and results.md; the other configs run; exit 1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.run.refusal import refusal
from specbench.schemas.request import RequestRecord
from tests.support.rundirs import check_run_dir
from tests.support.scripted_server import CHAT_TEMPLATE_ERROR
from tests.support.suites import write_fault_suite

ALL = tuple(range(1, 1000))
SECRET = "sk-trust-run-77"


def cli(*args: str) -> int:
    return main(["run", *args, "--quiet"])


def text_of(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


async def test_warmup_refused_with_one_client_error_stops_that_config(tmp_path, prompts_file, scripted, capsys):
    base, base_url = await scripted()
    refused, refused_url = await scripted(fault="http400", fault_on=ALL)
    after, after_url = await scripted()
    configs = [{"name": "baseline", "url": base_url}, {"name": "notemplate", "url": refused_url, "method": "ngram",
                                                      "num_speculative_tokens": 3},
               {"name": "after", "url": after_url, "method": "ngram", "num_speculative_tokens": 3}]
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, configs, concurrency=[1, 2], warmup=2)
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 1
    assert refused.requests == 2, "nothing is sent after the refused warm-up"
    assert base.requests == after.requests == 2 * (2 + 6), "the other configs run every cell"
    rows, _, _, meta = check_run_dir(out)
    assert sorted({r["run"] for r in rows}) == ["after", "baseline"] and all(r["status"] == "ok" for r in rows)
    said = meta["failed_configs"]["notemplate"]
    assert "HTTP 400" in said and CHAT_TEMPLATE_ERROR in said and "\n" not in said
    assert CHAT_TEMPLATE_ERROR in (out / "results.md").read_text()
    err = " ".join(capsys.readouterr().err.split())  # the terminal wraps long lines
    assert f"config notemplate failed: config 'notemplate': all 2 warm-up requests got HTTP 400: {CHAT_TEMPLATE_ERROR}" in err


async def test_refused_warmup_message_is_scrubbed_of_secrets(tmp_path, prompts_file, scripted, capsys, monkeypatch):
    monkeypatch.setenv("TRUST_RUN_KEY", SECRET)
    _, url = await scripted(fault="http401echo", fault_on=ALL)  # echoes the Authorization header back
    suite = write_fault_suite(tmp_path / "suite.yaml", prompts_file, [{"name": "baseline", "url": url}], warmup=2,
                              extra={"api_key_env": "TRUST_RUN_KEY"})
    out = tmp_path / "run"
    assert await asyncio.to_thread(cli, str(suite), "-o", str(out)) == 1
    err = " ".join(capsys.readouterr().err.split())
    meta = json.loads((out / "meta.json").read_text())
    assert "HTTP 401: bad key" in meta["failed_configs"]["baseline"] and "HTTP 401: bad key" in err
    assert SECRET not in err and SECRET not in text_of(out)


def record(error: str | None) -> RequestRecord:
    return RequestRecord(prompt_id="p", dataset="d", config="c", error=error)


@pytest.mark.parametrize("errors, said", [
    (['HTTP 400: {"object":"error","message":"no chat template","code":400}'] * 2, "HTTP 400: no chat template"),
    (['HTTP 404: {"error": {"message": "The model `x` does not exist.", "code": 404}}'], "HTTP 404: The model `x` does not exist."),
    (['HTTP 400: {"object":"error","message":"cut sho'] * 2, "HTTP 400: cut sho …"),
    (["HTTP 422: plain text, http://u:pw@host/x"] * 2, "HTTP 422: plain text, http://u:***@host/x"),
    (["HTTP 400: a", "HTTP 400: b"], None),  # different answers: some prompt might pass
    (["HTTP 400: a", None], None),
    (["HTTP 429 (retry-after 1): slow down"] * 2, None),  # a rate limit can answer otherwise later
    (["HTTP 408: timeout"] * 2, None),
    (["HTTP 500: boom"] * 2, None),
    (["cancelled: run stopped before the request finished"] * 2, None),
    ([], None),
])
def test_refusal_is_one_and_the_same_client_error(errors, said):
    assert refusal([record(e) for e in errors]) == said
