"""Fail fast where the answer cannot change: when every warm-up request of a config got the same
client error (HTTP 4xx: a missing chat template, an unknown parameter, a wrong model name), every
measured request would get it too, so the config stops after its warm-up with the server's own
message. A timeout (408) or a rate limit (429) can answer otherwise a moment later, so it does not count."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..schemas.request import RequestRecord
from ..util.redact import redact_url

_CLIENT_ERROR = re.compile(r"HTTP (4\d\d)(?: \(retry-after [^)]*\))?(?:: (.*))?", re.S)
_TRANSIENT = {408, 429}
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)("?)')
MESSAGE_CHARS = 300


def server_message(detail: str) -> str:
    """The ``message`` of an OpenAI-style error body (``{"message": …}`` or ``{"error": {"message": …}}``),
    also from a body cut short; else the body as sent. One line, at most ``MESSAGE_CHARS``, URL passwords masked."""
    found = _MESSAGE.search(detail)
    text = detail
    if found:
        try:
            text = json.loads(f'"{found[1]}"')
        except ValueError:
            text = found[1]
        if not found[2]:
            text += " …"  # the body was cut inside the message
    text = " ".join(text.split())
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS - 2] + " …"
    return redact_url(text)


def refusal(records: Sequence[RequestRecord]) -> str | None:
    """``HTTP 4xx: <the server's message>`` when every record failed with one and the same client
    error, else None."""
    errors = {r.error for r in records}
    if len(errors) != 1:
        return None
    error = errors.pop()
    match = _CLIENT_ERROR.fullmatch(error or "")
    if match is None or int(match[1]) in _TRANSIENT:
        return None
    message = server_message(match[2] or "")
    return f"HTTP {match[1]}" + (f": {message}" if message else "")
