"""The streaming client against the scripted server and tiny in-test SSE servers (127.0.0.1 only).

Every request-level failure must land in ``record.error`` (never an exception), with the token
source of each record saying how its per-chunk counts were obtained.
"""

import asyncio
import json

import pytest
from aiohttp import web

from specbench.client import (
    SOURCE_NONE,
    SOURCE_TOKEN_IDS,
    SOURCE_USAGE,
    SOURCE_USAGE_TOTAL,
    RequestSpec,
    ResponseStream,
    close_transport,
    open_transport,
    stream_request,
)
from specbench.client.sdk import Sdk
from specbench.client.wire import Wire
from specbench.load.generate import LoadPass, generate_load
from specbench.schemas.request import Prompt, RequestRecord
from tests.support.scripted_server import serve_app

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
MAX = 1 + 7  # one prefill token + one cycle of pattern 1,2,4


def new_record() -> RequestRecord:
    return RequestRecord(prompt_id="p0", dataset="d", config="c")


@pytest.fixture(params=["socket", "aiohttp", "openai"])
async def session(request):
    """Every client test runs over every transport: kernel-stamped sockets, aiohttp (TLS) and the openai SDK."""
    transport = open_transport("http://127.0.0.1", request.param)
    yield transport
    await close_transport(transport)


@pytest.fixture
async def raw_sse():
    """An in-test server whose /v1/chat/completions and /v1/completions reply with the given handler."""
    runners = []

    async def make(handler):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        app.router.add_post("/v1/completions", handler)
        runner, url = await serve_app(app, shutdown_timeout=0.1, handler_cancellation=True)
        runners.append(runner)
        return url

    yield make
    for r in runners:
        await r.cleanup()


