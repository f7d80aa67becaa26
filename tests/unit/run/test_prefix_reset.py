"""A prefix-cache reset's answer, read where it enters (run/prefix_reset.py): vLLM's {"success": bool}, SGLang's
status; anything else is a one-line error, never a reset taken on trust."""

import pytest

from specbench.run.prefix_reset import ResetAnswer, read_reset_answer

SGLANG_BUSY = b"Cache flushed.\n(When there are running or waiting requests, the operation will not be performed.)\n"


@pytest.mark.parametrize("status, body, expect", [
    (200, b'{"success": true}', ResetAnswer(True)),
    (200, b'{"success": false}', ResetAnswer(False, '{"success": false}: blocks still held, e.g. by running requests')),
])
def test_vllm_success_answer(status, body, expect):
    assert read_reset_answer("success", status, body) == expect


@pytest.mark.parametrize("status, body, said", [
    (200, b"", "answered an empty body, not {\"success\": true|false}"),  # vLLM before 0.26: no word either way
    (200, b'{"success": "yes"}', "answered '{\"success\": \"yes\"}'"),
    (200, b'[true]', "answered '[true]'"),
    (200, b"[" * 100_000, "answered '" + "[" * 120 + "…'"),  # too deep to parse; cut in the message
    (500, b"Internal Server Error", "HTTP 500: 'Internal Server Error'"),
])
def test_vllm_answer_that_says_neither_is_refused(status, body, said):
    with pytest.raises(ValueError) as err:
        read_reset_answer("success", status, body)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_sglang_status_answer():
    assert read_reset_answer("status", 200, b"Cache flushed.\n") == ResetAnswer(True)
    busy = read_reset_answer("status", 400, SGLANG_BUSY)
    assert not busy.done and busy.why is not None and busy.why.startswith("HTTP 400: 'Cache flushed. (When there are running")
    with pytest.raises(ValueError, match="HTTP 503: an empty body"):
        read_reset_answer("status", 503, b"")


def test_secrets_in_the_servers_text_are_masked_before_the_cut():
    key = "sk-reset-secret-1234"
    with pytest.raises(ValueError) as err:
        read_reset_answer("success", 401, b"x" * 100 + f"Bearer {key}".encode(), [key])
    assert key not in str(err.value) and key[:6] not in str(err.value)
