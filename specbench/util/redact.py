"""The one place that decides what is a secret, so nothing secret reaches a file, a log or the terminal.

A name is secret when one of its parts (split at ``-``, ``_``, ``.`` and spaces) is, or ends in, one
of ``key``, ``token``, ``secret``, ``password``, ``passwd``, ``credential(s)``, ``auth``, or is
``authorization``/``authentication``: ``--api-key``, ``--client-secret``, ``DB_PASSWORD``,
``MY_SECRET``, ``HF_TOKEN``, ``apiKey``. Counts such as ``max_tokens`` or ``num_speculative_tokens``
are not (``tokens`` is a plural, not a credential). A name whose last part is ``env`` holds the
*name* of a variable (``api_key_env: MY_KEY``) and is kept. The password of a URL
(``http://user:pass@host``) is replaced in every string, wherever it appears.

Redaction is for what is shown and stored; requests and launched servers get the real values.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"

_WORDS = ("key", "token", "secret", "password", "passwd", "credential", "auth")
_PLURALS = ("keys", "secrets", "passwords", "credentials")
_WHOLE = ("authorization", "authentication", "creds")
_PARTS = re.compile(r"[-_.\s]+")
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:?#]*):[^\s/?#]*@")


def is_secret_name(name: Any) -> bool:
    """Whether a flag, environment variable or mapping key names a secret value."""
    if not isinstance(name, str):
        return False
    parts = [p for p in _PARTS.split(name.lower().lstrip("-")) if p]
    if not parts or parts[-1] == "env":
        return False
    return any(p in _PLURALS or p in _WHOLE or p.endswith(_WORDS) for p in parts)


@overload
def redact_url(text: str) -> str: ...
@overload
def redact_url(text: str | None) -> str | None: ...


def redact_url(text: str | None) -> str | None:
    """``http://user:pass@host:port/x`` → ``http://user:***@host:port/x``, in a URL or any text holding URLs."""
    if not isinstance(text, str) or "@" not in text:
        return text
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)


def _scalar(value: Any) -> bool:
    return not isinstance(value, (Mapping, list, tuple))


def redact_argv(argv: Sequence[Any], extra_flags: Iterable[str] = ()) -> list[Any]:
    """A copy of argv with the values of secret flags masked (``--flag v`` and ``--flag=v``).

    ``extra_flags`` are flags declared secret by a launcher beyond the name pattern. In the
    two-word form the next word is taken as the value only when it is not itself a flag, so a
    switch such as ``--disable-auth`` never hides the flag after it.
    """
    extra = set(extra_flags)
    out: list[Any] = []
    mask_next: str | None = None  # "always" after a declared flag, "value" after a secret-looking one
    for arg in argv:
        is_flag = isinstance(arg, str) and arg.startswith("-") and len(arg) > 1
        if mask_next == "always" or (mask_next == "value" and not is_flag):
            out.append(MASK)
            mask_next = None
            continue
        mask_next = None
        if is_flag:
            name, eq, _ = arg.partition("=")
            secret = name in extra or is_secret_name(name)
            if eq:
                out.append(f"{name}={MASK}" if secret else redact_url(arg))
            else:
                out.append(arg)
                mask_next = ("always" if name in extra else "value") if secret else None
            continue
        out.append(redact_value(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables with secret-named values masked (the names stay, to show they were set)."""
    return {k: (MASK if is_secret_name(k) else redact_url(v)) for k, v in env.items()}


def redact_mapping(data: Any) -> Any:
    """A copy of nested suite/meta data: secret-named keys masked (everything under them too),
    argv-like lists redacted as argv, URL passwords replaced in every string."""
    if isinstance(data, Mapping):
        out = {}
        for k, v in data.items():
            out[k] = _mask_all(v) if is_secret_name(k) else redact_mapping(v)
        return out
    if isinstance(data, (list, tuple)):
        items = redact_argv(data) if all(_scalar(x) for x in data) else [redact_mapping(x) for x in data]
        return items if isinstance(data, list) else tuple(items)
    return redact_value(data)


def redact_value(value: Any) -> Any:
    return redact_url(value) if isinstance(value, str) else value


def _mask_all(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask_all(v) for v in value]
    return MASK if value is not None else None


def split_credentials(url: str) -> tuple[str, str | None]:
    """``http://user:pass@host/x`` → (``http://host/x``, ``"Basic …"``): both clients send the same
    header (the socket client has no notion of URL credentials; aiohttp refuses them beside an
    explicit Authorization header). A URL without credentials comes back unchanged, with None."""
    try:
        parts = urlsplit(url)
        user, password, host = parts.username, parts.password, parts.netloc.rpartition("@")[2]
    except ValueError:
        return url, None
    if user is None and password is None:
        return url, None
    token = base64.b64encode(f"{unquote(user or '')}:{unquote(password or '')}".encode()).decode()
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def secret_values(argv: Sequence[Any], shown_argv: Sequence[Any], env: Mapping[str, Any]) -> list[str]:
    """The real secret strings behind a launch: argv words that redaction changed (the value part of
    ``--flag=v``) and secret-named environment values, longest first so one never hides part of another.
    A launched engine echoes its arguments into its log (vLLM prints its non-default args), so the
    log is scrubbed of these as it is written."""
    found: set[str] = set()
    for real, shown in zip(argv, shown_argv):
        if isinstance(real, str) and real != shown:
            name, eq, value = real.partition("=")
            found.add(value if eq and name.startswith("-") and shown == f"{name}={MASK}" else real)
    found |= {str(v) for k, v in env.items() if is_secret_name(k) and v not in (None, "")}
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def scrub(text: bytes, values: Sequence[str]) -> bytes:
    for value in values:
        text = text.replace(value.encode(), MASK.encode())
    return text


def mask_values(value: Any, values: Sequence[str]) -> Any:
    """``value`` with each of ``values`` (known secret strings) masked in every string it holds, at any depth."""
    if isinstance(value, str):
        for secret in values:
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {mask_values(k, values): mask_values(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_values(v, values) for v in value]
    return value
