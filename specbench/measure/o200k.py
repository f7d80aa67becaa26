"""Lengths in one tokenizer for every model: texts counted in tiktoken's ``o200k_base`` tokens, the way
Artificial Analysis and NVIDIA's specdec_bench put output throughput of different tokenizers on one
scale, and SPEED-Bench measures its prompts' lengths.

The encoding is built only from the bytes of a file already on this machine, found, read and checked
(sha256) by the run stage (``run.o200k_file.find_o200k``). It is never downloaded mid-run, by
construction: tiktoken's own loader (``load_tiktoken_bpe``) and ``o200k_base`` constructor (its pattern
and special tokens, ``tiktoken_ext.openai_public``) run with the one name each would read or fetch
through bound to the bytes already read (``encoding_from``). Without the file every count is missing
(``None``) and ``O200k.error`` says why (the rows' ``o200k_error``).
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

from ..schemas.request import Prompt, RequestRecord
from ..schemas.row_quality import O200kLengths

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
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
                  o200k: O200k) -> O200kLengths:
    """A cell's o200k numbers from its measured records; ``walls``: each repeat's records and wall time.

    ``output_throughput_o200k_tps`` is Output tok/s with o200k tokens of the answers' text in place of
    the server's counts (mean over repeats); ``o200k_per_output_token`` = Σ o200k ÷ Σ server tokens over
    the requests that have both; the prompt lengths are over the successful requests' recorded counts."""
    ok = [r for r in records if r.ok]
    counts = o200k.count(r.text for r in ok)
    if counts is None:
        return O200kLengths(o200k_error=o200k.error)
    rates: list[float] = []
    for reps, wall in walls:
        done = [r for r in reps if r.ok]
        if wall <= 0 or not done:  # as Output tok/s: a repeat without a rate leaves the cell without one
            rates = []
            break
        rates.append(sum(o200k.count(r.text for r in done) or []) / wall)
    both = [(n, r.output_tokens) for n, r in zip(counts, ok) if r.output_tokens]
    prompt = [r.prompt_tokens_o200k for r in ok if r.prompt_tokens_o200k is not None]
    return O200kLengths(
        output_tokens_o200k=sum(counts), output_throughput_o200k_tps=float(np.mean(rates)) if rates else None,
        o200k_per_output_token=sum(n for n, _ in both) / sum(t for _, t in both) if both else None,
        prompt_tokens_o200k_mean=float(np.mean(prompt)) if prompt else None,
        prompt_tokens_o200k_p50=float(np.median(prompt)) if prompt else None,
        prompt_tokens_o200k_max=max(prompt) if prompt else None,
        o200k_error=None if prompt or not ok else
        "prompt lengths: the requests carry none (measured before the o200k_base file was found)")
