"""Task accuracy, graded only when the suite asks (``load.grade``), paired with the baseline.

gsm8k / math500: the final answer against the gold one (``answers.py``); humaneval / mbpp: pass@1,
the program run with the set's tests (``programs.py``). Each measured first-turn request gets a
``grade`` (``{"correct", "answer", "gold", "how"}`` or for code ``{"correct", "detail", "network"}``)
stored with it in requests.jsonl, so results can be rebuilt without grading again. A failed
request is not graded; an answer cut by max_tokens is graded like any other (usually wrong) and
counted in ``accuracy_truncated``.

Per cell: ``accuracy`` = correct ÷ graded and ``accuracy_compared`` = graded; vs the baseline on
the prompts both graded: the difference in accuracy with a paired bootstrap 95 % CI (resampling
prompts, 2000 resamples) and the exact McNemar p-value (two-sided binomial test on the prompts
where exactly one of the two was right).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..datasets.loader import parse_items
from ..datasets.sources import fetch_rows
from ..schemas.request import RequestRecord
from ..schemas.row_quality import Accuracy, PairedAccuracy
from ..util.bootstrap import bootstrap_samples
from . import answers, programs

CODE_TIMEOUT_S = 10.0
DIFF_METHOD = ("paired bootstrap over prompts (2000 resamples) for the 95% CI; "
               "exact McNemar test (two-sided, discordant prompts) for the p-value")


@dataclass(frozen=True)
class Gold:
    kind: str  # one of GRADERS
    answer: str | None = None
    prompt: str | None = None
    tests: tuple[str, ...] = ()
    entry_point: str | None = None
    imports: tuple[str, ...] = ()
    setup: str = ""


def _texts(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


def gold_from_row(kind: str, row: Mapping[str, object]) -> Gold:
    """The gold answer or tests of a data set's row (as its file holds it)."""
    if kind == "gsm8k":
        return Gold(kind, answer=answers.gsm8k_gold(str(row["answer"])))
    if kind == "math500":
        return Gold(kind, answer=str(row["answer"]))
    if kind == "humaneval":
        return Gold(kind, prompt=str(row["prompt"]), tests=(str(row["test"]),), entry_point=str(row["entry_point"]))
    return Gold(kind, tests=_texts(row.get("test_list")), imports=_texts(row.get("test_imports")),
                setup=str(row.get("test_setup_code") or ""))


@functools.lru_cache(maxsize=16)
def golds(spec, data_dir: Path | None) -> dict[str, Gold]:
    """Gold answers / tests of a data set by prompt id, read from the same rows as its prompts."""
    return {item.id: gold_from_row(spec.source, dict(item.row or {})) for item in parse_items(spec, fetch_rows(spec, data_dir))}


@dataclass(frozen=True)
class AnswerGrade:
    """A final answer's grade (math sets), requests.jsonl's ``grade``: what was found, the gold, and how."""

    correct: bool
    answer: str | None
    gold: str
    how: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ProgramGrade:
    """A program's grade (code sets), requests.jsonl's ``grade``: its run and the guards in force."""

    correct: bool
    detail: str
    network: str | None
    user: str | None = None  # None: no program ran, no ``user`` key

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"correct": self.correct, "detail": self.detail, "network": self.network}
        if self.user is not None:
            out["user"] = self.user
        return out


def grade_answer(text: str, gold: Gold) -> AnswerGrade | ProgramGrade:
    """One answer against its gold; the code sets run a program (seconds), the math sets do not."""
    if gold.kind in ("gsm8k", "math500"):
        assert gold.answer is not None  # gold_from_row sets it for these sets
        found, how = answers.extract_gsm8k(text) if gold.kind == "gsm8k" else answers.extract_math(text)
        return AnswerGrade(answers.equivalent(found, gold.answer), found, gold.answer, how)
    if gold.kind == "humaneval":
        assert gold.prompt is not None and gold.entry_point is not None  # gold_from_row sets them for humaneval
        program = programs.humaneval_program(text, gold.prompt, gold.tests[0], gold.entry_point)
    else:
        program = programs.mbpp_program(text, list(gold.tests), list(gold.imports), gold.setup)
    if program is None:
        return ProgramGrade(False, "no code in the answer", None)
    result = programs.run_program(program, CODE_TIMEOUT_S)
    return ProgramGrade(result.passed, result.detail, result.network, result.user)


