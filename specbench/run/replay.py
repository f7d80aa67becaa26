"""`specbench whatif SUITE --profile FILE`'s suite: each speculative config replayed, per data set, at the
acceptance an acceptance profile (``specbench profile``) gives for that data set and the config's k.

The acceptance is a server setting, so each (config, data set) is its own derived config that measures only that
data set (``datasets:``), at every load point of the suite, beside the baseline, in one run directory:

- vLLM: ``speculative: {rejection_sample_method: synthetic, synthetic_acceptance_rates: [p_1..p_k]}``, every
  position of the profile (the drafter's real compute, acceptance fixed per position);
- SGLang: ``env: {SGLANG_SIMULATE_ACC_LEN: L, SGLANG_SIMULATE_ACC_METHOD: match-expected}``, the mean length only
  (floor/ceil of L weighted so the mean is L, one length per verify step for the whole batch): the per-position
  shape is not reproduced, and every such cell says so. DSPARK rounds L to a whole number of accepted drafts,
  round(min(max(L−1, 0), k)); it is replayed (with SGLANG_RAGGED_VERIFY_MODE=static, flagged) only when that
  rounded length is within the 3 % the report flags anyway, and refused otherwise: a replay at another length
  is not a prediction for this profile.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProfileError, SuiteError
from ..launch import Engine
from ..measure.profile import SYNTHETIC_ENV, rates_problem
from ..measure.replay import LENGTH_FLAG, Choice, Entry, choose, read_profile
from ..schemas.plans import ProfileRef, ProfileSpeedup, ReplayedConfig, WhatifPlan
from ..suite import ServerConfig, Suite
from .explain import DerivedConfig, derived_suite, spec_configs
from .whatif import SYNTHETIC_KEYS, package_root, read_text, synthetic_config, synthetic_support

SGLANG_METHODS = ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "DSPARK")
SGLANG_ENV = ("SGLANG_SIMULATE_ACC_LEN", "SGLANG_SIMULATE_ACC_METHOD", "SGLANG_SIMULATE_ACC_TOKEN_MODE")
MEAN_ONLY = "SGLang replays the mean acceptance length only: per-position shape not reproduced"


def read_profile_file(path: str | Path) -> tuple[list[Entry], ProfileRef]:
    """The checked entries of a profile file, and what the plan records of it (path, sha256, format)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"{path}: profile file not found") from None
    except OSError as err:
        raise ProfileError(f"{path}: cannot read: {err.strerror}") from None
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ProfileError(f"{path}: not a JSON profile file ({type(err).__name__}: {str(err).splitlines()[0]})") from None
    entries = read_profile(parsed, str(path))
    return entries, ProfileRef(str(path.resolve()), hashlib.sha256(data).hexdigest(), parsed["format"])


def replay_support(engine: Engine, python: str | None = None) -> str | None:
    """None when ``engine`` can replay a profile: vLLM with synthetic_acceptance_rates, or SGLang with
    SGLANG_SIMULATE_ACC_LEN (a launcher's ``speculative.synthetic_acceptance`` declares either); else why not."""
    if engine.adapter != "sglang":
        return synthetic_support(engine, python, "synthetic_acceptance_rates")
    declared = engine.launcher.speculative.synthetic_acceptance
    if declared is True:
        return None
    if isinstance(declared, str) and declared:
        return declared
    root, why = package_root(engine, "sglang", python)
    if root is None:
        return why
    if SGLANG_ENV[0] not in read_text(root / "srt" / "environ.py"):
        return f"engine {engine.name}: the SGLang at {root} has no {SGLANG_ENV[0]} in srt/environ.py (SGLang 0.5.16 has it)"
    return None


def replay_name(config: str, dataset: str) -> str:
    return f"{config}_profile_{dataset}"


@dataclass(frozen=True)
class Settings:
    """What one derived config sets on its server to replay a profile entry."""

    mode: str  # "rates" | "mean_length"
    replayed_length: float
    speculative: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    note: str | None = None


