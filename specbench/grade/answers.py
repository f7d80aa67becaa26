"""Final-answer extraction and comparison for gsm8k and math500.

The model's answer is the last ``\\boxed{}`` (math500; the ``boxed`` recipe asks for it), or for
gsm8k the ``#### n`` line, then the last ``\\boxed{}``, then the last number in the text. Both
sides are normalised the usual MATH way (LaTeX spacing, ``\\left``/``\\right``, ``\\dfrac``,
degrees, percent and dollar signs, trailing units and periods, thousands separators) and compared
as numbers when both read as one (``0.5`` = ``\\frac{1}{2}`` = ``1/2``), else as strings.
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces kept), or ``\\boxed x``."""
    starts = [m for m in re.finditer(r"\\(?:boxed|fbox)\s*", text)]
    for m in reversed(starts):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth = 0
            for j in range(i, len(text)):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[i + 1:j]
            continue  # unbalanced: cut by max_tokens
        word = re.match(r"[^\s$]+", text[i:])
        if word:
            return word.group(0)
    return None


def gsm8k_gold(answer: str) -> str:
    """The number after ``####`` in a gsm8k reference solution."""
    return answer.split("####")[-1].strip()


def extract_gsm8k(text: str) -> tuple[str | None, str]:
    """(answer, how): ``#### n``, else the last ``\\boxed{}``, else the last number in the text."""
    hashes = re.findall(r"####\s*([^\n]+)", text)
    if hashes:
        return hashes[-1].strip(), "####"
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed, "boxed"
    numbers = _NUMBER.findall(text)
    return (numbers[-1], "last number") if numbers else (None, "no answer found")


def extract_math(text: str) -> tuple[str | None, str]:
    boxed = last_boxed(text)
    return (boxed, "boxed") if boxed is not None else (None, "no \\boxed{} answer")


def _strip_text_wrappers(s: str) -> str:
    # a trailing unit after a number ("5\text{ cm}", "10 \mbox{inches}^2") goes; other \text{x} keep x
    s = re.sub(r"(?<=[\d}])\s*\\(?:text|mbox|textbf|mathrm)\{\s*[A-Za-z][A-Za-z ]*\}(\^\{?\d\}?)?\s*$", "", s)
    return re.sub(r"\\(?:text|mbox|textbf|mathrm)\{([^{}]*)\}", r"\1", s)


def normalize(answer: str) -> str:
    s = answer.strip()
    s = re.sub(r"\\(?:left|right)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\[!,;: ]|~", "", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\circ", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    s = _strip_text_wrappers(s)
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    s = re.sub(r"^[a-zA-Z]=(?=.)", "", s)  # "x=5" → "5"
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\{([^{}]+)\}(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt(\d+)", r"\\sqrt{\1}", s)
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    return s


def as_number(s: str) -> Fraction | None:
    """A normalised answer read as an exact number: 12, -0.5, 3/4, \\frac{3}{4}, -\\frac{3}{4}."""
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+(?:\.\d+)?)\}\{(-?\d+(?:\.\d+)?)\}", s)
    try:
        if m:
            value = Fraction(m.group(2)) / Fraction(m.group(3))
            return -value if m.group(1) else value
        m = re.fullmatch(r"(-?\d+(?:\.\d+)?)/(-?\d+(?:\.\d+)?)", s)
        if m:
            return Fraction(m.group(1)) / Fraction(m.group(2))
        if re.fullmatch(r"-?\d+(?:\.\d+)?", s):
            return Fraction(s)
    except ZeroDivisionError:
        return None
    return None


def equivalent(predicted: str | None, gold: str) -> bool:
    if predicted is None:
        return False
    a, b = normalize(predicted), normalize(gold)
    if a == b:
        return True
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return x == y or abs(float(x) - float(y)) <= 1e-6 * max(1.0, abs(float(y)))
    return False
