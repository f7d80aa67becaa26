"""A small real tiktoken encoding file: the 256 single bytes plus a few merges, in tiktoken's format
(one ``base64(token) rank`` line each). Tests point ``load.tiktoken_file`` at it, with its sha256 standing
in for o200k_base's, so counting runs through real tiktoken without the 3.6 MB file nobody may download."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

#: merged tokens after the single bytes: "the" and " cat" become one token each (o200k_base's pattern
#: splits "the cat" into "the", " cat")
MERGES = [b"th", b"he", b"the", b" c", b"at", b" cat"]


def write_encoding(path: Path) -> str:
    """Write the encoding file; its sha256."""
    tokens = [bytes([b]) for b in range(256)] + MERGES
    data = b"".join(base64.b64encode(t) + b" " + str(rank).encode() + b"\n" for rank, t in enumerate(tokens))
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()
