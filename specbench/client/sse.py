"""Server-sent events: ``data:`` payloads out of a body that arrives in pieces split anywhere."""

from __future__ import annotations

from collections.abc import Callable


class SseLines:
    """SSE ``data:`` payloads out of body pieces split anywhere; every line completed by a piece
    gets that piece's stamp. One splitter for both transports."""

    __slots__ = ("on_data", "rest")

    def __init__(self, on_data: Callable[[bytes, float], bool]) -> None:
        self.on_data, self.rest = on_data, b""

    def feed(self, piece: bytes, stamp: float) -> bool:
        """False once ``on_data`` says the stream is done ([DONE])."""
        lines = (self.rest + piece if self.rest else piece).split(b"\n")
        self.rest = lines.pop()
        on_data = self.on_data
        for line in lines:
            if line[:5] == b"data:" and not on_data(line[5:].strip(), stamp):
                return False
        return True

    def end(self, stamp: float) -> None:
        """The body ended without a final newline: its last line still counts."""
        if self.rest[:5] == b"data:":
            self.on_data(self.rest[5:].strip(), stamp)
