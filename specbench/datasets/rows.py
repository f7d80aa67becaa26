"""Turn one source row into an ``Item``: id, user turns, category. Pure functions, one per schema.

Each parser reads exactly the fields the canonical loader reads (docs/datasets.md), so a local
JSONL copy and the Hugging Face copy of a set give identical prompts and ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import DatasetError

SPEED_PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
ID_FIELDS = ("id", "question_id", "task_id", "prompt_id", "unique_id")
TEXT_FIELDS = ("prompt", "turns", "messages")


@dataclass(frozen=True)
class Item:
    """A parsed row before recipe and turn cap; ``tags`` are extra names the categories filter matches."""

    id: str
    turns: tuple[str, ...]
    category: str | None = None
    system: str | None = None
    tags: frozenset[str] = frozenset()
    row: Mapping[str, Any] | None = None


def field(row: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in row or row[key] is None:
        raise DatasetError(f"{where}: missing field '{key}'")
    return row[key]


def text(row: Mapping[str, Any], key: str, where: str) -> str:
    value = field(row, key, where)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: field '{key}' must be a non-empty string")
    return value


def turn_list(row: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = field(row, key, where)
    if isinstance(value, str):
        return (text(row, key, where),)
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(t, str) and t.strip() for t in value):
        raise DatasetError(f"{where}: field '{key}' must be a non-empty list of non-empty strings")
    return tuple(value)


def messages(row: Mapping[str, Any], key: str, where: str) -> tuple[tuple[str, ...], str | None]:
    """User turns and the system message of an OpenAI-style ``[{role, content}]`` list."""
    value = field(row, key, where)
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, Mapping) for m in value):
        raise DatasetError(f"{where}: field '{key}' must be a list of {{role, content}} objects")
    user = tuple(m.get("content") for m in value if m.get("role") == "user")
    if not user or not all(isinstance(t, str) and t.strip() for t in user):
        raise DatasetError(f"{where}: field '{key}' has no non-empty user message")
    system = next((m.get("content") for m in value if m.get("role") == "system"), None)
    return user, system if isinstance(system, str) and system else None


def any_turns(row: Mapping[str, Any], key: str, where: str) -> tuple[tuple[str, ...], str | None]:
    """A prompt field that may be a string, a list of strings, or a list of messages."""
    value = field(row, key, where)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], Mapping):
        return messages(row, key, where)
    return turn_list(row, key, where), None


def row_id(row: Mapping[str, Any], keys: tuple[str, ...], index: int) -> str:
    return next((str(row[k]) for k in keys if row.get(k) is not None), str(index))


def optional_str(row: Mapping[str, Any], key: str | None) -> str | None:
    value = row.get(key) if key else None
    return str(value) if value is not None and value != "" else None


def parse_gsm8k(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    return Item(str(index), (text(row, "question", where),), row=row)


def parse_math500(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    problem, subject = text(row, "problem", where), text(row, "subject", where)
    return Item(row_id(row, ("unique_id",), index), (problem,), subject, row=row)


def parse_humaneval(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    return Item(text(row, "task_id", where), (text(row, "prompt", where),), row=row)


def parse_mbpp(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    key = "prompt" if opts["variant"] == "sanitized" else "text"
    if not isinstance(field(row, "test_list", where), (list, tuple)):
        raise DatasetError(f"{where}: field 'test_list' must be a list of strings")
    return Item(str(field(row, "task_id", where)), (text(row, key, where),), row=row)


def in_mbpp_test_split(row: Mapping) -> bool:
    """The official MBPP test split is task_ids 11..510 (the HF ``test`` split, both variants)."""
    task_id = row.get("task_id")
    return isinstance(task_id, int) and 11 <= task_id <= 510


def parse_mt_bench(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    turns = turn_list(row, "turns" if "turns" in row else "prompt", where)
    return Item(row_id(row, ("question_id", "prompt_id"), index), turns, text(row, "category", where), row=row)


def parse_spec_bench(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    raw = text(row, "category", where)
    subtask = "mt_bench" if raw in MT_BENCH_CATEGORIES else raw
    turns = turn_list(row, "turns", where)
    return Item(str(field(row, "question_id", where)), turns, subtask, tags=frozenset({raw}), row=row)


def parse_ultrachat(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    if "messages" in row and row["messages"] is not None:
        turns, system = messages(row, "messages", where)
    else:
        turns, system = (text(row, "prompt", where),), None
    return Item(row_id(row, ("prompt_id",), index), turns, system=system, row=row)


def parse_speed_bench(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    turns = turn_list(row, "turns", where)
    qid = str(field(row, "question_id", where))
    if any(SPEED_PLACEHOLDER in t for t in turns):
        raise DatasetError(
            f"{where}: SPEED-Bench row {qid} holds the placeholder text instead of a prompt; the public HF copy "
            "must be rebuilt with NVIDIA's prepare script (Model-Optimizer examples/specdec_bench: "
            "prepare_data.py --dataset speed --config all) and its output given via data_dir or path"
        )
    sub = optional_str(row, "sub_category")
    return Item(qid, turns, text(row, "category", where), tags=frozenset({sub} if sub else ()), row=row)


def parse_builtin(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    return Item(text(row, "id", where), (text(row, "prompt", where),), text(row, "category", where), row=row)


def parse_file(row: Mapping, where: str, index: int, opts: Mapping) -> Item:
    """A user file: the prompt in ``field`` (default: first of prompt / turns / messages present)."""
    key = opts.get("field") or next((k for k in TEXT_FIELDS if k in row), TEXT_FIELDS[0])
    turns, system = any_turns(row, key, where)
    id_keys = (opts["id_field"],) if opts.get("id_field") else ID_FIELDS
    if opts.get("id_field") and row.get(opts["id_field"]) is None:
        raise DatasetError(f"{where}: missing field '{opts['id_field']}'")
    return Item(row_id(row, id_keys, index), turns, optional_str(row, opts.get("category_field")), system, row=row)
