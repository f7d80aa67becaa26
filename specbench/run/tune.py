"""`specbench tune`'s suite: every speculative config family (configs that differ only in K)
expanded over the K values, one server per K, with the baseline, into one run directory;
``measure.best_k`` reads it back."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..errors import SuiteError
from ..launch import load_engine
from ..measure.best_k import K_KEYS
from ..suite import ServerConfig, Suite
from .explain import derived_suite, raw_config, spec_configs


def _family_key(c: ServerConfig) -> str:
    spec = {k: v for k, v in c.speculative.items() if k not in K_KEYS}
    return json.dumps([c.engine, c.method, c.drafter, spec, list(c.args), c.env, c.gpus], sort_keys=True, default=str)


def family_name(config: str) -> str:
    """``ngram_k3`` → ``ngram``: the config name without its K."""
    return re.sub(r"[_-]?k\d+$", "", config) or config


def families(configs: Sequence[ServerConfig]) -> dict[str, list[ServerConfig]]:
    """Configs that differ only in K, under one name each."""
    groups: dict[str, list[ServerConfig]] = {}
    for c in configs:
        groups.setdefault(_family_key(c), []).append(c)
    out: dict[str, list[ServerConfig]] = {}
    for members in groups.values():
        name = family_name(members[0].name)
        unique, i = name, 2
        while unique in out:
            unique, i = f"{name}{i}", i + 1
        out[unique] = members
    return out


def expand_tune(suite: Suite, ks: Sequence[int], only: Sequence[str] | None = None) -> tuple[Suite, dict[str, Any]]:
    """The suite to run (baseline + every family × K) and its plan (derived config → family, K)."""
    if not ks or any(k < 1 for k in ks):
        raise SuiteError(f"--k: expected positive integers, got {','.join(map(str, ks))} (K=0, no speculation, is "
                         "the baseline and always a candidate)")
    chosen = spec_configs(suite, only, "tune")
    assert suite.baseline is not None  # spec_configs raised otherwise
    configs = [raw_config(suite, suite.baseline)]
    plan: dict[str, Any] = {"ks": list(ks), "configs": {}, "families": {}}
    pool = [c for c in suite.configs if c is not suite.baseline and c.method and c.launched]
    for fam, members in families(pool).items():
        if not any(c in members for c in chosen):
            continue
        first = members[0]
        engine = load_engine(first.engine or suite.engine)
        plan["families"][fam] = {"from": [c.name for c in members], "engine": engine.name, "adapter": engine.adapter,
                                 "method": first.method, "drafter": first.drafter,
                                 "speculative": {k: v for k, v in first.speculative.items() if k not in K_KEYS}}
        for k in ks:
            raw = raw_config(suite, first)
            raw["name"] = f"{fam}_k{k}"
            raw["num_speculative_tokens"] = k
            raw.pop("port", None)
            raw.pop("baseline", None)
            if raw.get("speculative"):
                raw["speculative"] = {key: v for key, v in raw["speculative"].items() if key not in K_KEYS}
            configs.append(raw)
            plan["configs"][raw["name"]] = {"family": fam, "k": k}
    return derived_suite(suite, "tune", configs), plan
