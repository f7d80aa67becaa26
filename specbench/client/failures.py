"""How a response can fail on either transport (socket or aiohttp), and the bounds on what a server
may send: one exception type per cause, each a line naming what happened."""

from __future__ import annotations

from ..util.redact import mask_values

#: the most of a non-200 body kept (both transports): enough for the server's message, the rest is not read
ERROR_BODY_LIMIT = 4096
#: a response's status line and headers must end within its first this many bytes (llhttp has no bound of its own)
HEAD_LIMIT = 64 << 10


class WireError(Exception):
    """The connection failed before the response ended (names host:port and what happened)."""


class TooMuch(Exception):
    """A server sent more than a response may hold (an SSE line, a body, a head): fails that request,
    the same way on both transports, before the harness buffers it."""

    def __init__(self, what: str, limit: int) -> None:
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
        super().__init__(f"server sent too much: {what} over {size}")


class EncodedResponse(WireError):
    """A 200 stream in a content encoding although identity was asked: refused by both transports
    (decoding would stamp chunks when the compressor let them out, not when the server sent them)."""

    def __init__(self, encoding: str) -> None:
        super().__init__(f"response is {encoding}-encoded although identity was asked (Accept-Encoding: identity): "
                         "refused, chunk times would include the compressor's buffering")


def http_error(status: int, detail: str, retry: str | None, secrets: tuple[str, ...]) -> str:
    """A non-200 answer as one line, the same on every transport: ``HTTP 400 (retry-after 1): <server message>``."""
    detail = mask_values(detail, secrets)  # before the cut, which could leave a secret's head
    detail = detail[:200].replace("\n", " ")
    return f"HTTP {status}" + (f" (retry-after {retry})" if retry else "") + (f": {detail}" if detail else "")
