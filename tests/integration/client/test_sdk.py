"""``load.client: openai``: the official SDK as a transport. It must send what the other transports
send, stamp each chunk when the SDK yields it, and put every chunk through the same checks, so a
server's bad value fails the request with the same line whichever client measured it.

(Every test of tests/integration/client/test_send.py also runs over it: its ``session`` fixture.)
"""

import json

import openai
import pytest
from aiohttp import web

from specbench.client import RequestSpec, close_transport, open_transport, stream_request, transport_clock
from specbench.client.sdk import Sdk
from specbench.load.generate import LoadPass, generate_load, generate_load_processes
from specbench.schemas.request import Prompt, RequestRecord
from specbench.suite import read_suite
from specbench.suite.checks import CLIENTS
from tests.support.scripted_server import serve_app
from tests.support.suites import write_prompts, write_suite

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]


async def _request(kind: str, spec: RequestSpec) -> RequestRecord:
    transport = open_transport(spec.base_url, kind)
    try:
        return await stream_request(transport, spec, MSGS, RequestRecord("p", "d", "c"))
    finally:
        await close_transport(transport)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_the_sdk_sends_the_socket_clients_body_and_headers(scripted, monkeypatch, endpoint):
    """The SDK (its x-stainless headers show it is the one sending) carries RequestSpec.payload as the socket
    client sends it, asks for identity encoding, and takes no key, organisation or project from OPENAI_* variables."""
    for name in ("OPENAI_API_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.setenv(name, "from-the-environment")
    server, url = await scripted(pattern=[1, 2])
    spec = RequestSpec(base_url=url, model="smol", endpoint=endpoint, max_tokens=6, ignore_eos=True, top_p=0.5,
                       extra_body={"return_token_ids": True})
    for kind in ("socket", "openai"):
        rec = await _request(kind, spec)
        assert rec.ok and rec.output_tokens == 6, (kind, rec.error)
    socket_body, sdk_body = server.bodies[-2:]
    assert sdk_body == socket_body == json.loads(json.dumps(spec.payload(MSGS).to_dict()))
    sent = {k.lower(): v for k, v in server.headers[-1].items()}
    assert sent["x-stainless-package-version"] == openai.__version__
    assert sent["accept-encoding"] == "identity"
    assert not {"authorization", "openai-organization", "openai-project"} & set(sent)
    await _request("openai", RequestSpec(base_url=url, model="smol", max_tokens=6, api_key="sk-suite-key"))
    assert server.headers[-1]["Authorization"] == "Bearer sk-suite-key"


def test_the_clock_says_chunks_are_stamped_when_the_sdk_yields_them():
    assert transport_clock(Sdk()) == f"SDK yield time (perf_counter, openai {openai.__version__})"
    assert "openai" in CLIENTS


async def test_one_async_openai_per_server_url_for_a_pass():
    sdk = Sdk()
    a = sdk.client(RequestSpec(base_url="http://127.0.0.1:1", model="m"))
    assert sdk.client(RequestSpec(base_url="http://127.0.0.1:1/", model="m", endpoint="completions")) is a
    b = sdk.client(RequestSpec(base_url="http://127.0.0.1:2", model="m"))
    assert b is not a and str(a.base_url) == "http://127.0.0.1:1/v1/" and a.max_retries == 0
    await sdk.close()
    assert sdk.clients == {} and a.is_closed() and b.is_closed()


async def _raw(parts: list[bytes]) -> tuple[web.AppRunner, str]:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    return await serve_app(app, shutdown_timeout=0.1)


def _chunk(**fields) -> bytes:
    return b"data: " + json.dumps({"id": "x", **fields}).encode() + b"\n\n"


@pytest.mark.parametrize(("chunk", "error"), [
    ({"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": 7}]},
     "bad server value: finish_reason = 7 is not a string"),
    ({"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": {"completion_tokens": -1}},
     "bad server value: usage.completion_tokens = -1 is not a token count"),
    ({"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": {"completion_tokens": 2.5}},
     "bad server value: usage.completion_tokens = 2.5 is not a token count"),
    ({"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": {"completion_tokens": 1},
      "metrics": {"speculative_decoding": {"num_spec_steps": "3"}}},
     "bad server value: metrics.speculative_decoding.num_spec_steps = '3' is not a non-negative number"),
    ({"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": 5}, "malformed SSE data: unexpected shape"),
])
async def test_a_bad_server_value_fails_the_request_with_the_same_line_on_every_transport(chunk, error):
    runner, url = await _raw([_chunk(**chunk), b"data: [DONE]\n\n"])
    try:
        for kind in ("socket", "aiohttp", "openai"):
            rec = await _request(kind, RequestSpec(base_url=url, model="m", max_tokens=8))
            assert rec.error is not None and rec.error.startswith(error) and not rec.ok, (kind, rec.error)
    finally:
        await runner.cleanup()


