"""Sets built to a length from the shipped sets' text: ``shared_prefix`` (groups of prompts sharing a
prefix of exactly L tokens, each with its own question), ``long_context`` (prompts of exactly N tokens)
and the ``system_tokens`` system prompt. Pure given their inputs: the same entry, data files and
counting rule give the same bytes (docs/datasets.md has the rule, step by step).

Text: the documents of ``text_from`` in source order, then ``random.Random(seed)`` shuffles them, then
the questions (same generator, in that order). Prompt (or group) i of n reads documents from index
i·⌊D/n⌋ on, wrapping round, joined by a blank line after a fixed header, and is cut at a token to its
length; so starts differ, and no document is read twice unless n × length exceeds the text.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace

from ..errors import DatasetError
from ..schemas.request import Prompt
from .files import Row
from .sharegpt import transcript
from .spec import DatasetSpec, used_sets
from .tokens import Tokens

CONTEXT_HEAD = "Reference material (background only; the request follows it):\n\n"
SYSTEM_HEAD = "You are a helpful assistant. Below is reference material, for background only.\n\n"
JOIN = "\n\n"
CLOSER = " [end of reference material]"  # a space and a bracket: counts apart from any text before it
ARTICLE_PREFIX = "Summarize: "  # Spec-Bench's summarization turns: the task, then the article

PromptLoader = Callable[[DatasetSpec], list[Prompt]]
RowReader = Callable[[DatasetSpec], Iterator[Row]]


def documents(spec: DatasetSpec, load: PromptLoader, rows: RowReader) -> list[str]:
    """The texts of ``text_from`` in source order: Spec-Bench's summarization articles (the task word cut),
    GSM8K's questions then MATH-500's problems, or ShareGPT's conversations as transcripts."""
    text_from = spec.effective_options.get("text_from") or "articles"
    texts = used_sets(spec)[1:] if spec.definition.generated else used_sets(spec)
    if text_from == "sharegpt":
        return [t for where, row in rows(texts[0]) if (t := transcript(row, where))]
    docs = [p.turns[0] for used in texts for p in load(used)]
    return [d.removeprefix(ARTICLE_PREFIX) for d in docs] if text_from == "articles" else docs


def context(tokens: Tokens, docs: list[str], start: int, head: str, tail: str, target: int) -> str | None:
    """``head``, the documents from ``start`` on (wrapping round, never past ``start`` again) cut at a token,
    then ``tail`` (which starts with ``CLOSER``): exactly ``target`` tokens. None when all the documents are
    too short. The cut text and the tail count apart, so the sum is exact: o200k_base's pattern never joins
    a text's last piece with a following space and a bracket."""
    need = target - tokens.count(tail)
    parts, have = [head], tokens.count(head)
    for i in range(len(docs)):
        doc = docs[(start + i) % len(docs)]
        parts.append(doc if i == 0 else JOIN + doc)
        have += tokens.count(parts[-1])
        if have >= need + 8:  # a margin for tokens that merge across a join
            body = tokens.fit("".join(parts), need)
            if body is not None:
                return body + tail
    body = tokens.fit("".join(parts), need)
    return body + tail if body is not None else None


