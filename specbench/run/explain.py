"""What `whatif` and `tune` share: deriving a suite from a suite, and running it with its plan in meta.json.

A derived suite is built as the YAML mapping a user could have written (so it is validated like
any suite file and its configs appear in ``meta.json`` and the comparability fingerprint), then
run by the normal runner into one run directory; the plan (which derived config is which
acceptance length or K) travels in ``meta.json`` under the command's key, where ``specbench
report`` finds it again.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SuiteError
from ..suite import ServerConfig, Suite, parse_suite

_NAME_OK = re.compile(r"^[A-Za-z0-9_.@+-]+$")


def spec_configs(suite: Suite, only: Sequence[str] | None, command: str) -> list[ServerConfig]:
    """The suite's speculative configs (or the ``--config`` ones), each launched by specbench."""
    base = suite.baseline
    if base is None:
        raise SuiteError(f"{suite.path}: {command} needs a baseline config (named 'baseline' or marked baseline: true)")
    by_name = {c.name: c for c in suite.configs}
    if only:
        unknown = [n for n in only if n not in by_name]
        if unknown:
            raise SuiteError(f"{suite.path}: --config {unknown[0]!r}: no such config (configs: {', '.join(by_name)})")
        chosen = [by_name[n] for n in only]
    else:
        chosen = [c for c in suite.configs if c is not base and c.method]
    if not chosen:
        raise SuiteError(f"{suite.path}: {command}: no speculative config (one with method:) to vary")
    for c in chosen:
        if c is base or not c.method:
            raise SuiteError(f"{suite.path}: config {c.name!r}: {command} varies speculative configs; this one has no method")
        if not c.launched:
            raise SuiteError(f"{suite.path}: config {c.name!r} runs at {c.url}: {command} starts one server per "
                             "variant, so the config needs launch settings (method, drafter, engine) instead of url:")
    return chosen


@dataclass(frozen=True)
class DerivedConfig:
    """One config of a derived suite: the suite's config ``of`` as written, and what the derived suite changes in it.

    Renamed (``name``), it loses ``drop_keys`` (its port, its baseline mark); ``speculative`` is set over its own
    speculative settings less ``drop_speculative`` (set only when either changes something), ``env`` over its own.
    """

    of: ServerConfig
    name: str | None = None
    num_speculative_tokens: int | None = None
    datasets: tuple[str, ...] | None = None
    speculative: Mapping[str, object] = field(default_factory=dict)
    drop_speculative: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    drop_keys: tuple[str, ...] = ("port", "baseline")

    @property
    def derived_name(self) -> str:
        return self.name or self.of.name


def _written(suite: Suite, c: DerivedConfig) -> dict[str, object]:
    """The config as a suite file would have it (its keys in the order they were written, then the ones added)."""
    raw: dict[str, Any] = dict(copy.deepcopy(suite.raw_config(c.of.name))) or {"name": c.of.name}
    if c.name is not None:
        raw["name"] = c.name
        for key in c.drop_keys:
            raw.pop(key, None)
    if c.num_speculative_tokens is not None:
        raw["num_speculative_tokens"] = c.num_speculative_tokens
    if c.datasets is not None:
        raw["datasets"] = list(c.datasets)
    own = raw.get("speculative") or {}
    if c.speculative or (c.drop_speculative and own):
        raw["speculative"] = {**{k: v for k, v in own.items() if k not in c.drop_speculative}, **c.speculative}
    if c.env:
        raw["env"] = {**(raw.get("env") or {}), **c.env}
    return raw


def derived_suite(suite: Suite, suffix: str, configs: Sequence[DerivedConfig], datasets: Sequence[str] | None = None) -> Suite:
    """``suite`` renamed ``<name>-<suffix>`` with these configs (and only ``datasets``, when given), validated
    like a suite file."""
    for c in configs:
        if not _NAME_OK.match(c.derived_name):
            raise SuiteError(f"{suite.path}: derived config name {c.derived_name!r} is not usable as a file name")
    raw = copy.deepcopy(suite.raw)
    raw["name"] = f"{suite.name}-{suffix}"
    raw["configs"] = [_written(suite, c) for c in configs]
    if datasets is not None:
        raw["datasets"] = [d for d in raw.get("datasets") or [] if (d.get("name") if isinstance(d, dict) else d) in datasets]
        grade = (raw.get("load") or {}).get("grade")
        if isinstance(grade, list):
            raw["load"]["grade"] = [g for g in grade if g in datasets] or False
    return parse_suite(raw, suite.path)


