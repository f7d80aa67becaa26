"""``load_prompts``: rows -> items -> category filter -> deterministic selection -> ``Prompt``.

Selection never depends on the config under test, so the baseline and every speculative config
see the same prompts in the same order, which is what makes paired speedups meaningful.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from ..errors import DatasetError
from ..schemas.request import Prompt
from .files import Row
from .recipes import RECIPES
from .rows import Item
from .sources import fetch_rows
from .spec import DatasetSpec

T = TypeVar("T")


def load_prompts(spec: DatasetSpec, data_dir: Path | str | None = None) -> list[Prompt]:
    """The prompts of ``spec``, in benchmark order; ``data_dir`` overrides ``$SPECBENCH_DATA_DIR``."""
    items = parse_items(spec, fetch_rows(spec, data_dir))
    items = filter_categories(spec, items)
    chosen = select(items, spec.requests, spec.selection, spec.seed, spec.name)
    return [to_prompt(spec, item) for item in chosen]


def parse_items(spec: DatasetSpec, rows: Sequence[Row]) -> list[Item]:
    definition, opts = spec.definition, spec.effective_options
    items: list[Item] = []
    seen: dict[str, str] = {}
    for index, (where, row) in enumerate(rows):
        if definition.keep is not None and not definition.keep(row):
            continue
        item = definition.parse(row, where, index, opts)
        if item.id in seen:
            raise DatasetError(f"{where}: duplicate id '{item.id}' (first at {seen[item.id]})")
        seen[item.id] = where
        items.append(item)
    if not items:
        raise DatasetError(f"data set '{spec.name}': the source holds no usable rows")
    return items


def filter_categories(spec: DatasetSpec, items: list[Item]) -> list[Item]:
    wanted = spec.effective_options.get("categories")
    if not wanted:
        return items
    kept = [i for i in items if i.category in wanted or i.tags & set(wanted)]
    present = {i.category for i in kept} | {t for i in kept for t in i.tags}
    missing = [c for c in wanted if c not in present]
    if missing:
        known = sorted({i.category for i in items if i.category} | {t for i in items for t in i.tags})
        raise DatasetError(
            f"data set '{spec.name}': no rows in categories {', '.join(missing)} "
            f"(present: {', '.join(known) or 'none'})"
        )
    return kept


def select(items: Sequence[T], requests: int | None, selection: str, seed: int, name: str = "") -> list[T]:
    """First N in source order, or a ``random.Random(seed)`` shuffle of all rows then the first N."""
    if requests is not None and requests > len(items):
        raise DatasetError(f"data set '{name}': requests {requests} exceeds the {len(items)} rows available")
    pool = list(items)
    if selection == "shuffle":
        random.Random(seed).shuffle(pool)
    elif selection != "first":
        raise DatasetError(f"data set '{name}': unknown selection '{selection}' (first or shuffle)")
    return pool if requests is None else pool[:requests]


def to_prompt(spec: DatasetSpec, item: Item) -> Prompt:
    opts = spec.effective_options
    recipe = RECIPES[spec.effective_recipe]
    turns = item.turns[: opts["turns"]] if opts.get("turns") else item.turns
    first = recipe(turns[0], item.row or {})
    return Prompt(
        id=item.id,
        dataset=spec.name,
        turns=(first, *turns[1:]),
        category=item.category,
        system=opts.get("system") or item.system,
    )