async def test_what_the_sdk_coerces_before_specbench_sees_it():
    """A numeric string in an otherwise well-typed usage is an int by the time the SDK yields the chunk:
    the other transports fail the request, the SDK path cannot (specbench/client/sdk.py says so)."""
    runner, url = await _raw([_chunk(choices=[{"index": 0, "delta": {"content": "a"}}],
                                     usage={"prompt_tokens": 2, "completion_tokens": "1", "total_tokens": 3}),
                              b"data: [DONE]\n\n"])
    try:
        spec = RequestSpec(base_url=url, model="m", max_tokens=8)
        assert (await _request("socket", spec)).error == "bad server value: usage.completion_tokens = '1' is not a token count"
        rec = await _request("openai", spec)
        assert rec.ok and rec.output_tokens == 1
    finally:
        await runner.cleanup()


async def test_vllm_fields_survive_the_sdk_models():
    """token_ids, reasoning_content and the per-request spec stats are not in the SDK's types: to_dict keeps them."""
    stats = {"num_spec_steps": 1, "num_accepted_draft_tokens": 1, "num_draft_tokens": 2}
    runner, url = await _raw([
        _chunk(choices=[{"index": 0, "delta": {"reasoning_content": "th", "token_ids": [5]}}]),
        _chunk(choices=[{"index": 0, "delta": {"content": "ok"}, "token_ids": [6, 7], "finish_reason": "stop"}]),
        _chunk(choices=[], usage={"prompt_tokens": 3, "completion_tokens": 3}, metrics={"speculative_decoding": stats}),
        b"data: [DONE]\n\n"])
    try:
        rec = await _request("openai", RequestSpec(base_url=url, model="m", max_tokens=8))
    finally:
        await runner.cleanup()
    assert rec.ok and rec.text == "thok" and rec.chunk_tokens == [1, 2] and rec.output_token_ids == [5, 6, 7]
    assert rec.spec_stats == stats and rec.prompt_tokens == 3 and rec.finish_reason == "stop"


async def test_sdk_load_from_several_processes(scripted):
    """Each load process opens its own SDK clients: records merge like the socket client's."""
    server, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.005)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=16)
    prompts = [Prompt(id=f"p{i}", dataset="d", turns=(f"hello {i}",)) for i in range(8)]
    res = await generate_load_processes(spec, prompts, LoadPass("c", concurrency=4), 2, client="openai")
    assert sorted(r.prompt_id for r in res.records) == sorted(p.id for p in prompts)
    assert all(r.ok and r.output_tokens == 16 for r in res.records)
    assert all("x-stainless-package-version" in {k.lower() for k in h} for h in server.headers)
    assert res.started == min(r.send_time for r in res.records)


async def test_sdk_pass_reuses_its_connections(scripted):
    server, url = await scripted(pattern=[1, 2], ttft_s=0.01, gap_s=0.005)
    spec = RequestSpec(base_url=url, model="smol", max_tokens=8)
    prompts = [Prompt(id=f"p{i}", dataset="d", turns=("hi",)) for i in range(12)]
    sdk = open_transport(url, "openai")
    try:
        res = await generate_load(sdk, spec, prompts, LoadPass("c", concurrency=3))
    finally:
        await close_transport(sdk)
    assert all(r.ok for r in res.records) and isinstance(sdk, Sdk) and sdk.clients == {}


def test_suite_accepts_load_client_openai(tmp_path):
    prompts = write_prompts(tmp_path / "p.jsonl")
    suite = write_suite(tmp_path / "s.yaml", [{"name": "base", "url": "https://example.invalid"}], name="s",
                        prompts=prompts, load={"client": "openai"})
    assert read_suite(suite).load.client == "openai"
