"""`specbench tune`'s suite: every speculative config family (configs that differ only in K)
expanded over the K values, one server per K, with the baseline, into one run directory; the run
session chooses K (``measure.best_k``) as it writes the run, and ``write_schedule`` turns that choice
into schedule.json. ``verify_suite`` is ``tune --verify``'s suite: the baseline and each schedule."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from ..errors import ResultsError, SuiteError
from ..launch import read_engine
from ..measure.best_k import K_KEYS
from ..schemas.meta import RunMeta
from ..schemas.plans import ScheduleFile, TunedConfig, TuneFamily, TunePlan
from ..schemas.run_files import SCHEDULE
from ..suite import ServerConfig, Suite, read_suite
from ..util.jsonio import write_json
from .explain import DerivedConfig, derived_suite, spec_configs


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


def expand_tune(suite: Suite, ks: Sequence[int], only: Sequence[str] | None = None) -> tuple[Suite, TunePlan]:
    """The suite to run (baseline + every family × K) and its plan (derived config → family, K)."""
    if not ks or any(k < 1 for k in ks):
        raise SuiteError(f"--k: expected positive integers, got {','.join(map(str, ks))} (K=0, no speculation, is "
                         "the baseline and always a candidate)")
    chosen = spec_configs(suite, only, "tune")
    assert suite.baseline is not None  # spec_configs raised otherwise
    configs = [DerivedConfig(suite.baseline)]
    plan = TunePlan(list(ks))
    pool = [c for c in suite.configs if c is not suite.baseline and c.method and c.launched]
    for fam, members in families(pool).items():
        if not any(c in members for c in chosen):
            continue
        first = members[0]
        engine = read_engine(first.engine or suite.engine)
        plan.families[fam] = TuneFamily([c.name for c in members], engine.name, engine.adapter, first.method,
                                        first.drafter, {k: v for k, v in first.speculative.items() if k not in K_KEYS})
        for k in ks:
            configs.append(DerivedConfig(first, f"{fam}_k{k}", k, drop_speculative=K_KEYS))
            plan.configs[f"{fam}_k{k}"] = TunedConfig(fam, k)
    return derived_suite(suite, "tune", configs), plan


def write_schedule(out: Path, suite: Suite, meta: RunMeta) -> Path | None:
    """schedule.json from the K chosen when the run was written (None: no choice was made)."""
    result = meta.tune.result if meta.tune else None
    if result is None:
        return None
    path = out / SCHEDULE
    write_json(path, ScheduleFile(str(suite.path), str(out), result.method, result.schedules,
                                  f"specbench tune --verify {path}").to_dict())
    return path


def read_schedule(path: Path) -> ScheduleFile:
    """A schedule.json written by ``specbench tune``; a one-line SuiteError when it is not one."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SuiteError(f"{path}: schedule file not found") from None
    except json.JSONDecodeError as err:
        raise SuiteError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("schedules"), list) or "suite" not in data:
        raise SuiteError(f"{path}: not a schedule written by specbench tune (needs 'suite' and 'schedules')")
    try:
        schedule = ScheduleFile.from_dict(data, path)
    except ResultsError as err:
        raise SuiteError(str(err)) from None
    if schedule.suite is None or schedule.schedules is None:
        raise SuiteError(f"{path}: not a schedule written by specbench tune (needs 'suite' and 'schedules')")
    return schedule


def verify_suite(schedule: ScheduleFile, where: str) -> Suite:
    """Baseline + one config per family serving its schedule, from the suite the schedule was tuned on."""
    suite = read_suite(str(schedule.suite))  # read_schedule refused a file without it
    configs = [DerivedConfig(suite.baseline)] if suite.baseline else []
    if not configs:
        raise SuiteError(f"{schedule.suite}: no baseline config to verify the schedule against")
    by_family = families([c for c in suite.configs if c is not suite.baseline and c.method and c.launched])
    for s in schedule.schedules or []:
        spec = s.speculative_config
        if not spec:
            continue
        members = by_family.get(s.family)
        if not members:
            raise SuiteError(f"{where}: family {s.family!r} no longer matches a config of {schedule.suite}")
        configs.append(DerivedConfig(
            members[0], f"{s.family}_schedule", spec["num_speculative_tokens"],
            speculative={"num_speculative_tokens_per_batch_size": spec["num_speculative_tokens_per_batch_size"]},
            drop_speculative=K_KEYS, drop_keys=("port",)))
    if len(configs) == 1:
        raise SuiteError(f"{where}: no schedule with an engine flag to verify (speculation off everywhere, or an "
                         "engine without a per-batch-size K)")
    return derived_suite(suite, "schedule", configs)
