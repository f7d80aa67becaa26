"""Token counts for the sets built to a length: o200k_base tokens (what the harness counts a prompt in,
``measure/o200k.py``), or a documented approximation (``tokenizer: chars``: 4 characters a token).

The encoding file is found and checked by the run stage (``run.o200k_file.find_o200k``) and passed in,
so this stage never looks for it or downloads it. The counting rule is a suite key, never a fallback
chosen by what a machine has: the same entry gives the same bytes everywhere, or a one-line error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..errors import DatasetError

CHARS_PER_TOKEN = 4
TOKENIZERS = ("o200k", "chars")


class Encoding(Protocol):
    """What is used of a ``tiktoken.Encoding``."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes: ...


class TokenFile(Protocol):
    """The run stage's o200k_base file (``measure.o200k.O200k``): the encoding, or why there is none."""

    @property
    def encoding(self) -> Encoding | None: ...

    @property
    def error(self) -> str | None: ...


class Tokens:
    """Counts and cuts text in o200k_base tokens, or in 4-character tokens without an encoding."""

    def __init__(self, encoding: Encoding | None) -> None:
        self.encoding = encoding
        self.name = "o200k_base" if encoding is not None else f"{CHARS_PER_TOKEN} characters a token"

    def count(self, text: str) -> int:
        if self.encoding is None:
            return -(-len(text) // CHARS_PER_TOKEN)
        return len(self.encoding.encode_ordinary(text))

    def fit(self, text: str, target: int) -> str | None:
        """The head of ``text`` cut at a token that counts exactly ``target`` tokens on its own (o200k: the
        first b tokens decoded, a character cut in two dropped, b moved by the miss until the head counts
        ``target``, else the closest under it); None when ``text`` is shorter."""
        if self.encoding is None:
            chars = target * CHARS_PER_TOKEN
            return text[:chars] if len(text) >= chars else None
        ids = self.encoding.encode_ordinary(text)
        if len(ids) < target:
            return None
        best: tuple[int, str] | None = None
        tried: set[int] = set()
        b = target
        while 0 < b <= len(ids) and len(tried) < 16:
            tried.add(b)
            head = self.encoding.decode_bytes(ids[:b]).decode("utf-8", errors="ignore")
            n = self.count(head)
            if n == target:
                return head
            if n < target and (best is None or n > best[0]):
                best = (n, head)
            b += target - n
            if b in tried:  # the miss points back to a cut already tried: step below them all
                b = min(tried) - 1
        return best[1] if best else None


def tokens_for(name: str, tokenizer: str, o200k: TokenFile | None) -> Tokens:
    """The counter data set ``name`` asked for (its ``tokenizer:``), or a one-line error naming the key."""
    if tokenizer == "chars":
        return Tokens(None)
    encoding = o200k.encoding if o200k is not None else None
    if encoding is None:
        why = (o200k.error if o200k is not None else None) or "no o200k_base file was given"
        raise DatasetError(
            f"data set '{name}': tokenizer: o200k counts o200k_base tokens, but {why}; point load.tiktoken_file or "
            f"SPECBENCH_TIKTOKEN_FILE at o200k_base.tiktoken, or set tokenizer: chars ({CHARS_PER_TOKEN} characters a token)")
    return Tokens(encoding)