def engine_settings(adapter: str, method: str, k: int, choice: Choice, where: str) -> Settings:
    """The server settings that replay ``choice``; ProfileError (one line) when this engine cannot."""
    if adapter != "sglang":
        rates = [round(p, 6) for p in choice.rates]  # rounding is monotone: still non-increasing, still in [0, 1]
        why = rates_problem(rates, k)
        if why:
            raise ProfileError(f"{where}.acceptance_per_position: {why}")
        return Settings("rates", 1 + sum(rates), {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": rates})
    length, algo = choice.length, method.upper()
    if algo not in SGLANG_METHODS:
        raise ProfileError(f"{where}: SGLang honours {SGLANG_ENV[0]} for {', '.join(SGLANG_METHODS)} only, not {algo}")
    env = {SGLANG_ENV[0]: f"{length:.6g}", SGLANG_ENV[1]: "match-expected"}
    if algo != "DSPARK":
        return Settings("mean_length", length, env=env, note=MEAN_ONLY)
    drafts = round(min(max(length - 1, 0), k))
    rounded = 1 + drafts
    gap = (rounded - length) / length
    if abs(gap) > LENGTH_FLAG:
        raise ProfileError(f"{where}: SGLang's DSPARK rounds {SGLANG_ENV[0]} to a whole number of accepted drafts "
                           f"(round(min(max(L−1, 0), k)) = {drafts} → length {rounded} for the profile's {length:.3f}, "
                           f"{gap:+.1%}): the replay would not be at the profile's length; replay it on vLLM "
                           "(synthetic_acceptance_rates) instead")
    return Settings("mean_length", float(rounded), env={**env, "SGLANG_RAGGED_VERIFY_MODE": "static"},
                    note=f"{MEAN_ONLY}; DSPARK rounds it to {rounded} ({drafts} accepted drafts per step, {gap:+.1%})")


def _refuse_set(suite: Suite, c: ServerConfig) -> None:
    if any(key in c.speculative for key in SYNTHETIC_KEYS) or any(key in c.env for key in SGLANG_ENV):
        raise SuiteError(f"{suite.path}: config {c.name!r} already fixes its acceptance (speculative.rejection_sample_method"
                         f"/synthetic_* or env {SYNTHETIC_ENV}…); whatif --profile sets it itself")


def expand_replay(suite: Suite, entries: Sequence[Entry], profile: ProfileRef, only: Sequence[str] | None = None,
                  include_real: bool = True,
                  check: Callable[[Engine, str | None], str | None] = replay_support) -> tuple[Suite, WhatifPlan]:
    """The suite to run (baseline, the real configs, one config per config × data set of the profile) and its plan.

    ``plan.configs`` maps each derived config to its ``ReplayedConfig`` (the config, data set, k, mode, the rates
    and lengths, the server settings, the profile's own speedups per load); ``measure.replay`` reads it back.
    """
    where = str(profile.path)
    chosen = spec_configs(suite, only, "whatif --profile")
    base = suite.baseline
    assert base is not None  # spec_configs raised otherwise
    names = [d.name for d in suite.datasets]
    used = [d for d in names if any(e.dataset == d for e in entries)]
    if not used:
        raise ProfileError(f"{where}: no profile for any data set of {suite.path} ({', '.join(names)}); the profile has "
                           f"{', '.join(sorted({e.dataset for e in entries}))}")
    configs, derived = [DerivedConfig(base)], []
    plan = WhatifPlan(real=include_real, profile=profile, skipped_datasets=[d for d in names if d not in used])
    for c in chosen:
        engine, k = synthetic_config(suite, c, check, "whatif --profile needs num_speculative_tokens (a profile is "
                                     "chosen per data set and k)")
        _refuse_set(suite, c)
        if include_real:
            configs.append(DerivedConfig(c))
        for dataset in (d for d in used if c.runs_on(d)):
            choice = choose(entries, dataset, k, where, c.name)
            assert choice is not None  # ``used`` holds only data sets the profile has
            at = f"{where}: profiles[{choice.entries[0].index}]"
            s = engine_settings(engine.adapter, c.method or "", k, choice, at)
            name = replay_name(c.name, dataset)
            derived.append(DerivedConfig(c, name, datasets=(dataset,), speculative=s.speculative, env=s.env))
            plan.configs[name] = _planned(c.name, dataset, k, engine, choice, s)
    derived.sort(key=lambda d: [used.index(x) for x in d.datasets or ()])  # data set by data set: a run cut short holds whole data sets
    return derived_suite(suite, "whatif", configs + derived, used), plan


def _planned(config: str, dataset: str, k: int, engine: Engine, choice: Choice, s: Settings) -> ReplayedConfig:
    return ReplayedConfig(
        config, dataset, k, engine.name, engine.adapter, s.mode, list(choice.rates), list(choice.estimated),
        choice.length, s.replayed_length, [e.index for e in choice.entries], choice.entries[0].config,
        choice.pooled, s.speculative, s.env, s.note,
        [ProfileSpeedup(*e.load.columns, e.speedup, e.ci if e.ci else None)
         for e in choice.entries])
