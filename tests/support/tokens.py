"""Prompt token counts for servers whose responses do not report them (test support; the product's o200k
counts are specbench/measure/o200k.py and specbench/run/o200k_file.py, which this builds on).

First choice is tiktoken ``o200k_base`` (the tokenizer SPEED-Bench and Artificial-Analysis-style
normalised throughput use), but only when its encoding file is already on disk (``find_o200k``: never
downloaded). Second choice is the server's own
``POST /tokenize`` (vLLM). Every count carries its source so reports can say which was used.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.measure.o200k import O200K_URL
from specbench.run.o200k_file import O200K_SHA256, cache_file, find_o200k

__all__ = ["O200K_SHA256", "O200K_URL", "PromptTokenCounter", "local_encoding", "o200k_cache_file"]

if TYPE_CHECKING:
    import aiohttp
    import tiktoken

TIKTOKEN_SOURCE = "tiktoken:o200k_base"
SERVER_SOURCE = "server:/tokenize"


def o200k_cache_file(env: Mapping[str, str] = os.environ, sha256: str = O200K_SHA256) -> Path | None:
    """tiktoken's cached o200k file when present and intact (the product's rule: run/o200k_file.py), else None."""
    path = cache_file(env)
    try:
        intact = path is not None and path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return None
    return path if intact else None


def local_encoding() -> tiktoken.Encoding | None:
    """The o200k encoding if it can be built without the network (``specbench.run.o200k_file.find_o200k``)."""
    return find_o200k().encoding


def server_root(base_url: str) -> str:
    """``/tokenize`` lives at the server root, not under the OpenAI ``/v1`` prefix."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class PromptTokenCounter:
    """Counts prompt tokens with tiktoken if available offline, else the server's ``/tokenize``.

    A failing ``/tokenize`` (404 on servers without it, timeout) is tried once and then disabled,
    so a run never slows down asking for counts the server cannot give.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession | None = None,
        base_url: str | None = None,
        model: str | None = None,
        *,
        use_tiktoken: bool = True,
        timeout_s: float = 10.0,
    ) -> None:
        self.encoding = local_encoding() if use_tiktoken else None
        self.session = session
        self.url = f"{server_root(base_url)}/tokenize" if base_url else None
        self.model = model
        self.timeout_s = timeout_s
        self.last_error: str | None = None
        self._server_ok = session is not None and self.url is not None

    @property
    def source(self) -> str | None:
        if self.encoding is not None:
            return TIKTOKEN_SOURCE
        return SERVER_SOURCE if self._server_ok else None

    async def count(self, text: str) -> tuple[int | None, str | None]:
        """(token count, source) or (None, None) when neither counter is available."""
        if self.encoding is not None:
            return len(self.encoding.encode(text, disallowed_special=())), TIKTOKEN_SOURCE
        if not self._server_ok:
            return None, None
        n = await self._tokenize(text)
        return (n, SERVER_SOURCE) if n is not None else (None, None)

    async def _tokenize(self, text: str) -> int | None:
        import aiohttp

        assert self.session is not None and self.url is not None  # count() asks only while _server_ok
        payload: dict[str, Any] = {"prompt": text}
        if self.model:
            payload["model"] = self.model
        try:
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            async with self.session.post(self.url, json=payload, timeout=timeout) as resp:
                if resp.status != 200:
                    self._disable(f"{self.url}: HTTP {resp.status}")
                    return None
                body = await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            self._disable(f"{self.url}: {type(exc).__name__}: {exc}")
            return None
        count = body.get("count") if isinstance(body, dict) else None
        if count is None and isinstance(body, dict) and isinstance(body.get("tokens"), list):
            count = len(body["tokens"])
        if not isinstance(count, int) or isinstance(count, bool):
            self._disable(f"{self.url}: response has no token count")
            return None
        return count

    def _disable(self, error: str) -> None:
        self._server_ok = False
        self.last_error = error
        return None
