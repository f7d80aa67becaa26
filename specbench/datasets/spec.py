"""``DatasetSpec``: one entry of a suite's ``datasets:`` list, validated when the suite is read.

Every mistake (unknown key, wrong type, unknown set / recipe / option value, missing file) is a
one-line ``SuiteError`` naming the suite file and key, before any server is started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SuiteError
from .files import SUFFIXES
from .registry import COMMON_OPTIONS, ORDERS, QUESTION_SETS, REGISTRY, SPEED_CONFIGS, TEXT_SOURCES, DatasetDef
from .sharegpt import LENGTHS, RULES
from .tokens import TOKENIZERS

BASE_KEYS = ("name", "source", "path", "requests", "selection", "seed", "recipe")
SELECTIONS = ("first", "shuffle")
#: the bounds of a text built to a length: below, a prefix says little; above, no model's context reaches
MIN_BUILT_TOKENS, MAX_BUILT_TOKENS = 64, 1 << 20
MAX_GROUP_COUNT = 100_000


def _str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a positive integer, got {value!r}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be an integer, got {value!r}")
    return value


def _bounded(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"must be an integer from {low} to {high}, got {value!r}")
        return value

    return check


def _turns(value: Any) -> int | str:
    return "all" if value == "all" else _positive_int(value)


def _requests(value: Any) -> int | None:
    return None if value == "all" else _positive_int(value)


def _choice(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return check


def _names(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(v, str) and v for v in items):
        raise ValueError("must be a category name or a non-empty list of names")
    return tuple(items)


OPTION_CHECKS: dict[str, Callable[[Any], Any]] = {
    "variant": _choice("sanitized", "full"),
    "turns": _turns,
    "config": _choice(*SPEED_CONFIGS),
    "groups": _bounded(1, MAX_GROUP_COUNT),
    "per_group": _bounded(1, MAX_GROUP_COUNT),
    "prefix_tokens": _bounded(MIN_BUILT_TOKENS, MAX_BUILT_TOKENS),
    "input_tokens": _bounded(MIN_BUILT_TOKENS, MAX_BUILT_TOKENS),
    "system_tokens": _bounded(MIN_BUILT_TOKENS, MAX_BUILT_TOKENS),
    "questions": _choice(*QUESTION_SETS),
    "text_from": _choice(*TEXT_SOURCES),
    "order": _choice(*ORDERS),
    "tokenizer": _choice(*TOKENIZERS),
    "rule": _choice(*RULES),
    "lengths": _choice(*LENGTHS),
    "categories": _names,
    "system": _str,
    "field": _str,
    "category_field": _str,
    "id_field": _str,
}


@dataclass(frozen=True)
class DatasetChoices:
    """A data set as the loader resolves it (``DatasetSpec.describe``)."""

    name: str
    source: str
    path: str | None
    requests: int | None
    selection: str
    seed: int
    recipe: str
    options: dict[str, object]


@dataclass(frozen=True)
class DatasetSpec:
    """A prompt set as the suite asks for it; ``options`` holds only the set-specific keys given."""

    name: str
    source: str
    path: Path | None = None
    requests: int | None = None
    selection: str = "first"
    seed: int = 0
    recipe: str | None = None
    options: dict = field(default_factory=dict, hash=False)

    @property
    def definition(self) -> DatasetDef:
        return REGISTRY[self.source]

    @property
    def effective_recipe(self) -> str:
        return self.recipe or self.definition.default_recipe

    @property
    def effective_options(self) -> Mapping[str, Any]:
        """Set defaults overlaid with the suite's options: what the loader actually uses (each set's own
        keys, as ``registry.DatasetDef.options`` declares them)."""
        return {**COMMON_OPTIONS, **self.definition.options, **self.options}

    @property
    def tokenizer(self) -> str:
        return self.effective_options.get("tokenizer") or "o200k"

    @property
    def needs_tokens(self) -> bool:
        """Whether loading counts tokens: a set built to a length, a ``system_tokens`` prompt, ShareGPT's lengths."""
        opts = self.effective_options
        return bool(self.definition.generated or opts.get("system_tokens")
                    or (self.definition.admit is not None and opts.get("lengths") == "vllm"))

    @property
    def least_tokens(self) -> tuple[str, int] | None:
        """(key, tokens): the key that makes every prompt at least that many tokens long, before its question
        (the prefix, the whole input, the system prompt; with ``system_tokens`` the sum), for the parse-time
        context check; None when no key fixes a length."""
        opts = self.effective_options
        parts = [(k, opts[k]) for k in ("prefix_tokens", "input_tokens", "system_tokens") if opts.get(k)]
        return (parts[0][0], sum(n for _, n in parts)) if parts else None

    def describe(self) -> DatasetChoices:
        """The resolved choices: defaults filled in, options unset left out."""
        opts = {k: list(v) if isinstance(v, tuple) else v for k, v in self.effective_options.items() if v is not None}
        return DatasetChoices(name=self.name, source=self.source, path=str(self.path) if self.path else None,
                              requests=self.requests, selection=self.selection, seed=self.seed,
                              recipe=self.effective_recipe, options=opts)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | str, where: str, base_dir: Path) -> DatasetSpec:
        """Parse one ``datasets:`` entry; a bare string is shorthand for ``{name: <string>}``."""
        if isinstance(data, str):
            data = {"name": data}
        if not isinstance(data, Mapping):
            raise SuiteError(f"{where}: expected a mapping with at least 'name', got {type(data).__name__}")

        def fail(key: str, msg: str) -> SuiteError:
            return SuiteError(f"{where}.{key}: {msg}")

        def get(key: str, check: Callable[[Any], Any], default: Any = None) -> Any:
            if data.get(key) is None:
                return default
            try:
                return check(data[key])
            except ValueError as exc:
                raise fail(key, str(exc)) from None

        if data.get("name") is None:
            raise SuiteError(f"{where}: missing key 'name'")
        name = get("name", _str)
        path = get("path", _str)
        source = get("source", _str) or (name if name in REGISTRY else "file" if path else None)
        if source is None:
            raise fail("name", f"unknown data set '{name}' (known: {', '.join(REGISTRY)}); give path: for a local file")
        if source not in REGISTRY:
            raise fail("source", f"unknown data set '{source}' (known: {', '.join(REGISTRY)})")
        definition = REGISTRY[source]

        allowed = (*(definition.base_keys or BASE_KEYS), *COMMON_OPTIONS, *definition.options)
        for key in data:
            if key not in allowed:
                raise fail(str(key), f"unknown key for data set '{source}' (allowed: {', '.join(allowed)})")

        if source == "file" and path is None:
            raise fail("path", "required when source is 'file'")
        resolved = _resolve_path(path, base_dir, fail) if path is not None else None

        recipe = get("recipe", _choice(*definition.recipes))
        option_keys = (*COMMON_OPTIONS, *definition.options)
        options = {key: get(key, OPTION_CHECKS[key]) for key in option_keys if data.get(key) is not None}
        known = definition.categories
        unknown = [c for c in options.get("categories", ()) if known is not None and c not in known]
        if unknown and known is not None:
            msg = f"unknown categories {', '.join(unknown)} for '{source}' (known: {', '.join(known)})"
            raise fail("categories", msg)
        spec = cls(
            name=name,
            source=source,
            path=resolved,
            requests=get("requests", _requests),
            selection=get("selection", _choice(*SELECTIONS), "first"),
            seed=get("seed", _int, 0),
            recipe=recipe,
            options=options,
        )
        problem = _combination(spec, data)
        if problem:
            raise fail(*problem)
        return spec


