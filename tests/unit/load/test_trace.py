"""A trace's lines become prompts by one pinned rule: a line's own text as is, else a data set prompt's text
repeated and cut to round(input_length × 0.75) words; one session's lines start from the same text."""

from specbench.load.trace import WORDS_PER_TOKEN, sized, trace_prompts
from specbench.schemas.request import Prompt, TraceLine


def material(n: int) -> list[Prompt]:
    return [Prompt(id=f"m{i}", dataset="math", turns=(f"alpha{i} beta\ngamma delta.",), category=f"c{i}")
            for i in range(n)]


def test_the_text_is_cut_to_three_quarters_of_a_word_per_token():
    assert WORDS_PER_TOKEN == 0.75
    assert sized("one two three four", 4) == "one two three"  # round(3.0)
    assert sized("one two three", 8) == "one two three\n\none two three"  # 6 words: the text twice, a blank line between
    assert sized("one two", 11) == "one two\n\none two\n\none two\n\none two"  # round(8.25) = 8
    assert sized("one  two\nthree", 4) == "one  two\nthree"  # the text's own spacing kept
    assert sized("anything", 0) == "anything" and sized("   ", 3) == ".\n\n."  # at least a word; no text: dots


def test_one_prompt_per_line_its_own_text_as_is_and_sessions_share_a_source():
    lines = [TraceLine(at_s=0.0, output_length=5, input_length=4, line=1),
             TraceLine(at_s=0.1, output_length=6, input_length=8, session_id="s", line=2),
             TraceLine(at_s=0.2, output_length=7, text="exactly this", line=3),
             TraceLine(at_s=0.3, output_length=8, input_length=12, session_id="s", line=4),
             TraceLine(at_s=0.4, output_length=9, input_length=4, line=5)]
    got = trace_prompts(lines, material(2))
    assert [p.id for p in got] == ["line1", "line2", "line3", "line4", "line5"]
    assert [p.trace for p in got] == lines and all(p.dataset == "math" for p in got)
    assert got[0].turns == ("alpha0 beta\ngamma",) and got[0].category == "c0"
    assert got[2].turns == ("exactly this",)
    # line 2 and line 4 are one session: both from m1 (line 2's index), the longer beginning with the shorter
    assert got[1].category == got[3].category == "c1"
    assert got[3].turns[0].startswith(got[1].turns[0].rstrip(".")) and len(got[3].turns[0]) > len(got[1].turns[0])
    assert got[4].category == "c0"  # index 4, cycled over two prompts
