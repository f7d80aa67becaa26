"""``load_prompts``: rows -> items -> category filter -> deterministic selection -> ``Prompt``.

Selection never depends on the config under test, so the baseline and every speculative config
see the same prompts in the same order, which is what makes paired speedups meaningful.

A file is read only as far as the selection needs: ``selection: first`` with a count stops at the
row that completes it (and, with ``categories``, once every category asked for has been seen), so
rows after it are never read, parsed or checked (a bad line or a repeated id there goes unnoticed,
and the prompts are the same as from reading it all). ``selection: shuffle`` and ``requests: all``
read and check every row: the shuffle's permutation depends on how many usable rows the file holds.
Both stream the file (no copy of its text is held); a shuffle of N keeps only each row's id and
category, then reads the file again up to its last chosen row for their text (``shuffled``), so
its memory does not grow with the file's text. ``requests: all`` keeps every prompt: the run sends them all.
"""

from __future__ import annotations

import random
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from ..errors import DatasetError
from ..schemas.request import Prompt
from . import generate
from .files import Row
from .recipes import RECIPES
from .rows import Item
from .sources import fetch_rows, local_file
from .spec import DatasetSpec
from .tokens import TokenFile, Tokens, tokens_for

T = TypeVar("T")


def load_prompts(spec: DatasetSpec, data_dir: Path | str | None = None, o200k: TokenFile | None = None) -> list[Prompt]:
    """The prompts of ``spec``, in benchmark order; ``data_dir`` overrides ``$SPECBENCH_DATA_DIR``; ``o200k``
    (the run stage's o200k_base file) counts tokens where the entry builds or filters by length.
    Reads the source only as far as the selection needs (see the module's docstring)."""
    tokens = tokens_for(spec.name, spec.tokenizer, o200k) if spec.needs_tokens else None

    def load(used: DatasetSpec) -> list[Prompt]:
        return load_prompts(used, data_dir, o200k)

    def rows(used: DatasetSpec) -> Iterator[Row]:
        return fetch_rows(used, data_dir)

    if spec.definition.generated:
        assert tokens is not None  # needs_tokens: every built set counts
        build = generate.shared_prefix if spec.source == "shared_prefix" else generate.long_context
        prompts = build(spec, tokens, load, rows)
    elif spec.definition.admit is not None:
        prompts = admitted(spec, data_dir, tokens)
    else:
        prompts = read_prompts(spec, data_dir)
    if spec.effective_options.get("system_tokens"):
        assert tokens is not None
        prompts = generate.with_system(spec, prompts, tokens, load, rows)
    return prompts


def read_prompts(spec: DatasetSpec, data_dir: Path | str | None) -> list[Prompt]:
    """A read set's prompts: the first N, a shuffle's N, or all."""
    if spec.selection == "shuffle" and spec.requests and local_file(spec, data_dir) is not None:
        return [to_prompt(spec, item) for item in shuffled(spec, data_dir)]
    items = iter_items(spec, fetch_rows(spec, data_dir))
    try:
        read = first_items(spec, items, spec.requests) if spec.selection == "first" and spec.requests else list(items)
    finally:
        items.close()  # an early stop closes the file now
    chosen = select(filter_categories(spec, read), spec.requests, spec.selection, spec.seed, spec.name)
    return [to_prompt(spec, item) for item in chosen]


def admitted(spec: DatasetSpec, data_dir: Path | str | None, tokens: Tokens | None) -> list[Prompt]:
    """A set with ``admit`` (ShareGPT): the kept rows in selection order (a shuffle of them all, or source
    order, read only as far as needed), and the first N the set admits, met in that order (vLLM's sampling)."""
    admit = spec.definition.admit
    assert admit is not None
    opts = spec.effective_options
    chosen: list[Item] = []
    items = iter_items(spec, fetch_rows(spec, data_dir))
    try:
        order = select(list(items), None, "shuffle", spec.seed, spec.name) if spec.selection == "shuffle" else items
        for item in order:
            if spec.requests is not None and len(chosen) == spec.requests:
                break
            if admit(item, opts, tokens):
                chosen.append(item)
    finally:
        items.close()
    if spec.requests is not None and len(chosen) < spec.requests:
        raise DatasetError(f"data set '{spec.name}': requests {spec.requests} exceeds the {len(chosen)} rows its "
                           f"rules take ({', '.join(f'{k}: {opts[k]}' for k in ('rule', 'lengths') if k in opts)})")
    if not chosen:
        raise DatasetError(f"data set '{spec.name}': no row passes its rules")
    return [to_prompt(spec, item) for item in chosen]


def shuffled(spec: DatasetSpec, data_dir: Path | str | None) -> list[Item]:
    """A shuffle's chosen items in its order, in two passes over a local file: every row read and
    checked, keeping only ids and categories (``light``), then the file read again up to the last
    chosen row, keeping only the chosen ones whole."""
    kept = filter_categories(spec, list(iter_items(spec, fetch_rows(spec, data_dir), light=True)))
    chosen = select(kept, spec.requests, spec.selection, spec.seed, spec.name)
    wanted, found = {item.id for item in chosen}, {}
    items = iter_items(spec, fetch_rows(spec, data_dir))
    try:
        for item in items:
            if item.id in wanted:
                found[item.id] = item
                if len(found) == len(wanted):
                    break
    finally:
        items.close()
    if len(found) < len(wanted):
        raise DatasetError(f"data set '{spec.name}': the file changed while it was read; load it again")
    return [found[item.id] for item in chosen]


def parse_items(spec: DatasetSpec, rows: Iterable[Row]) -> list[Item]:
    """Every usable row of ``rows`` as an ``Item``."""
    return list(iter_items(spec, rows))


def iter_items(spec: DatasetSpec, rows: Iterable[Row], light: bool = False) -> Generator[Item, None, None]:
    """The usable rows as ``Item``s, one as each is asked for; a repeated id among those read is an
    error, and so is a source read to its end without a usable row. ``light``: only id, category and
    tags are kept (each row is still parsed whole, so a bad one is found)."""
    definition, opts = spec.definition, spec.effective_options
    seen: dict[str, str] = {}
    for index, (where, row) in enumerate(rows):
        if definition.keep is not None and not definition.keep(row):
            continue
        item = definition.parse(row, where, index, opts)
        if item.id in seen:
            raise DatasetError(f"{where}: duplicate id '{item.id}' (first at {seen[item.id]})")
        seen[item.id] = where
        yield Item(item.id, (), item.category, tags=item.tags) if light else item
    if not seen:
        raise DatasetError(f"data set '{spec.name}': the source holds no usable rows")


def first_items(spec: DatasetSpec, items: Iterable[Item], wanted: int) -> list[Item]:
    """The items in source order up to the ``wanted``-th one the category filter keeps, read on until
    every category asked for has been seen (a category missing from the file stays an error)."""
    categories = set(spec.effective_options.get("categories") or ())
    read: list[Item] = []
    kept, found = 0, set[str | None]()
    for item in items:
        read.append(item)
        names = ({item.category} | item.tags) & categories
        if not categories or names:
            kept, found = kept + 1, found | names
        if kept >= wanted and found >= categories:
            break
    return read


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
    cap = opts.get("turns")
    turns = item.turns[:cap] if isinstance(cap, int) else item.turns  # None or "all": every turn
    first = recipe(turns[0], item.row or {})
    return Prompt(
        id=item.id,
        dataset=spec.name,
        turns=(first, *turns[1:]),
        category=item.category,
        system=opts.get("system") or item.system,
    )