def sse_handler(parts: list, *, delay: float = 0.0, stall_after: int | None = None):
    """Write each part: a dict → ``data: <json>\\n\\n``; bytes as they are."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, part in enumerate(parts):
            if stall_after is not None and i == stall_after:
                await asyncio.sleep(30)
            await resp.write(part if isinstance(part, bytes) else f"data: {json.dumps(part)}\n\n".encode())
            if delay:
                await asyncio.sleep(delay)
        await resp.write_eof()
        return resp

    return handler


def chat_chunk(text: str, done: int | None = None, finish: str | None = None, **choice) -> dict:
    msg: dict = {"id": "x", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish, **choice}]}
    if done is not None:
        msg["usage"] = {"prompt_tokens": 5, "completion_tokens": done, "total_tokens": 5 + done}
    return msg


async def run(session, url, **spec_kw) -> RequestRecord:
    spec = RequestSpec(base_url=url, model=spec_kw.pop("model", "smol"), **{"max_tokens": MAX, **spec_kw})
    return await stream_request(session, spec, MSGS, new_record())


# ---------------------------------------------------------------- token counts


async def test_continuous_usage_gives_exact_chunk_tokens(session, scripted):
    server, url = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.02, gap_s=0.01)
    rec = await run(session, url)
    assert rec.error is None and rec.ok
    assert rec.chunk_tokens == [1, 1, 2, 4]  # the role chunk carries no token and is not counted
    assert rec.token_source == SOURCE_USAGE
    assert rec.output_tokens == MAX
    assert rec.prompt_tokens is not None and rec.prompt_tokens > 0
    assert rec.finish_reason == "length"
    assert len(rec.chunk_times) == 4 and rec.chunk_times == sorted(rec.chunk_times)
    assert rec.ttft >= 0.02 and rec.latency >= rec.ttft + 3 * 0.01
    assert rec.text.split() == [w for w in rec.text.split() if w.startswith("t")] and len(rec.text.split()) == MAX
    body = server.bodies[-1]
    assert body["stream"] is True and body["messages"] == MSGS
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["max_tokens"] == MAX and body["temperature"] == 0.0 and body["model"] == "smol"


async def test_token_ids_fallback(session, scripted):
    _, url = await scripted(pattern=[2], usage_per_chunk=False, token_ids=True)
    rec = await run(session, url)
    assert rec.error is None
    assert rec.chunk_tokens == [1, 2, 2, 2, 1]  # max_tokens cuts the last step to one token
    assert rec.token_source == SOURCE_TOKEN_IDS
    assert rec.output_tokens == MAX  # from the final usage chunk
    assert rec.output_token_ids is not None and len(rec.output_token_ids) == MAX


async def test_usage_only_at_end_is_spread(session, scripted):
    _, url = await scripted(pattern=[1, 2, 4], usage_per_chunk=False)
    rec = await run(session, url)
    assert rec.error is None and rec.ok
    assert rec.token_source == SOURCE_USAGE_TOTAL
    assert rec.chunk_tokens == []
    assert len(rec.chunk_times) == 4 and rec.output_tokens == MAX


async def test_no_usage_and_no_ids_at_all(session, raw_sse):
    url = await raw_sse(sse_handler([chat_chunk("a"), chat_chunk("b"), b"data: [DONE]\n\n"]))
    rec = await run(session, url)
    assert rec.error is None and rec.ok and rec.text == "ab"
    assert rec.token_source == SOURCE_NONE and rec.chunk_tokens == [] and rec.output_tokens is None


# ---------------------------------------------------------------- failures go in record.error


async def test_http_500(session, scripted):
    _, url = await scripted(fault="http500", fault_on=(1,))
    rec = await run(session, url)
    assert rec.error.startswith("HTTP 500: ") and "scripted failure" in rec.error
    assert not rec.ok and rec.chunk_times == [] and rec.token_source == SOURCE_NONE


async def test_http_429_keeps_retry_after(session, scripted):
    _, url = await scripted(fault="http429", fault_on=(1,))
    rec = await run(session, url)
    assert rec.error.startswith("HTTP 429 (retry-after 1): ") and "slow down" in rec.error


async def test_http_error_without_body(session, raw_sse):
    async def handler(request):
        return web.Response(status=503)

    rec = await run(session, await raw_sse(handler))
    assert rec.error == "HTTP 503"


async def test_malformed_sse(session, scripted):
    _, url = await scripted(pattern=[1], fault="malformed", fault_on=(1,))
    rec = await run(session, url)
    assert rec.error.startswith("malformed SSE data")
    assert not rec.ok
    assert rec.chunk_tokens[:2] == [1, 1]  # what arrived before the bad line is kept


async def test_stall_times_out(session, raw_sse):
    url = await raw_sse(sse_handler([chat_chunk("a", 1), chat_chunk("b", 2), b"data: [DONE]\n\n"], stall_after=1))
    # the stall lasts 30 s: ending within the 25 s guard proves the timeout cut it (1 s: room for the first chunk
    # on a busy machine)
    rec = await asyncio.wait_for(run(session, url, timeout_s=1.0), 25)
    assert rec.error == "timeout after 1 s"
    assert len(rec.chunk_times) == 1 and not rec.ok


async def test_connection_dropped_mid_stream(session, scripted):
    _, url = await scripted(pattern=[1], fault="drop", fault_on=(1,))
    rec = await run(session, url)
    port = url.rpartition(":")[2]
    expected = {Wire: f"WireError: 127.0.0.1:{port}", Sdk: f"APIConnectionError: 127.0.0.1:{port}: RemoteProtocolError"}
    assert rec.error is not None and rec.error.startswith(expected.get(type(session), "ClientPayloadError")), rec.error
    if isinstance(session, Wire):
        assert rec.error.endswith("server closed the connection mid-response")
    assert not rec.ok


async def test_connection_refused(session):
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = await run(session, f"http://127.0.0.1:{port}")
    if isinstance(session, Wire):
        assert rec.error == f"WireError: 127.0.0.1:{port}: cannot connect: Connection refused"
    elif isinstance(session, Sdk):
        assert rec.error.startswith(f"APIConnectionError: 127.0.0.1:{port}: ConnectError"), rec.error
    else:
        assert rec.error.startswith("ClientConnectorError")
    assert not rec.ok


async def test_error_object_in_stream(session, raw_sse):
    url = await raw_sse(sse_handler([chat_chunk("a", 1), {"error": {"message": "engine died", "code": 500}}]))
    rec = await run(session, url)
    assert rec.error == "server error in stream: engine died"


async def test_right_json_wrong_shape_is_malformed_not_an_exception(session, raw_sse):
    url = await raw_sse(sse_handler([{"choices": [{"delta": {"content": "a"}}]}, {"choices": [], "usage": 5}]))
    rec = await run(session, url)
    assert rec.error.startswith("malformed SSE data: unexpected shape (AttributeError") and not rec.ok


async def test_error_body_that_is_not_utf8(session, raw_sse):
    async def handler(request):
        await request.read()
        return web.Response(status=502, body=b"\xff\xfebad gateway")

    rec = await run(session, await raw_sse(handler))
    assert rec.error.startswith("HTTP 502: ") and rec.error.endswith("bad gateway")


async def test_only_done_means_no_content(session, raw_sse):
    url = await raw_sse(sse_handler([b"data: [DONE]\n\n"]))
    rec = await run(session, url)
    assert rec.error == "no content chunk received" and not rec.ok


@pytest.mark.parametrize("payload", [b"data: null\n\n", b"data: [1, 2]\n\n", b'data: "text"\n\n'])
async def test_non_object_json_is_malformed_not_an_exception(session, raw_sse, payload):
    url = await raw_sse(sse_handler([chat_chunk("a", 1), payload, b"data: [DONE]\n\n"]))
    rec = await run(session, url)
    assert rec.error is not None and rec.error.startswith("malformed SSE data")


# ---------------------------------------------------------------- SSE framing


async def test_comments_event_lines_crlf_and_done(session, raw_sse):
    parts = [
        b": keep-alive ping\n\n",
        b"event: message\n",
        f"data: {json.dumps(chat_chunk('', 0))}\n\n".encode(),  # role-like chunk: no text, no token
        f"data:{json.dumps(chat_chunk('Hel', 1))}\n\n".encode(),  # no space after the colon
        f"data: {json.dumps(chat_chunk('lo', 3))}\r\n\r\n".encode(),  # CRLF framing, two tokens
        b": another comment\n\n",
        f"data: {json.dumps(chat_chunk('!', 4, finish='stop'))}\n\n".encode(),
        b'data: {"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}\n\n',
        b"data: [DONE]\n\n",
        b"data: {this is after DONE and never parsed\n\n",
    ]
    rec = await run(session, await raw_sse(sse_handler(parts)))
    assert rec.error is None
    assert rec.text == "Hello!"
    assert rec.chunk_tokens == [1, 2, 1] and rec.token_source == SOURCE_USAGE
    assert rec.output_tokens == 4 and rec.prompt_tokens == 5 and rec.finish_reason == "stop"


async def test_reasoning_content_counts_as_content(session, raw_sse):
    first = {"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}], "usage": {"completion_tokens": 2}}
    parts = [first, chat_chunk(" answer", 3), b"data: [DONE]\n\n"]
    rec = await run(session, await raw_sse(sse_handler(parts)))
    assert rec.text == "think answer" and rec.chunk_tokens == [2, 1]


async def test_spec_stats_from_terminal_chunk(session, raw_sse):
    stats = {"mean_acceptance_length": 2.5, "num_spec_steps": 2, "num_accepted_draft_tokens": 3, "num_draft_tokens": 6}
    parts = [chat_chunk("a", 1), chat_chunk("bcd", 4, finish="length", speculative_decoding_stats=stats),
             b"data: [DONE]\n\n"]
    rec = await run(session, await raw_sse(sse_handler(parts)))
    assert rec.spec_stats == stats and rec.finish_reason == "length"


# ---------------------------------------------------------------- request shape


async def test_completions_endpoint_sends_prompt(session, scripted):
    server, url = await scripted(pattern=[1, 2, 4])
    rec = await run(session, url, endpoint="completions")
    assert rec.error is None and rec.chunk_tokens == [1, 1, 2, 4]
    body = server.bodies[-1]
    assert "messages" not in body
    assert body["prompt"] == "be brief\n\nhello there"
    assert len(rec.text.split()) == MAX  # text comes from choice.text


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
async def test_second_turn_feeds_the_first_answer_back_on_both_endpoints(session, scripted, endpoint):
    server, url = await scripted(pattern=[1, 2, 4])
    spec = RequestSpec(base_url=url, model="smol", max_tokens=MAX, endpoint=endpoint)
    prompt = Prompt(id="mt", dataset="d", turns=("hello there", "and then?"), system="be brief")
    res = await generate_load(session, spec, [prompt], LoadPass("c"))
    first, second = res.records
    assert first.ok and second.ok and first.text and second.turn == 1
    if endpoint == "chat":
        assert server.bodies[1]["messages"] == [
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"},
            {"role": "assistant", "content": first.text}, {"role": "user", "content": "and then?"}]
    else:  # the text the model saw and wrote, then the next turn
        assert server.bodies[0]["prompt"] == "be brief\n\nhello there"
        assert server.bodies[1]["prompt"] == "be brief\n\nhello there" + first.text + "\n\nand then?"


async def test_bearer_header_only_with_api_key(session, scripted):
    server, url = await scripted()
    await run(session, url, api_key="sk-test-123")
    assert server.headers[-1]["Authorization"] == "Bearer sk-test-123"
    await run(session, url)
    assert "Authorization" not in server.headers[-1]


async def test_payload_options_and_extra_body(session, scripted):
    server, url = await scripted()
    await run(session, url, top_p=0.9, ignore_eos=True, temperature=0.7,
              extra_body={"return_token_ids": True, "max_tokens": 5})
    body = server.bodies[-1]
    assert body["top_p"] == 0.9 and body["ignore_eos"] is True and body["temperature"] == 0.7
    assert body["return_token_ids"] is True and body["max_tokens"] == 5  # extra_body wins


def test_request_spec_url_and_defaults():
    assert RequestSpec("http://h:1/", "m").url == "http://h:1/v1/chat/completions"
    assert RequestSpec("http://h:1", "m", endpoint="completions").url == "http://h:1/v1/completions"
    body = RequestSpec("http://h:1", "m").payload([{"role": "user", "content": "q"}]).to_dict()
    assert "top_p" not in body and "ignore_eos" not in body
    assert RequestSpec("http://h:1", "m").headers() == {"Content-Type": "application/json", "Accept-Encoding": "identity"}


# ---------------------------------------------------------------- the parser without I/O


def test_stream_parser_on_recorded_payloads():
    s = ResponseStream(new_record(), "chat")
    assert s.feed(json.dumps(chat_chunk("", 0)).encode(), 1.0)
    assert s.feed(json.dumps(chat_chunk("ab", 2)).encode(), 1.5)
    assert s.feed(json.dumps(chat_chunk("cde", 5)).encode(), 1.7)
    assert s.feed(b'{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}}', 1.8)
    assert s.feed(b"[DONE]", 1.9) is False
    rec = s.finish()
    assert rec.chunk_times == [1.5, 1.7] and rec.chunk_tokens == [2, 3]
    assert rec.output_tokens == 5 and rec.prompt_tokens == 9 and rec.text == "abcde"


def test_stream_parser_reads_cached_prompt_tokens_from_the_final_usage():
    s = ResponseStream(new_record(), "chat")
    s.feed(json.dumps(chat_chunk("ab", 2)).encode(), 1.5)
    s.feed(b'{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, '
           b'"prompt_tokens_details": {"cached_tokens": 8}}}', 1.8)
    rec = s.finish()
    assert rec.cached_tokens == 8 and rec.token_warning is None and rec.error is None
    assert "cached_tokens" in rec.to_dict()
    plain = ResponseStream(new_record(), "chat")
    plain.feed(json.dumps(chat_chunk("ab", 2)).encode(), 1.5)
    plain.feed(b'{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {}}}', 1.8)
    rec = plain.finish()
    assert rec.cached_tokens is None and "cached_tokens" not in rec.to_dict()  # not reported: no key, the line as before


async def test_cached_prompt_tokens_over_every_transport(session, scripted):
    """The second request with the same messages finds all but its last block of 4 words in the server's cache."""
    server, url = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.02, gap_s=0.01, prefix_cache=4)
    first, second = await run(session, url), await run(session, url)
    assert first.ok and second.ok and first.prompt_tokens == second.prompt_tokens
    assert first.cached_tokens == 0 and second.cached_tokens == (second.prompt_tokens - 1) // 4 * 4 > 0
    assert server.cache.hits == second.cached_tokens


