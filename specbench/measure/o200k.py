"""Lengths in one tokenizer for every model: texts counted in tiktoken's ``o200k_base`` tokens, the way
Artificial Analysis and NVIDIA's specdec_bench put output throughput of different tokenizers on one
scale, and SPEED-Bench measures its prompts' lengths.

The encoding is built only from a file already on this machine: ``load.tiktoken_file``, else
``SPECBENCH_TIKTOKEN_FILE``, else tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else
``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``; the file is named by the sha1 of its blob URL,
as ``tiktoken.load.read_file_cached`` names it), and only when its sha256 is o200k_base's. It is never
downloaded mid-run, by construction: the file is found, read and checked before any tiktoken code
runs, and tiktoken's own loader (``load_tiktoken_bpe``) and ``o200k_base`` constructor (its pattern
and special tokens, ``tiktoken_ext.openai_public``) then run with the one name each would read or
fetch through bound to what was already read. Without the file every count is missing (``None``)
and ``O200k.error`` says why (the rows' ``o200k_error``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

from ..schemas.request import Prompt, RequestRecord

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
ENV = "SPECBENCH_TIKTOKEN_FILE"
#: counts kept per text, so rows rebuilt after every phase do not count the same answers again
MEMO_LIMIT = 1_000_000


class O200k:
    """The o200k_base encoding from a local file, or why there is none (``error``)."""

    def __init__(self, encoding: tiktoken.Encoding | None = None, error: str | None = None,
                 path: str | None = None) -> None:
        self.encoding, self.error, self.path = encoding, error, path
        self.memo: dict[bytes, int] = {}

    def count(self, texts: Iterable[str]) -> list[int] | None:
        """Each text's o200k_base tokens (special-token text counted as plain text); None without the encoding."""
        if self.encoding is None:
            return None
        if len(self.memo) > MEMO_LIMIT:
            self.memo.clear()
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> int:
        key = hashlib.blake2b(text.encode(errors="surrogatepass"), digest_size=16).digest()
        n = self.memo.get(key)
        if n is None:
            assert self.encoding is not None  # count() asks only with one
            n = self.memo[key] = len(self.encoding.encode_ordinary(text))
        return n


