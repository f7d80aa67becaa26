"""How many GPUs each config needs, which GPUs there are, and which configs may run together."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any

from ...errors import LaunchError, SuiteError
from ...schemas.cell import Cell
from ..preflight import config_order, load_points

MODES = ("gpus", "ray")
RAY_EXTRA = "specbench[ray]"
# forwarded to Ray workers (a cluster's workers do not inherit the driver's environment)
FORWARDED_ENV = ("SPECBENCH_LAUNCHERS", "SPECBENCH_ENGINE_PYTHON")
MAX_LOG_BYTES = 32 << 20  # server log shipped back from a Ray worker: its last 32 MiB


# ---- planning: how many GPUs each config needs, and which GPUs there are ----------------------

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


def detect_gpus() -> list[str]:
    """GPU ids of this machine: ``SPECBENCH_GPUS`` ("0,1,2,3"), else ``CUDA_VISIBLE_DEVICES``,
    else ``nvidia-smi -L``."""
    for var in ("SPECBENCH_GPUS", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(var)
        if value is not None and (value.strip() or var == "SPECBENCH_GPUS"):
            ids = [g.strip() for g in value.split(",") if g.strip()]
            if not ids or ids == ["-1"]:
                raise LaunchError(f"--parallel gpus: {var}={value!r} names no GPU")
            if len(set(ids)) != len(ids):
                raise LaunchError(f"--parallel gpus: {var}={value!r} names a GPU twice")
            return ids
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise LaunchError("--parallel gpus: no GPU found (nvidia-smi is not installed); "
                          "name them with SPECBENCH_GPUS=0,1,...") from None
    except subprocess.TimeoutExpired:
        raise LaunchError("--parallel gpus: nvidia-smi -L did not answer within 60 s") from None
    ids = re.findall(r"^GPU (\d+):", out.stdout, flags=re.M)
    if out.returncode != 0 or not ids:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise LaunchError(f"--parallel gpus: nvidia-smi -L found no GPU ({detail[0] if detail else f'exit {out.returncode}'}); "
                          "name them with SPECBENCH_GPUS=0,1,...")
    return ids


@dataclass
class Job:
    """One config's share of the run, as planned by the driver."""

    config: str
    gpus: int  # how many
    launched: bool
    done_phases: list[dict[str, Any]] = field(default_factory=list)
    exclusive: frozenset[str] = frozenset()  # keys no two running jobs may hold (url lane, fixed ports)



def cells_left(suite, config, done: list[dict[str, Any]]) -> int:
    """How many (cell, repeat) of ``config`` are not among its ``done`` phases."""
    have = {(Cell.of_phase(p).with_config(config.name), p["repeat"]) for p in done}
    return sum(1 for spec in suite.datasets for point in load_points(suite) for rep in range(suite.load.repeats)
               if (Cell.at(config.name, spec.name, point), rep) not in have)


def plan(suite, done_by: dict[str, list[dict[str, Any]]], gpus_per_server: int) -> list[Job]:
    """Jobs in the sequential order (baseline first); configs with nothing left to do are left out."""
    ports = [c.port for c in suite.configs if c.launched and c.port]
    jobs = []
    for config in config_order(suite):
        done = done_by.get(config.name, [])
        if not cells_left(suite, config, done):
            continue
        exclusive = set()
        if not config.launched:
            exclusive.add("url")  # servers at URLs are measured one at a time: they may share hardware
        elif config.port and ports.count(config.port) > 1:
            exclusive.add(f"port:{config.port}")
        jobs.append(Job(config.name, config_gpu_count(suite, config, gpus_per_server), config.launched, done,
                        frozenset(exclusive)))
    return jobs
