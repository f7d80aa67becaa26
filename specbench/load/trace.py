"""A trace's requests as prompts: one per trace line, due at the line's time, asking for its output length.

A trace gives lengths, not text (Mooncake's and Azure's leave the prompts out for privacy). A line's own
``text`` is sent as is; otherwise its prompt is built by one pinned rule from the data set's prompts, so
a speculative method drafts on real text rather than filler: the line takes data set prompt i (its first
turn; i = the line's index, or its session's first line's, cycled over the data set), repeats that text
(blank lines between the copies) and cuts it to ``round(input_length × WORDS_PER_TOKEN)`` words (at least
one). Words, not tokens: the trace counted its tokens in another model's tokenizer, and no tokenizer is
needed here; the server's own count of what was sent is each record's ``prompt_tokens`` (and
``prompt_tokens_o200k`` where the o200k file is there). Lines of one session start from the same text,
so a later, longer line of it begins with the earlier one's prompt, as a conversation's context does."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..schemas.request import Prompt, TraceLine

#: OpenAI's rule of thumb for English: 100 tokens ≈ 75 words
WORDS_PER_TOKEN = 0.75
_WORD = re.compile(r"\S+\s*")


def trace_prompts(lines: Sequence[TraceLine], material: Sequence[Prompt]) -> list[Prompt]:
    """One prompt per trace line, in the trace's order, its text from ``material`` (a data set's prompts)."""
    if not material:
        raise ValueError("a trace's prompts are built from a data set's prompts: none given")
    first_of: dict[str, int] = {}
    out = []
    for i, line in enumerate(lines):
        source = material[(i if line.session_id is None else first_of.setdefault(line.session_id, i)) % len(material)]
        text = line.text if line.text is not None else sized(source.turns[0], line.input_length or 0)
        out.append(Prompt(id=f"line{line.line}", dataset=source.dataset, turns=(text,), category=source.category,
                          trace=line))
    return out


def sized(text: str, tokens: int) -> str:
    """``text`` repeated and cut to about ``tokens`` tokens: ``round(tokens × WORDS_PER_TOKEN)`` words, at least one."""
    words = _WORD.findall(text.strip()) or ["."]
    want = max(1, round(tokens * WORDS_PER_TOKEN))
    out: list[str] = []
    while len(out) < want:
        copy = words[: want - len(out)]
        if out:
            out[-1] = out[-1].rstrip() + "\n\n"
        out += copy
    return "".join(out).rstrip()
