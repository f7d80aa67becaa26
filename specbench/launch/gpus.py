"""Which GPUs a config's server uses and how many it needs: from its ``gpus:`` list, the engine's
visible-devices variable, or the parallel size its argv asks for (vLLM and SGLang spellings)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import SuiteError
from .engines import read_engine

_PARALLEL_FLAGS = {
    "tp": ("--tensor-parallel-size", "-tp", "--tp-size", "--tp"),
    "pp": ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp"),
    "dp": ("--data-parallel-size", "-dp", "--dp-size", "--dp"),
}


def parallel_size(args: tuple[str, ...] | list[str], where: str = "args") -> int | None:
    """GPUs an engine argv asks for: tensor × pipeline × data parallel size (vLLM and SGLang
    spellings; the last occurrence wins, as in argparse). None when no such flag is given.
    SGLang's ``--enable-dp-attention`` runs data parallelism inside the TP group: tp × pp."""
    sizes: dict[str, int] = {}
    args = list(args)
    for i, arg in enumerate(args):
        for key, flags in _PARALLEL_FLAGS.items():
            for flag in flags:
                value = None
                if arg == flag and i + 1 < len(args):
                    value = args[i + 1]
                elif arg.startswith(flag + "="):
                    value = arg.split("=", 1)[1]
                if value is None:
                    continue
                try:
                    sizes[key] = int(value)
                except ValueError:
                    raise SuiteError(f"{where}: {flag} expects an integer, got {value!r}") from None
                if sizes[key] < 1:
                    raise SuiteError(f"{where}: {flag} expects a positive integer, got {value!r}")
    if not sizes:
        return None
    dp = 1 if "--enable-dp-attention" in args else sizes.get("dp", 1)
    return sizes.get("tp", 1) * sizes.get("pp", 1) * dp


def suite_gpus_per_server(suite, override: int | None = None) -> int:
    """``server.gpus_per_server`` (default 1); ``override`` (the API argument) wins."""
    if override is not None:
        value: Any = override
    else:
        value = getattr(suite.server, "gpus_per_server", None)
        if value is None:
            value = (suite.raw.get("server") or {}).get("gpus_per_server", 1) if isinstance(suite.raw, dict) else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SuiteError(f"{suite.path}: server.gpus_per_server: expected 0 or a positive integer, got {value!r}")
    return value


def config_gpu_count(suite, config, default: int) -> int:
    """GPUs one config needs: its ``gpus:`` list (its length: in a parallel run the scheduler owns
    the ids), else the parallel size of its argv (``server.args`` then the config's ``args``), else
    ``default`` (gpus_per_server). A config reached at a URL needs none."""
    if not config.launched:
        return 0
    if config.gpus:
        return len([g for g in config.gpus.split(",") if g.strip()])
    size = parallel_size(tuple(suite.server.args) + tuple(config.args), f"{suite.path}: configs {config.name!r}")
    return size if size is not None else default


def server_gpus(suite, config) -> tuple[list[str] | None, str | None]:
    """The GPU ids the config's server uses, or None and why they are not known."""
    if config.gpus:
        return [g.strip() for g in config.gpus.split(",") if g.strip()], None
    if not config.launched:
        return None, "server at a URL: name its GPUs with configs[].gpus to meter and price it"
    engine = read_engine(config.engine or suite.engine)
    if not engine.gpu_env:
        return None, f"engine {engine.name} runs on the CPU"
    visible = {**os.environ, **engine.env, **suite.server.env, **config.env}.get(engine.gpu_env)
    if visible is not None and visible.strip() not in ("", "-1"):
        return [g.strip() for g in visible.split(",") if g.strip()], None
    count = config_gpu_count(suite, config, suite.server.gpus_per_server)
    if not count:
        return None, "the server uses no GPU (server.gpus_per_server: 0)"
    return [str(i) for i in range(count)], None


def gpu_count(suite, config) -> tuple[int | None, str | None]:
    gpus, reason = server_gpus(suite, config)
    return (len(gpus), None) if gpus else (None, reason)