def shared_prefix(spec: DatasetSpec, tokens: Tokens, load: PromptLoader, rows: RowReader) -> list[Prompt]:
    """groups × per_group prompts: group g's prefix (exactly prefix_tokens tokens) + a blank line + its own
    question; ids ``g<g>-<k>``, k the rank in its group in sending order (0: the group's first)."""
    opts = spec.effective_options
    groups, per_group, length = opts["groups"], opts["per_group"], opts["prefix_tokens"]
    rng = random.Random(spec.seed)
    docs, questions = _shuffled(spec, rng, load, rows)
    _enough(spec, "groups", groups, len(docs), "documents")
    _enough(spec, "groups", groups * per_group, len(questions), f"questions ({opts['questions']})",
            "groups × per_group")
    prefixes = []
    for g in range(groups):
        text = context(tokens, docs, g * (len(docs) // groups), CONTEXT_HEAD, CLOSER, length)
        if text is None:
            raise _short(spec, "prefix_tokens", length, tokens)
        prefixes.append(text)
    pairs = [(g, questions[g * per_group + j]) for g in range(groups) for j in range(per_group)]
    if opts["order"] == "interleaved":
        pairs = [pairs[g * per_group + j] for j in range(per_group) for g in range(groups)]
    elif opts["order"] == "shuffle":
        rng.shuffle(pairs)
    seen: dict[int, int] = {}
    prompts = []
    for g, question in pairs:
        k = seen[g] = seen.get(g, -1) + 1
        prompts.append(Prompt(id=f"g{g}-{k}", dataset=spec.name, turns=(prefixes[g] + JOIN + question,),
                              group=f"g{g}", group_first=k == 0))
    return prompts


def long_context(spec: DatasetSpec, tokens: Tokens, load: PromptLoader, rows: RowReader) -> list[Prompt]:
    """``requests`` prompts of exactly input_tokens tokens: text, a blank line, then a question; ids ``0``…"""
    length, count = spec.effective_options["input_tokens"], spec.requests or 0
    docs, questions = _shuffled(spec, random.Random(spec.seed), load, rows)
    _enough(spec, "requests", count, len(docs), "documents")
    _enough(spec, "requests", count, len(questions), f"questions ({spec.effective_options['questions']})")
    prompts = []
    for i in range(count):
        tail = CLOSER + JOIN + questions[i]
        if tokens.count(tail) + tokens.count(CONTEXT_HEAD) >= length:
            raise DatasetError(f"data set '{spec.name}': input_tokens: {length} leaves no room for text before "
                               f"question {i} ({tokens.count(tail)} tokens); raise input_tokens")
        text = context(tokens, docs, i * (len(docs) // count), CONTEXT_HEAD, tail, length)
        if text is None:
            raise _short(spec, "input_tokens", length, tokens)
        prompts.append(Prompt(id=str(i), dataset=spec.name, turns=(text,)))
    return prompts


def with_system(spec: DatasetSpec, prompts: list[Prompt], tokens: Tokens, load: PromptLoader, rows: RowReader) -> list[Prompt]:
    """``system_tokens``: one system prompt of exactly that many tokens for every prompt of the entry: the
    system header and the documents of ``text_from`` shuffled by the entry's seed, from the first on."""
    length = spec.effective_options["system_tokens"]
    docs = documents(spec, load, rows)
    random.Random(spec.seed).shuffle(docs)
    text = context(tokens, docs, 0, SYSTEM_HEAD, CLOSER, length)
    if text is None:
        raise _short(spec, "system_tokens", length, tokens)
    return [replace(p, system=text) for p in prompts]


def _shuffled(spec: DatasetSpec, rng: random.Random, load: PromptLoader, rows: RowReader) -> tuple[list[str], list[str]]:
    """The documents, then the questions (each prompt's first turn, its set's default recipe), shuffled by ``rng``."""
    docs = documents(spec, load, rows)
    rng.shuffle(docs)
    questions = [p.turns[0] for p in load(used_sets(spec)[0])]
    rng.shuffle(questions)
    return docs, questions


def _enough(spec: DatasetSpec, key: str, wanted: int, have: int, what: str, label: str | None = None) -> None:
    if wanted > have:
        raise DatasetError(f"data set '{spec.name}': {key}: {label or key} = {wanted} needs {wanted} {what}, "
                           f"there are {have}")


def _short(spec: DatasetSpec, key: str, length: int, tokens: Tokens) -> DatasetError:
    text_from = spec.effective_options.get("text_from") or "articles"
    return DatasetError(f"data set '{spec.name}': {key}: {length} tokens ({tokens.name}) is more text than "
                        f"text_from: {text_from} holds; lower it or use a larger text_from (articles < problems < sharegpt)")