def cache_file(env: Mapping[str, str] = os.environ) -> Path | None:
    """Where tiktoken keeps o200k_base once downloaded (``tiktoken.load.read_file_cached``'s rule); None
    when its cache is switched off (an empty ``TIKTOKEN_CACHE_DIR``)."""
    if "TIKTOKEN_CACHE_DIR" in env:
        folder = env["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in env:
        folder = env["DATA_GYM_CACHE_DIR"]
    else:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(folder) / hashlib.sha1(O200K_URL.encode()).hexdigest() if folder else None


def find_o200k(given: str | None = None, env: Mapping[str, str] = os.environ) -> O200k:
    """The encoding from ``given`` (``load.tiktoken_file``), ``SPECBENCH_TIKTOKEN_FILE`` or tiktoken's cache."""
    if given:
        return _load(given, "load.tiktoken_file")
    if env.get(ENV):
        return _load(env[ENV], ENV)
    cached = cache_file(env)
    if cached is not None and cached.is_file():
        return _load(str(cached), "tiktoken's cache file")
    where = f"not cached ({cached})" if cached is not None else "not cached (TIKTOKEN_CACHE_DIR is empty: tiktoken's cache is off)"
    return O200k(error=f"o200k_base.tiktoken {where} and no load.tiktoken_file or {ENV}: not downloaded mid-run")


def _load(path: str, where: str) -> O200k:
    try:
        stat = os.stat(path)
    except OSError as err:
        return O200k(error=f"{where} {path}: {err.strerror or err}", path=path)
    return _read(path, where, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read(path: str, where: str, mtime_ns: int, size: int) -> O200k:
    """One encoding per file version: rows are rebuilt after every phase, the encoding is built once."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        return O200k(error=f"{where} {path}: {err.strerror or err}", path=path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        return O200k(error=f"{where} {path}: not o200k_base.tiktoken (sha256 {digest[:12]}…, o200k_base's is "
                           f"{O200K_SHA256[:12]}…)", path=path)
    try:
        return O200k(encoding=encoding_from(data, path), path=path)
    except (ValueError, RuntimeError) as err:
        return O200k(error=f"{where} {path}: {err}", path=path)


def encoding_from(data: bytes, path: str) -> tiktoken.Encoding:
    """The o200k_base ``Encoding`` from the file's bytes, through tiktoken's own code and nothing that fetches."""
    def read(blobpath: str, expected_hash: str | None = None) -> bytes:
        return data

    ranks: dict[bytes, int] = offline(tiktoken.load.load_tiktoken_bpe, read_file_cached=read)(path)

    def loaded(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if blobpath != O200K_URL:
            raise RuntimeError(f"tiktoken {tiktoken.__version__}: o200k_base names another file ({blobpath}): not used")
        return ranks

    settings = offline(openai_public.o200k_base, load_tiktoken_bpe=loaded)()
    return tiktoken.Encoding(settings["name"], pat_str=settings["pat_str"], mergeable_ranks=settings["mergeable_ranks"],
                             special_tokens=settings["special_tokens"])


def offline(fn: Any, **bound: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (tiktoken's) with the names in ``bound`` resolved to them instead of its module's functions;
    refused when it calls any other function of its module, which could read or fetch the file itself."""
    module = fn.__globals__
    others = sorted(n for n in fn.__code__.co_names if n not in bound and isinstance(module.get(n), types.FunctionType))
    if others or not set(bound) <= set(fn.__code__.co_names):
        raise RuntimeError(f"tiktoken {tiktoken.__version__}: {fn.__qualname__} no longer reads its file only through "
                           f"{', '.join(bound)} (it calls {', '.join(others) or 'none of them'}): not used, it could fetch")
    return types.FunctionType(fn.__code__, {**module, **bound}, fn.__name__, fn.__defaults__, fn.__closure__)


def prompt_texts(prompt: Prompt, answers: Sequence[str], turn: int) -> list[str]:
    """The texts turn ``turn`` of ``prompt`` sends, one per message: the system prompt, the user turns so
    far and the model's earlier answers (no chat template: its tokens are the model's, not the text's)."""
    return ([prompt.system] if prompt.system else []) + list(prompt.turns[: turn + 1]) + list(answers[:turn])


def prompt_lengths(o200k: O200k, prompts: Sequence[Prompt], records: Sequence[RequestRecord]) -> None:
    """Set each record's ``prompt_tokens_o200k``: Σ o200k tokens over the texts its request sent."""
    if o200k.encoding is None:
        return
    by_id = {p.id: p for p in prompts}
    answers: dict[tuple[str, int], dict[int, str]] = {}
    for r in records:
        answers.setdefault((r.prompt_id, r.repeat), {})[r.turn] = r.text
    for r in records:
        prompt = by_id.get(r.prompt_id)
        if prompt is None:
            continue
        earlier = answers[(r.prompt_id, r.repeat)]
        if any(t not in earlier for t in range(r.turn)):
            continue
        counts = o200k.count(prompt_texts(prompt, [earlier[t] for t in range(r.turn)], r.turn))
        r.prompt_tokens_o200k = sum(counts or [])


def o200k_summary(records: Sequence[RequestRecord], walls: Sequence[tuple[Sequence[RequestRecord], float]],
                  o200k: O200k) -> dict[str, Any]:
    """A cell's o200k numbers from its measured records; ``walls``: each repeat's records and wall time.

    ``output_throughput_o200k_tps`` is Output tok/s with o200k tokens of the answers' text in place of
    the server's counts (mean over repeats); ``o200k_per_output_token`` = Σ o200k ÷ Σ server tokens over
    the requests that have both; the prompt lengths are over the successful requests' recorded counts."""
    keys = ("output_tokens_o200k", "output_throughput_o200k_tps", "o200k_per_output_token",
            "prompt_tokens_o200k_mean", "prompt_tokens_o200k_p50", "prompt_tokens_o200k_max")
    out: dict[str, Any] = dict.fromkeys(keys)
    ok = [r for r in records if r.ok]
    counts = o200k.count(r.text for r in ok)
    if counts is None:
        out["o200k_error"] = o200k.error
        return out
    out["output_tokens_o200k"] = sum(counts)
    rates: list[float] = []
    for reps, wall in walls:
        done = [r for r in reps if r.ok]
        if wall <= 0 or not done:  # as Output tok/s: a repeat without a rate leaves the cell without one
            rates = []
            break
        rates.append(sum(o200k.count(r.text for r in done) or []) / wall)
    out["output_throughput_o200k_tps"] = float(np.mean(rates)) if rates else None
    both = [(n, r.output_tokens) for n, r in zip(counts, ok) if r.output_tokens]
    out["o200k_per_output_token"] = sum(n for n, _ in both) / sum(t for _, t in both) if both else None
    prompt = [r.prompt_tokens_o200k for r in ok if r.prompt_tokens_o200k is not None]
    if prompt:
        out.update(prompt_tokens_o200k_mean=float(np.mean(prompt)), prompt_tokens_o200k_p50=float(np.median(prompt)),
                   prompt_tokens_o200k_max=max(prompt))
    elif ok:
        out["o200k_error"] = "prompt lengths: the requests carry none (measured before the o200k_base file was found)"
    return out
