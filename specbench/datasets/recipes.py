"""Named prompt-formatting recipes, pinned to the wording the spec-decode papers used.

Acceptance length moves with the exact prompt text, so each recipe reproduces one published
harness verbatim (see docs/datasets.md for the sources). A recipe turns the set's raw first user
turn (plus the source row, for fields such as MBPP's tests) into the text that is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Recipe = Callable[[str, Mapping[str, Any]], str]

BOXED_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
DFLASH_CODE_HEAD = "Write a solution to the following problem and make sure that it passes the tests:\n"
EAGLE_CODE_HEAD = "Complete the code I provided."
MBPP_HEAD = "You are an expert Python programmer, and here is your task: "
MBPP_TESTS = " Your code should pass these tests:\n\n"


def plain(text: str, row: Mapping[str, Any]) -> str:
    """The source's prompt field, verbatim (AIPerf, vLLM bench, FastChat question files)."""
    return text


def boxed(text: str, row: Mapping[str, Any]) -> str:
    """DFlash / DeepSpec math suffix asking for step-by-step reasoning and a boxed answer."""
    return text + BOXED_SUFFIX


def dflash(text: str, row: Mapping[str, Any]) -> str:
    """DFlash / DeepSpec / SpecForge HumanEval chat wrapper: instruction plus a python fence."""
    return f"{DFLASH_CODE_HEAD}```python\n{text}\n```"


def eagle(text: str, row: Mapping[str, Any]) -> str:
    """EAGLE's HumanEval question.jsonl: the prefix glued directly onto the raw prompt."""
    return EAGLE_CODE_HEAD + text


def with_tests(text: str, row: Mapping[str, Any]) -> str:
    """The MBPP README prompt (without few-shot examples or the [BEGIN] marker)."""
    tests = "\n".join(row.get("test_list") or ())
    return f"{MBPP_HEAD}{text}{MBPP_TESTS}{tests}"


RECIPES: dict[str, Recipe] = {
    "plain": plain,
    "boxed": boxed,
    "dflash": dflash,
    "eagle": eagle,
    "with_tests": with_tests,
}
