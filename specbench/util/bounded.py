"""Bounded reads of what a server answers on its side endpoints (/metrics, readiness, version)."""

from __future__ import annotations

import aiohttp

#: the most a side endpoint may answer: a /metrics page of a large multi-engine server is a few MB
METRICS_LIMIT = 32 << 20
PROBE_LIMIT = 4 << 20


async def read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, or ValueError past ``limit`` bytes: a hostile or broken server must not be able to
    make the harness buffer gigabytes."""
    pieces, size = [], 0
    async for piece in resp.content.iter_chunked(1 << 16):
        size += len(piece)
        if size > limit:
            raise ValueError(f"answer larger than {limit >> 20} MiB")
        pieces.append(piece)
    return b"".join(pieces)
