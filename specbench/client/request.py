"""What one request sends: built once per suite so the hot path only fills in messages."""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..util.redact import split_credentials
from .checks import TOKEN_CAP
from .wire import Target


@dataclass(frozen=True)
class RequestSpec:
    """What to send; built once per suite so the hot path only fills in messages."""

    base_url: str
    model: str
    endpoint: str = "chat"
    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float | None = None
    ignore_eos: bool = False
    timeout_s: float = 600.0
    extra_body: dict[str, Any] | None = None
    api_key: str | None = None

    @property
    def url(self) -> str:
        path = "/v1/chat/completions" if self.endpoint == "chat" else "/v1/completions"
        return split_credentials(self.base_url)[0].rstrip("/") + path

    @functools.cached_property
    def target(self) -> Target:
        return Target.parse(self.url)

    def headers(self) -> dict[str, str]:
        return self._headers

    @functools.cached_property
    def _headers(self) -> dict[str, str]:
        # identity: a compressed stream's chunk times would be the compressor's, not the server's
        h = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        basic = split_credentials(self.base_url)[1]
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        elif basic:
            h["Authorization"] = basic
        return h

    @functools.cached_property
    def secrets(self) -> tuple[str, ...]:
        """What a server echoing the request back must not get into a file: the API key, or the
        URL's Basic credentials (the header's token and the password itself)."""
        found: list[str | None] = [self.api_key]
        basic = split_credentials(self.base_url)[1]
        if basic:
            token = basic.removeprefix("Basic ")
            found += [token, base64.b64decode(token).decode(errors="replace").partition(":")[2]]
        return tuple(sorted({s for s in found if s and len(s) >= 4}, key=len, reverse=True))

    @functools.cached_property
    def token_limit(self) -> int:
        """The most completion tokens an answer may have: the max_tokens sent (extra_body's wins)."""
        extra = self.extra_body or {}
        limit = extra.get("max_completion_tokens") or extra.get("max_tokens", self.max_tokens)
        return limit if type(limit) is int and 0 < limit <= TOKEN_CAP else TOKEN_CAP

    def payload(self, messages: list[dict[str, str]]) -> RequestBody:
        return RequestBody(model=self.model, max_tokens=self.max_tokens, temperature=self.temperature,
                           messages=messages if self.endpoint == "chat" else None,
                           prompt=None if self.endpoint == "chat" else completion_prompt(messages),
                           top_p=self.top_p, ignore_eos=self.ignore_eos, extra=self.extra_body or {})


@dataclass(frozen=True)
class RequestBody:
    """One request's JSON body: the chat ``messages`` or the completions ``prompt``, the sampling
    settings, and the suite's ``extra_body`` over them (its keys win, as a server would read them)."""

    model: str
    max_tokens: int
    temperature: float
    messages: list[dict[str, str]] | None
    prompt: str | None
    top_p: float | None
    ignore_eos: bool
    extra: Mapping[str, object]

    def to_dict(self) -> dict[str, object]:
        """The body as it is sent: streamed, with usage on every chunk."""
        body: dict[str, object] = {
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.messages is not None:
            body["messages"] = self.messages
        else:
            body["prompt"] = self.prompt
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.extra:
            body.update(self.extra)
        return body


def completion_prompt(messages: list[dict[str, str]]) -> str:
    """The messages as one completions prompt: each turn after a blank line, each of the model's
    answers right after the prompt it continued, as it wrote it (the text the model saw and wrote)."""
    prompt = ""
    for m in messages:
        if m["role"] == "assistant":
            prompt += m["content"]
        else:
            prompt = f"{prompt}\n\n{m['content']}" if prompt else m["content"]
    return prompt
