"""`specbench whatif`'s suite: each speculative config at a grid of synthetic acceptance lengths.

vLLM's synthetic rejection sampler (``speculative: {rejection_sample_method: synthetic,
synthetic_acceptance_length: L}``) keeps the drafter's real compute and accepts draft tokens with
probabilities that give a mean acceptance length L. The derived suite runs every config at L × the
suite's load points with the baseline, into one run directory; ``measure.break_even`` reads it back.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import SuiteError
from ..launch import Engine, read_engine
from ..schemas.plans import SyntheticLength, WhatifPlan
from ..suite import Suite
from .explain import DerivedConfig, derived_suite, spec_configs

SYNTHETIC_KEYS = ("rejection_sample_method", "synthetic_acceptance_length", "synthetic_acceptance_rates")


CPU_REFUSAL = "Synthetic acceptance not supported with CPU sampling"


def default_lengths(k: int) -> list[float]:
    """1.5, 2, 2.5, … up to k+1 (every half token a step can carry)."""
    return [1 + i / 2 for i in range(1, 2 * k + 1)]


def package_root(engine: Engine, package: str, python: str | None = None) -> tuple[Path | None, str | None]:
    """Where the engine's Python finds ``package`` (without importing it), or why that cannot be said."""
    exe = engine.python(python)
    probe = (f"import importlib.util as u; s = u.find_spec({package!r}); "
             "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")
    try:
        proc = subprocess.run([exe, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"engine {engine.name}: cannot run {exe} to look for synthetic acceptance ({type(err).__name__}: {err})"
    if proc.returncode != 0 or not proc.stdout.strip():
        return None, f"engine {engine.name}: {exe} has no {package} package"
    return Path(proc.stdout.strip()), None


def synthetic_support(engine: Engine, python: str | None = None, option: str = "synthetic_acceptance_length") -> str | None:
    """None when the engine can fix acceptance synthetically; else why not, in one line.

    A launcher may declare it (``speculative.synthetic_acceptance``: true, or a reason string);
    otherwise a vLLM engine's own source is read, without importing vLLM: ``option`` must be in
    ``config/speculative.py``, and a CPU build must not carry the CPU sampler's refusal.
    """
    declared = engine.launcher.speculative.synthetic_acceptance
    if declared is True:
        return None
    if isinstance(declared, str) and declared:
        return declared
    if declared is False or engine.adapter != "vllm":
        return f"engine {engine.name} has no synthetic acceptance (vLLM's rejection_sample_method: synthetic)"
    root, why = package_root(engine, "vllm", python)
    if root is None:
        return why
    if option not in read_text(root / "config" / "speculative.py"):
        return (f"engine {engine.name}: the vLLM at {root} has no {option} in config/speculative.py "
                "(vLLM 0.26 and later have it)")
    if engine.env.get("VLLM_TARGET_DEVICE") == "cpu" and CPU_REFUSAL in read_text(root / "utils" / "cpu_triton_utils.py"):
        return (f"engine {engine.name}: the vLLM at {root} accepts rejection_sample_method: synthetic, but its CPU "
                f"rejection sampler stops at the first request ('{CPU_REFUSAL}'); run whatif on a GPU engine")
    return None


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def k_of(config) -> int | None:
    k = config.num_speculative_tokens or config.speculative.get("num_speculative_tokens")
    return int(k) if isinstance(k, int) and not isinstance(k, bool) else None


def synthetic_config(suite: Suite, c, check: Callable[[Engine, str | None], str | None], needs_k: str) -> tuple[Engine, int]:
    """The engine of a config to be served at a set acceptance and its k, or one line saying why it
    cannot be (the engine has no synthetic acceptance, or the config no num_speculative_tokens)."""
    engine = read_engine(c.engine or suite.engine)
    why = check(engine, suite.server.python)
    if why:
        raise SuiteError(f"{suite.path}: config {c.name!r}: {why}")
    k = k_of(c)
    if k is None:
        raise SuiteError(f"{suite.path}: config {c.name!r}: {needs_k}")
    return engine, k


def derived_name(config: str, length: float) -> str:
    return f"{config}_al{length:g}"


def expand_whatif(suite: Suite, lengths: Sequence[float] | None = None, only: Sequence[str] | None = None,
                  include_real: bool = True,
                  check: Callable[[Engine, str | None], str | None] = synthetic_support) -> tuple[Suite, WhatifPlan]:
    """The suite to run (baseline, the real configs, one config per acceptance length) and its plan.

    ``plan.configs`` maps each derived config to its ``SyntheticLength`` (the real config, L, k); it is what
    ``whatif_curves`` reads back from ``meta.json``.
    """
    chosen = spec_configs(suite, only, "whatif")
    base = suite.baseline
    assert base is not None  # spec_configs raised otherwise
    configs = [DerivedConfig(base)]
    plan = WhatifPlan(real=include_real)
    derived = []
    for c in chosen:
        _, k = synthetic_config(suite, c, check, "whatif needs num_speculative_tokens (synthetic acceptance is defined "
                                "over k draft positions)")
        if any(key in c.speculative for key in SYNTHETIC_KEYS):
            raise SuiteError(f"{suite.path}: config {c.name!r} already sets speculative.rejection_sample_method/"
                             "synthetic_*; whatif varies them itself")
        grid = list(lengths) if lengths else default_lengths(k)
        bad = [x for x in grid if not 1 <= x <= k + 1]
        if bad:
            raise SuiteError(f"--lengths: {bad[0]:g} is outside [1, {k + 1}] for config {c.name!r} (k={k}): a step "
                             f"carries 1 to k+1 tokens")
        if include_real:
            configs.append(DerivedConfig(c))
        for length in grid:
            name = derived_name(c.name, length)
            derived.append(DerivedConfig(c, name, speculative={"rejection_sample_method": "synthetic",
                                                               "synthetic_acceptance_length": float(length)}))
            plan.configs[name] = SyntheticLength(c.name, float(length), k)
    return derived_suite(suite, "whatif", configs + derived), plan
