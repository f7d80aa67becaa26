"""Server-sent events: ``data:`` payloads out of a body that arrives in pieces split anywhere.

What a server sends is bounded here, for both transports alike: a line longer than ``LINE_LIMIT``
or a body longer than ``BODY_LIMIT`` fails the request (``TooMuch``) before the harness holds it.
Each byte is scanned once and copied at most twice (the slice that holds it, the join that ends a
line that spans pieces), so a line split over many reads costs what it weighs, not its square.
"""

from __future__ import annotations

from collections.abc import Callable

from .failures import TooMuch

#: the longest SSE line accepted: a chunk is a few hundred bytes; its token ids or logprobs a few KiB
LINE_LIMIT = 4 << 20
#: the most body one streamed answer may carry: ~300 bytes a chunk, 3× a 128k-token answer
BODY_LIMIT = 128 << 20


class SseLines:
    """SSE ``data:`` payloads out of body pieces split anywhere; every line completed by a piece
    gets that piece's stamp. One splitter for both transports."""

    __slots__ = ("on_data", "head", "held", "size")

    def __init__(self, on_data: Callable[[bytes, float], bool]) -> None:
        self.on_data = on_data
        self.head: list[bytes] = []  # the pieces of a line not ended yet, as they came (joined once, at its end)
        self.held = 0  # their length
        self.size = 0  # body bytes so far

    def feed(self, piece: bytes, stamp: float) -> bool:
        """False once ``on_data`` says the stream is done ([DONE])."""
        self.size += len(piece)
        if self.size > BODY_LIMIT:
            raise TooMuch("a response body", BODY_LIMIT)
        lines = piece.split(b"\n")
        if len(piece) > LINE_LIMIT and max(map(len, lines)) > LINE_LIMIT:
            raise TooMuch("an SSE line", LINE_LIMIT)
        if self.head:  # the first line began in an earlier piece
            self.head.append(lines[0])
            self.held += len(lines[0])
            if self.held > LINE_LIMIT:
                raise TooMuch("an SSE line", LINE_LIMIT)
            if len(lines) == 1:
                return True
            lines[0] = b"".join(self.head)
            self.head, self.held = [], 0
        tail = lines.pop()
        if tail:
            self.head.append(tail)
            self.held = len(tail)
        on_data = self.on_data
        for line in lines:
            if line[:5] == b"data:" and not on_data(line[5:].strip(), stamp):
                return False
        return True

    def end(self, stamp: float) -> None:
        """The body ended without a final newline: its last line still counts."""
        line = b"".join(self.head)
        if line[:5] == b"data:":
            self.on_data(line[5:].strip(), stamp)
