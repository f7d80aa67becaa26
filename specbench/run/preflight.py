"""What a run measures and everything that can fail before a server starts: load points, config
order, engines, engine binaries, prompt sets."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from ..datasets import check_available, load_prompts
from ..errors import LaunchError, SuiteError
from ..launch import read_engine
from ..launch.process import port_in_use
from ..load.trace import trace_prompts
from ..schemas.cell import LoadPoint
from ..schemas.request import Prompt
from ..suite import ServerConfig, Suite
from .o200k_file import find_o200k


def now() -> str:
    """UTC time as meta.json stores it."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def default_output(suite: Suite, root: Path = Path("results")) -> Path:
    return root / f"{suite.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def load_points(suite: Suite) -> list[LoadPoint]:
    if suite.load.request_rate:
        cap = suite.load.concurrency[0] if suite.raw.get("load", {}).get("concurrency") else 0
        return [LoadPoint(cap, r) for r in suite.load.request_rate]
    return [LoadPoint(c) for c in suite.load.concurrency]


def config_order(suite: Suite) -> list[ServerConfig]:
    """Baseline first: every later cell can then show its speedup as soon as it is measured."""
    base = suite.baseline
    return ([base] if base else []) + [c for c in suite.configs if c is not base]


def preflight(suite: Suite) -> dict[str, list[Prompt]]:
    """Everything that can fail before a server starts: engines, engine binaries, prompt sets."""
    for config in suite.configs:
        engine = read_engine(config.engine or suite.engine)
        if suite.load.prefix_cache == "reset" and engine.prefix_cache_reset.path is None:
            raise SuiteError(f"{suite.path}: load.prefix_cache: reset: config {config.name!r}'s engine {engine.name} has no "
                             f"reset endpoint (its launcher {engine.path} has no prefix_cache_reset.path); use keep")
        if config.launched:
            engine.load_format_args(config)  # an engine that cannot load dummy weights refuses before any server starts
            engine.steplog_flags(config)  # so does an engine without a step hook asked for a step log
            python = engine.python(suite.server.python)
            if os.sep in python and not os.access(python, os.X_OK):
                raise LaunchError(f"config {config.name!r}: engine Python not found: {python} "
                                  f"(prepare it with `specbench setup cpu`, or set server.python / SPECBENCH_ENGINE_PYTHON)")
            if config.port and port_in_use(suite.server.host, config.port):
                raise LaunchError(f"config {config.name!r}: port {config.port} on {suite.server.host} is already in use")
    return read_suite_prompts(suite)


def read_suite_prompts(suite: Suite) -> dict[str, list[Prompt]]:
    """Every data set's prompts, or the one-line error of the first that cannot be had; under a trace, one prompt
    per trace line, built from them (``load/trace.py``)."""
    prompts = {}
    o200k = find_o200k(suite.load.tiktoken_file) if any(s.needs_tokens for s in suite.datasets) else None
    for spec in suite.datasets:
        check_available(spec, suite.data_dir)
        prompts[spec.name] = load_prompts(spec, suite.data_dir, o200k)  # o200k: sets built or filtered by length
        if not prompts[spec.name]:
            raise SuiteError(f"{suite.path}: dataset {spec.name!r} yielded no prompts")
        if suite.load.arrival.kind == "trace":  # one request per trace line, its text from the data set's prompts
            prompts[spec.name] = trace_prompts(suite.load.arrival.trace, prompts[spec.name])
    return prompts
