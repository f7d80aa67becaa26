"""Counting and cutting text to a token length (specbench/datasets/tokens.py): the 4-characters rule, the
real o200k_base file (skipped without it), and the one-line error when o200k is asked for and absent."""

from __future__ import annotations

import random

import pytest

from specbench.datasets.generate import CLOSER, JOIN
from specbench.datasets.tokens import Tokens, tokens_for
from specbench.errors import DatasetError
from specbench.measure.o200k import O200k
from specbench.run.o200k_file import find_o200k
from tests.support.paths import DATA, SHARED

O200K_FILE = SHARED / "tiktoken" / "o200k_base.tiktoken"
needs_o200k = pytest.mark.skipif(not O200K_FILE.is_file(), reason=f"no o200k_base.tiktoken at {O200K_FILE}")
TEXT = (DATA / "prompt_sources" / "spec_bench.jsonl").read_text(encoding="utf-8")


def o200k() -> Tokens:
    found = find_o200k(str(O200K_FILE))
    assert found.encoding is not None, found.error
    return Tokens(found.encoding)


def test_chars_count_and_cut_are_exact_by_construction():
    tokens = Tokens(None)
    assert [tokens.count(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    head = tokens.fit("x" * 1001, 250)
    assert head == "x" * 1000 and tokens.count(head + "tail!") == 250 + tokens.count("tail!")
    assert tokens.fit("short", 2) is None


@needs_o200k
def test_o200k_cut_counts_exactly_and_never_merges_with_the_closer():
    """Every cut of real text, punctuation-ended ones included, counts its length, and the cut text and the
    closer + question count apart: the sum is exact (the closer starts with a space and a bracket)."""
    tokens, rng = o200k(), random.Random(0)
    tail = CLOSER + JOIN + "How many ships passed?"
    for target in [rng.randrange(5, 800) for _ in range(80)]:
        head = tokens.fit(TEXT, target)
        assert head is not None and tokens.count(head) == target
        assert tokens.count(head + tail) == target + tokens.count(tail)
    assert tokens.fit("a few words", 50) is None


def test_o200k_asked_for_without_the_file_is_one_line_naming_the_key():
    with pytest.raises(DatasetError) as err:
        tokens_for("long", "o200k", O200k(error="o200k_base.tiktoken not cached (/tmp/x)"))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("data set 'long': tokenizer: o200k counts o200k_base tokens, but o200k_base.tiktoken "
                                     "not cached (/tmp/x); point load.tiktoken_file")
    with pytest.raises(DatasetError, match="no o200k_base file was given.*tokenizer: chars"):
        tokens_for("long", "o200k", None)
    assert tokens_for("long", "chars", None).encoding is None
