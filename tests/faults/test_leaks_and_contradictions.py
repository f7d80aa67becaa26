"""Leaks and contradictions: close variants of the hostile-input and hostile-server cases that still let a
wrong, stale or leaked value through (found by an adversarial review). Each test failed before the commit that fixed it."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from specbench.cli import main
from specbench.client import RequestSpec, close_transport, open_transport, stream_request
from specbench.schemas.request import RequestRecord
from tests.support import suites
from tests.support.scripted_server import serve_app

SECRET = "sk-review-77aa"
MAX_TOKENS = 8


async def _sse_app(chunks: list[dict], echo_auth: bool = False):
    """A server streaming ``chunks`` (with the request's Authorization header wherever a string is "AUTH")."""

    async def complete(request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for chunk in chunks:
            text = json.dumps(chunk).replace('"AUTH"', json.dumps(auth)) if echo_auth else json.dumps(chunk)
            await resp.write(b"data: " + text.encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.add_routes([web.post("/v1/completions", complete), web.post("/v1/chat/completions", complete)])
    return await serve_app(app, shutdown_timeout=0.2)


async def _one(chunks: list[dict], *, kind: str = "socket", echo_auth: bool = False, **spec) -> RequestRecord:
    runner, url = await _sse_app(chunks, echo_auth)
    try:
        rs = RequestSpec(base_url=url, model="m", max_tokens=MAX_TOKENS, **spec)
        transport = open_transport(url, kind)
        try:
            return await stream_request(transport, rs, [{"role": "user", "content": "hi"}],
                                        RequestRecord(prompt_id="p", dataset="d", config="c"))
        finally:
            await close_transport(transport)
    finally:
        await runner.cleanup()


def _files_text(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def _suite(tmp_path: Path, prompts_file: Path, configs: list[dict], **extra) -> Path:
    return suites.write_suite(tmp_path, configs, name="review", prompts=prompts_file, requests=2, endpoint="chat", **extra,
                              load={"concurrency": 1, "max_tokens": MAX_TOKENS, "temperature": 0, "warmup": 0, "timeout_s": 20})


# ---- a wrong-typed completion text fails the request, it does not escape stream_request ----

async def test_non_string_completion_text_fails_the_request():
    for kind in ("socket", "aiohttp", "openai"):
        rec = await _one([{"choices": [{"text": ["a"]}]}, {"choices": [{"text": 5}]}], kind=kind, endpoint="completions")
        assert rec.error is not None and "text" in rec.error and not rec.ok


# ---- an echoed API key reaches no field of the record, whichever field the server echoes it into ----

@pytest.mark.parametrize("kind", ["socket", "aiohttp", "openai"])
async def test_echoed_api_key_is_scrubbed_from_every_field(kind):
    rec = await _one([{"choices": [{"delta": {"content": "a"}, "finish_reason": "AUTH"}],
                       "usage": {"completion_tokens": 1, "prompt_tokens": 2},
                       "metrics": {"speculative_decoding": {"num_spec_steps": 1, "echo": "AUTH"}}}],
                     kind=kind, echo_auth=True, api_key=SECRET)
    assert rec.ok and rec.output_tokens == 1
    assert SECRET not in json.dumps(rec.to_dict())


# ---- URL credentials: neither the password nor the Basic token it becomes reaches a file ----

async def test_url_credentials_reach_no_file_through_probes_or_echoes(tmp_path, prompts_file, scripted):
    _, url = await scripted(pattern=[1], version_body="[1, 2]", fault="http401echo", fault_on=(1, 2))
    keyed = url.replace("http://", "http://bench:pw-review-31@")
    suite = _suite(tmp_path, prompts_file, [{"name": "base", "url": keyed}])
    out = tmp_path / "out"
    code = await asyncio.to_thread(main, ["run", str(suite), "-o", str(out), "--quiet"])
    assert code == 1  # both measured requests got the 401
    text = _files_text(out)
    assert "HTTP 401" in text and "version" in text
    token = base64.b64encode(b"bench:pw-review-31").decode()
    assert "pw-review-31" not in text and token not in text


# ---- --resume must be able to tell the old phases are comparable ----

async def test_resume_without_meta_json_refuses_to_mix_unknown_phases(tmp_path, prompts_file, scripted, capsys):
    _, url = await scripted(pattern=[1])
    suite = _suite(tmp_path, prompts_file, [{"name": "base", "url": url}])
    out = tmp_path / "out"
    assert await asyncio.to_thread(main, ["run", str(suite), "-o", str(out), "--quiet"]) == 0
    (out / "meta.json").unlink()  # e.g. a SIGKILL during --overwrite, or a hand-cleaned dir
    changed = yaml.safe_load(suite.read_text())
    changed["load"]["max_tokens"] = 4  # its old cells would now be counted as measured with max_tokens 4
    suite.write_text(yaml.safe_dump(changed))
    code = await asyncio.to_thread(main, ["run", str(suite), "--resume", str(out), "--quiet"])
    assert code == 2 and "meta.json" in capsys.readouterr().err


async def test_resume_with_meta_json_of_the_wrong_shape_is_one_line(tmp_path, prompts_file, scripted, capsys):
    _, url = await scripted(pattern=[1])
    suite = _suite(tmp_path, prompts_file, [{"name": "base", "url": url}])
    out = tmp_path / "out"
    assert await asyncio.to_thread(main, ["run", str(suite), "-o", str(out), "--quiet"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    for key, bad in (("comparability", []), ("runs", 5), ("servers", [])):
        (out / "meta.json").write_text(json.dumps({**meta, key: bad}))
        code = await asyncio.to_thread(main, ["run", str(suite), "--resume", str(out), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and "meta.json" in err and key in err and "Traceback" not in err, (key, err)


# ---- a /metrics series exported twice is not counted twice ----

def test_duplicate_metrics_series_is_invalid_not_doubled():
    from specbench.client.metrics import parse_metrics

    snap = parse_metrics('# TYPE vllm:spec_decode_num_drafts counter\n'
                         'vllm:spec_decode_num_drafts_total{engine="0"} 10\n'
                         'vllm:spec_decode_num_drafts_total{engine="1"} 5\n'
                         'vllm:spec_decode_num_drafts_total{engine="0"} 10\n')
    assert snap.get("vllm:spec_decode_num_drafts_total") is None
    assert "duplicate" in snap.invalid["vllm:spec_decode_num_drafts_total"]


# ---- per-request spec stats that contradict themselves fail the request ----

async def test_per_request_stats_accepting_more_than_drafted_fail_the_request():
    rec = await _one([{"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}},
                      {"choices": [], "usage": {"completion_tokens": 1},
                       "metrics": {"speculative_decoding": {"num_spec_steps": 1, "num_draft_tokens": 1,
                                                            "num_accepted_draft_tokens": 5}}}])
    assert not rec.ok and "num_accepted_draft_tokens" in rec.error


async def _huge(path: str, size: int):
    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=b"#" * size)

    app = web.Application()
    app.add_routes([web.get(path, answer)])
    return await serve_app(app, shutdown_timeout=0.2)


async def test_a_huge_metrics_or_probe_answer_is_refused_not_buffered():
    """A server cannot make the harness buffer an endless side answer: the cell's acceptance (or the
    config) fails with the reason instead."""
    import aiohttp

    from specbench.client.metrics import scrape
    from specbench.launch import read_engine
    from specbench.run.servers import check_url
    from specbench.suite import ServerConfig
    from specbench.util.bounded import METRICS_LIMIT, PROBE_LIMIT

    runner, url = await _huge("/metrics", METRICS_LIMIT + 1)
    try:
        async with aiohttp.ClientSession() as session:
            snap = await scrape(session, url)
        assert not snap.ok and "larger than 32 MiB" in (snap.error or "")
    finally:
        await runner.cleanup()
    runner, url = await _huge("/v1/models", PROBE_LIMIT + 1)
    try:
        async with aiohttp.ClientSession() as session:
            try:
                await check_url(session, ServerConfig(name="x", url=url), "m", read_engine("vllm"))
            except Exception as err:  # noqa: BLE001 - the type and text are what is checked
                assert type(err).__name__ == "ServerError" and "larger than 4 MiB" in str(err)
            else:
                raise AssertionError("a 4 MiB+ /v1/models answer was accepted")
    finally:
        await runner.cleanup()


async def test_per_request_stats_claiming_more_tokens_than_streamed_are_set_aside():
    """Stats that claim more decode tokens than the answer has cannot be this answer's: the request
    keeps its stream numbers, drops the stats and says why."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        {"choices": [{"index": 0, "delta": {"content": "bcd"}, "finish_reason": "length"}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4},
         "metrics": {"speculative_decoding": {"num_spec_steps": 3, "num_accepted_draft_tokens": 6, "num_draft_tokens": 9}}},
    ]
    for kind in ("socket", "aiohttp", "openai"):
        rec = await _one(chunks, kind=kind, endpoint="chat")
        assert rec.error is None and rec.output_tokens == 4, (kind, rec.error)
        assert rec.spec_stats is None and "contradict the stream" in (rec.token_warning or ""), kind
    fitting = [dict(c) for c in chunks]
    fitting[2] = {**chunks[2], "metrics": {"speculative_decoding": {"num_spec_steps": 1, "num_accepted_draft_tokens": 2,
                                                                     "num_draft_tokens": 3}}}
    rec = await _one(fitting, endpoint="chat")
    assert rec.spec_stats is not None and rec.token_warning is None
