"""`specbench tune`'s suite: every speculative config family (configs that differ only in K)
expanded over the K values, one server per K, with the baseline, into one run directory; the run
session chooses K (``measure.best_k``) as it writes the run, and ``write_schedule`` turns that choice
into schedule.json. ``verify_suite`` is ``tune --verify``'s suite: the baseline and each schedule."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import SuiteError
from ..launch import load_engine
from ..measure.best_k import K_KEYS
from ..measure.tune_result import Schedule, TuneResult
from ..schemas.meta import RunMeta
from ..schemas.run_files import META, SCHEDULE
from ..suite import ServerConfig, Suite, load_suite
from ..util.jsonio import write_json
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


def write_schedule(out: Path, suite: Suite, meta: RunMeta) -> Path | None:
    """schedule.json from the K chosen when the run was written (None: no choice was made)."""
    stored = (meta.tune or {}).get("result")
    if stored is None:
        return None
    result = TuneResult.from_dict(stored, f"{out / META}: tune.result")
    path = out / SCHEDULE
    write_json(path, {"suite": str(suite.path), "run": str(out), "method": result.method,
                      "schedules": [s.to_dict() for s in result.schedules], "verify": f"specbench tune --verify {path}"})
    return path


def read_schedule(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SuiteError(f"{path}: schedule file not found") from None
    except json.JSONDecodeError as err:
        raise SuiteError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None


def verify_suite(schedule: dict[str, Any], where: str) -> Suite:
    """Baseline + one config per family serving its schedule, from the suite the schedule was tuned on."""
    if not isinstance(schedule, dict) or not isinstance(schedule.get("schedules"), list) or "suite" not in schedule:
        raise SuiteError(f"{where}: not a schedule written by specbench tune (needs 'suite' and 'schedules')")
    schedules = [Schedule.from_dict(s, f"{where}: schedules[{i}]") for i, s in enumerate(schedule["schedules"])]
    suite = load_suite(schedule["suite"])
    configs = [raw_config(suite, suite.baseline)] if suite.baseline else []
    if not configs:
        raise SuiteError(f"{schedule['suite']}: no baseline config to verify the schedule against")
    by_family = families([c for c in suite.configs if c is not suite.baseline and c.method and c.launched])
    for s in schedules:
        spec = s.speculative_config
        if not spec:
            continue
        members = by_family.get(s.family)
        if not members:
            raise SuiteError(f"{where}: family {s.family!r} no longer matches a config of {schedule['suite']}")
        raw = raw_config(suite, members[0])
        raw["name"] = f"{s.family}_schedule"
        raw["num_speculative_tokens"] = spec["num_speculative_tokens"]
        raw.pop("port", None)
        raw["speculative"] = {**{k: v for k, v in (raw.get("speculative") or {}).items() if k not in K_KEYS},
                              "num_speculative_tokens_per_batch_size": spec["num_speculative_tokens_per_batch_size"]}
        configs.append(raw)
    if len(configs) == 1:
        raise SuiteError(f"{where}: no schedule with an engine flag to verify (speculation off everywhere, or an "
                         "engine without a per-batch-size K)")
    return derived_suite(suite, "schedule", configs)