def grade_records(records: Sequence[RequestRecord], gold: dict[str, Gold], workers: int = 2) -> None:
    """Set ``grade`` on each successful measured first-turn request whose prompt has a gold."""
    todo = [r for r in records if r.phase == "measure" and r.ok and r.turn == 0 and r.prompt_id in gold]
    missing = [r for r in records if r.phase == "measure" and r.ok and r.turn == 0 and r.prompt_id not in gold]
    for r in missing:
        r.grade = {"correct": None, "detail": f"no gold answer for prompt {r.prompt_id!r}"}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for r, g in zip(todo, pool.map(lambda rec: grade_answer(rec.text, gold[rec.prompt_id]), todo)):
            r.grade = g.to_dict()


def grade_phase(suite, dataset: str, records: Sequence[RequestRecord]) -> None:
    """Grade a phase's records when the suite asks for this data set (the runner calls this once per phase)."""
    if dataset not in (suite.load.grade or ()):
        return
    spec = next(d for d in suite.datasets if d.name == dataset)
    grade_records(records, golds(spec, suite.data_dir), workers=min(4, os.cpu_count() or 1))


# ---- per cell, and paired with the baseline ----------------------------------------------------

def _correct(r: RequestRecord) -> bool | None:
    g = getattr(r, "grade", None)
    return g.get("correct") if isinstance(g, dict) and isinstance(g.get("correct"), bool) else None


def accuracy_summary(records: Sequence[RequestRecord], graded_set: bool) -> Accuracy | None:
    """accuracy over the cell's graded requests; null (with ``accuracy_error``) when none was graded;
    None (no key at all) when the suite does not grade the set."""
    if not graded_set:
        return None
    measured = [r for r in records if r.phase == "measure" and r.turn == 0]
    verdicts = [(r, _correct(r)) for r in measured]
    graded = [(r, c) for r, c in verdicts if c is not None]
    nets = {net for r, _ in graded if (net := (r.grade or {}).get("network")) is not None}
    return Accuracy(accuracy=sum(1 for _, c in graded if c) / len(graded) if graded else None,
                    accuracy_compared=len(graded), accuracy_ungraded=len(measured) - len(graded),
                    accuracy_truncated=sum(1 for r, c in graded if r.finish_reason == "length"),
                    accuracy_error=None if graded else ("no request was graded (failed requests are not graded; "
                                                        "a run measured before grading was switched on has no grades)"),
                    grade_network_guard=" + ".join(sorted(nets)) if nets else None)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c.

    The binomial tail Σ C(n, i), i ≤ min(b, c), is summed in exact integers, each term from the one
    before (C(n, i) = C(n, i−1)·(n−i+1)/i): one ``math.comb`` per term took minutes at n = 50,000."""
    n = b + c
    if n == 0:
        return 1.0
    term = tail = 1
    for i in range(1, min(b, c) + 1):
        term = term * (n - i + 1) // i
        tail += term
    return min(1.0, 2 * (tail / 2 ** n))


def paired_accuracy(pairs: Sequence[tuple[bool, bool]], resamples: int = 2000, seed: int = 0) -> PairedAccuracy:
    """Config − baseline accuracy on the same prompts, its bootstrap 95% CI, and McNemar's p."""
    if not pairs:
        return PairedAccuracy()
    arr = np.array(pairs, dtype=float)
    d = arr[:, 0] - arr[:, 1]
    means = bootstrap_samples(lambda idx: d[idx].mean(axis=1), len(d), resamples, seed)
    lo, hi = np.percentile(means, [2.5, 97.5])
    only_config = int(((arr[:, 0] == 1) & (arr[:, 1] == 0)).sum())
    only_base = int(((arr[:, 0] == 0) & (arr[:, 1] == 1)).sum())
    return PairedAccuracy(accuracy_diff_vs_baseline=float(d.mean()), accuracy_diff_ci_low=float(lo),
                          accuracy_diff_ci_high=float(hi), accuracy_mcnemar_p=mcnemar_exact(only_config, only_base),
                          accuracy_paired_prompts=len(pairs), accuracy_diff_method=DIFF_METHOD)


def accuracy_pairs(config: Sequence[RequestRecord], baseline: Sequence[RequestRecord]) -> list[tuple[bool, bool]]:
    """(config right, baseline right) for each prompt (and repeat) graded under both."""
    key = lambda r: (r.prompt_id, r.turn, r.repeat)  # noqa: E731
    base = {key(r): _correct(r) for r in baseline if r.phase == "measure"}
    return [(c, b) for r in config if r.phase == "measure"
            and (c := _correct(r)) is not None and (b := base.get(key(r))) is not None]
