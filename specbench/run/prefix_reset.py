"""``load.prefix_cache: reset``: the server's prefix cache emptied after each warm-up, right before each timed pass, so
that no prompt an earlier pass or the warm-up sent is served from it (with ``keep``, a sweep that sends the same
prompts at every load point measures a later point's TTFT on cached prompts).

The endpoint and how its answer reads are the launcher's (``prefix_cache_reset``): vLLM's ``POST
/reset_prefix_cache`` (mounted only with ``VLLM_SERVER_DEV_MODE=1``; ``{"success": bool}``, false while blocks are
held), SGLang's ``POST /flush_cache`` (200 once flushed, 400 while requests run or wait). What the server answers is
untrusted: read here, where it enters; a refusal is tried again briefly, anything else is one line naming the URL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aiohttp

from ..errors import ServerError
from ..util.bounded import PROBE_LIMIT, read_capped
from ..util.redact import mask_values, redact_url
from .servers import Server

#: a refused reset (blocks still held: a request the engine has not freed yet) is asked again this many times in all,
#: this far apart: a pass begins only after its warm-up ended, so a refusal that outlasts this is not a moment's
RESET_TRIES, RESET_WAIT_S = 10, 0.5
RESET_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ResetAnswer:
    """What one answer said: the cache is empty (``done``), or the server refused for now (``why``)."""

    done: bool
    why: str | None = None


def _shown(body: bytes, secrets: Sequence[str]) -> str:
    """The server's text for a one-line error: its known secrets masked before the cut (which could keep a head)."""
    text = mask_values(" ".join(body.decode("utf-8", "replace").split()), list(secrets))
    return "an empty body" if not text else repr(text[:120] + ("…" if len(text) > 120 else ""))


def read_reset_answer(answer: str, status: int, body: bytes, secrets: Sequence[str] = ()) -> ResetAnswer:
    """An answer read by the launcher's rule (``launch.launcher.RESET_ANSWERS``); ValueError for one that says
    neither a reset nor a refusal (``secrets``: masked in the server's text it quotes)."""
    if answer == "status":  # SGLang: 400 while requests run or wait, its reason in the text
        if status in (200, 400):
            return ResetAnswer(status == 200, None if status == 200 else f"HTTP 400: {_shown(body, secrets)}")
        raise ValueError(f"HTTP {status}: {_shown(body, secrets)}")
    if status != 200:
        raise ValueError(f"HTTP {status}: {_shown(body, secrets)}")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    success = data.get("success") if isinstance(data, dict) else None
    if not isinstance(success, bool):
        raise ValueError(f'answered {_shown(body, secrets)}, not {{"success": true|false}}: whether the cache was emptied is '
                         "unknown (vLLM before 0.26 does not say)")
    return ResetAnswer(success, None if success else '{"success": false}: blocks still held, e.g. by running requests')


def _enable(env: Mapping[str, str]) -> str:
    needs = " ".join(f"{k}={v}" for k, v in env.items())
    started = f"start the server with {needs} (specbench sets it on the servers it launches), or " if needs else ""
    return f"{started}set load.prefix_cache: keep"


async def reset_prefix_cache(session: aiohttp.ClientSession, server: Server, secrets: Sequence[str] = ()) -> int:
    """Empty ``server``'s prefix cache; the tries it took. No endpoint (404/405), a refusal past ``RESET_TRIES``, an
    answer that says neither: ``ServerError``, one line naming the URL (``secrets``: masked in the server's text)."""
    reset, name = server.engine.prefix_cache_reset, server.config.name
    if reset.path is None:
        raise ServerError(f"config {name!r}: load.prefix_cache reset: engine {server.engine.name} has no reset endpoint "
                          f"(its launcher {server.engine.path} has no prefix_cache_reset.path); set load.prefix_cache: keep")
    url = server.url + reset.path
    where = f"config {name!r}: load.prefix_cache reset: POST {redact_url(url)}"
    why = None
    for attempt in range(RESET_TRIES):
        if attempt:
            await asyncio.sleep(RESET_WAIT_S)
        try:
            async with session.post(url, timeout=aiohttp.ClientTimeout(total=RESET_TIMEOUT_S)) as r:
                status, body = r.status, await read_capped(r, PROBE_LIMIT)
        except ValueError as err:  # past the cap
            raise ServerError(f"{where}: {err}") from None
        except (TimeoutError, aiohttp.ClientError) as err:
            raise ServerError(redact_url(f"{where}: {type(err).__name__} {err}".rstrip())) from None
        if status in (404, 405):
            raise ServerError(f"{where}: HTTP {status}: the server has no prefix-cache reset; {_enable(reset.env)}")
        try:
            answer = read_reset_answer(reset.answer, status, body, secrets)
        except ValueError as err:
            raise ServerError(f"{where}: {err}") from None
        if answer.done:
            return attempt + 1
        why = answer.why
    raise ServerError(f"{where}: refused {RESET_TRIES} times, {RESET_WAIT_S:g} s apart ({why}); the pass was not measured")
