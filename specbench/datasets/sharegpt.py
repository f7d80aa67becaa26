"""ShareGPT (``ShareGPT_V3_unfiltered_cleaned_split.json``, the default set of ``vllm bench serve``'s and
SGLang's ``bench_serving`` sharegpt mode): which conversations are used and which of their messages are sent.

The order is vLLM's: the conversations with at least two messages (``keep``, before any shuffle), then
``selection: shuffle`` is ``random.Random(seed).shuffle`` of them (what vLLM's ``random.seed(seed);
random.shuffle(data)`` does to the same list), then the first N that ``admit`` takes, in that order. So
for the same file, seed and lengths the rows are vLLM's (docs/datasets.md says where they differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import DatasetError
from .rows import Item, field
from .tokens import Tokens

RULES = ("human", "vllm")
LENGTHS = ("vllm", "none")
USER = "human"
#: vLLM's ``is_valid_sequence`` bounds (its ShareGPT sampling), here in o200k_base tokens
MIN_TOKENS, MAX_PROMPT_TOKENS, MAX_TOTAL_TOKENS = 4, 1024, 2048


def keep(row: Mapping[str, Any]) -> bool:
    """vLLM's filter before its shuffle: a ``conversations`` list of at least two messages."""
    conversations = row.get("conversations")
    return isinstance(conversations, list) and len(conversations) >= 2


def messages(row: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """The conversation as (from, value) pairs; a malformed one is a one-line error naming the row."""
    value = field(row, "conversations", where)
    if not isinstance(value, list) or not all(
            isinstance(m, Mapping) and isinstance(m.get("from"), str) and isinstance(m.get("value"), str) for m in value):
        raise DatasetError(f"{where}: field 'conversations' must be a list of {{from, value}} strings")
    return [(m["from"], m["value"]) for m in value]


def parse_sharegpt(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    """``rule: vllm``: the first message, whatever its role (vLLM's prompt). ``rule: human``: the non-empty
    ``human`` messages in order, when the conversation starts with one (else no turns: never admitted)."""
    msgs = messages(row, where)
    rid = str(field(row, "id", where))
    if opts["rule"] == "vllm":
        return Item(rid, (msgs[0][1],), row=row)
    starts = msgs[0][0] == USER and msgs[0][1].strip()
    turns = tuple(v for f, v in msgs if f == USER and v.strip()) if starts else ()
    return Item(rid, turns, row=row)


def admit(item: Item, opts: Mapping[str, Any], tokens: Tokens | None) -> bool:
    """Whether a conversation, met in selection order, is used: a non-empty first turn, and with
    ``lengths: vllm`` vLLM's bounds on the first message and the one after it (its answer)."""
    if not item.turns or not item.turns[0].strip():
        return False
    if opts["lengths"] == "none":
        return True
    if tokens is None:
        raise DatasetError("sharegpt: lengths: vllm needs a token counter")  # the loader always gives one
    prompt = tokens.count(item.turns[0])
    answer = tokens.count(str((item.row or {})["conversations"][1]["value"]))
    return MIN_TOKENS <= prompt <= MAX_PROMPT_TOKENS and answer >= MIN_TOKENS and prompt + answer <= MAX_TOTAL_TOKENS


def transcript(row: Mapping[str, Any], where: str) -> str | None:
    """A conversation as text for the long-context sets: ``User: …`` / ``Assistant: …`` paragraphs of its
    non-empty ``human`` and ``gpt`` messages; None when it has fewer than two messages."""
    if not keep(row):
        return None
    names = {USER: "User", "gpt": "Assistant"}
    parts = [f"{names[f]}: {v}" for f, v in messages(row, where) if f in names and v.strip()]
    return "\n\n".join(parts) or None