def used_sets(spec: DatasetSpec) -> tuple[DatasetSpec, ...]:
    """The registry sets a built set (or a ``system_tokens`` prompt) reads: its questions, then its text."""
    opts = spec.effective_options
    subs = []
    if spec.definition.generated:
        q = opts["questions"]
        subs.append(DatasetSpec(q, q, options={"tokenizer": spec.tokenizer} if q == "sharegpt" else {}))
    if spec.definition.generated or opts.get("system_tokens"):
        text_from = opts.get("text_from") or "articles"
        for source in TEXT_SOURCES[text_from]:
            categories = {"categories": ("summarization",)} if text_from == "articles" else {}
            subs.append(DatasetSpec(source, source, recipe="plain", options=categories))
    return tuple(subs)


def _combination(spec: DatasetSpec, data: Mapping[str, Any]) -> tuple[str, str] | None:
    """(key, why) of keys that are each fine but do not go together, or a key a built set needs."""
    opts, definition = spec.effective_options, spec.definition
    if spec.source == "long_context":
        for key in ("input_tokens", "requests"):
            if data.get(key) is None:
                return key, "required for long_context (prompts of input_tokens tokens, how many)"
    if opts.get("system") and opts.get("system_tokens"):
        return "system_tokens", "give system (a text) or system_tokens (a built one), not both"
    if "text_from" in data and not (definition.generated or opts.get("system_tokens")):
        return "text_from", "only with system_tokens (the text a system prompt is built from)"
    if "tokenizer" in data and not spec.needs_tokens:
        return "tokenizer", "only where tokens are counted: system_tokens, lengths: vllm, or a set built to a length"
    if opts.get("rule") == "vllm" and opts.get("turns") != 1:
        return "turns", "rule: vllm sends a conversation's first message only (vLLM's sampling); use rule: human"
    return None


def _resolve_path(path: str, base_dir: Path, fail: Callable[[str, str], SuiteError]) -> Path:
    resolved = (Path(base_dir) / Path(path).expanduser()).resolve()
    if resolved.suffix.lower() not in SUFFIXES:
        raise fail("path", f"unsupported file type '{resolved.suffix}' (use .jsonl, .json or .parquet): {resolved}")
    if not resolved.is_file():
        raise fail("path", f"file not found: {resolved}")
    return resolved