def test_stream_parser_mixed_known_and_unknown_counts_falls_back_to_spread():
    s = ResponseStream(new_record(), "completions")
    s.feed(b'{"choices": [{"text": "a", "token_ids": [7]}]}', 1.0)
    s.feed(b'{"choices": [{"text": "bc"}]}', 1.1)  # no ids, no usage: unknown
    s.feed(b'{"choices": [], "usage": {"completion_tokens": 3}}', 1.2)
    rec = s.finish()
    assert rec.token_source == SOURCE_USAGE_TOTAL and rec.chunk_tokens == [] and rec.output_tokens == 3
    assert rec.output_token_ids == [7]


async def test_sse_lines_split_across_reads_and_several_lines_per_read(session, raw_sse):
    """The client reads whatever the socket delivers: an event cut in three writes is reassembled,
    two events in one write are both seen, and a last event without a trailing newline still counts."""
    one = f"data: {json.dumps(chat_chunk('Hel', 1))}\n\n".encode()
    two = f"data: {json.dumps(chat_chunk('lo', 3))}\n\n".encode()
    three = f"data: {json.dumps(chat_chunk('!', 4, finish='stop'))}\n\n".encode()
    last = b'data: {"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}'
    url = await raw_sse(sse_handler([one[:7], one[7:30], one[30:], two + three, last], delay=0.02))
    rec = await run(session, url)
    assert rec.error is None and rec.text == "Hello!"
    assert rec.chunk_tokens == [1, 2, 1] and rec.output_tokens == 4
    assert rec.chunk_times[0] - rec.send_time >= 0.04  # stamped when its last piece arrived
