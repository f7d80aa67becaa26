"""How many GPUs each config needs, which GPUs there are, and which configs may run together."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

from ...errors import LaunchError
from ...launch.gpus import config_gpu_count
from ...schemas.cell import Cell
from ...schemas.phase import PhaseInfo
from ...suite import ServerConfig, Suite
from ..preflight import config_order, load_points

MODES = ("gpus", "ray")
RAY_EXTRA = "specbench[ray]"
# forwarded to Ray workers (a cluster's workers do not inherit the driver's environment)
FORWARDED_ENV = ("SPECBENCH_LAUNCHERS", "SPECBENCH_ENGINE_PYTHON")
MAX_LOG_BYTES = 32 << 20  # server log shipped back from a Ray worker: its last 32 MiB


# ---- planning: how many GPUs each config needs, and which GPUs there are ----------------------


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
    done_phases: list[PhaseInfo] = field(default_factory=list)
    exclusive: frozenset[str] = frozenset()  # keys no two running jobs may hold (url lane, fixed ports)
    only: frozenset[tuple[Cell, int]] | None = None  # a round of load.restart: just these, on one server start


@dataclass(frozen=True)
class WorkerJob:
    """What one worker is handed (pickled with the prompts): its config, the phases it need not
    measure again, and where it runs. ``gpus``: the ids it may use (gpus mode); ``gpus_needed``: take
    the ones Ray assigned; ``log_dir``: the run dir's logs (gpus mode), else a node-local folder
    named by ``run_id``; ``env``: set in the worker's environment while it runs; ``first_start``: the number
    of its first server start (the config's launches in the run so far: meta.json ``server_launches``); ``only``:
    a round of ``load.restart``, just these (cell, repeat) on one server start (None: every one not done)."""

    suite: Suite
    config: str
    done_phases: list[PhaseInfo]
    restart_on_failure: bool
    gpus: str | None = None
    gpus_needed: bool = False
    log_dir: str | None = None
    run_id: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    node: str | None = None
    first_start: int = 0
    only: frozenset[tuple[Cell, int]] | None = None


def done_by_config(phases: list[PhaseInfo]) -> dict[str, list[PhaseInfo]]:
    """The complete phases, per config: what a resumed parallel run's workers skip."""
    by: dict[str, list[PhaseInfo]] = {}
    for p in phases:
        if p.complete:
            by.setdefault(p.config, []).append(p)
    return by


def cells_left(suite: Suite, config: ServerConfig, done: list[PhaseInfo]) -> int:
    """How many (cell, repeat) of ``config`` are not among its ``done`` phases."""
    have = {(Cell.of_phase(p).with_config(config.name), p.repeat) for p in done}
    return sum(1 for spec in suite.datasets if config.runs_on(spec.name) for point in load_points(suite)
               for rep in range(suite.load.repeats) if (Cell.at(config.name, spec.name, point), rep) not in have)


def exclusive_keys(suite: Suite, config: ServerConfig) -> frozenset[str]:
    """The keys ``config``'s job holds while it runs, which no other running job may hold: servers at URLs are
    measured one at a time (they may share hardware), and configs that share a fixed port never run together."""
    if not config.launched:
        return frozenset({"url"})
    ports = [c.port for c in suite.configs if c.launched and c.port]
    return frozenset({f"port:{config.port}"}) if config.port and ports.count(config.port) > 1 else frozenset()


def plan(suite: Suite, done_by: dict[str, list[PhaseInfo]], gpus_per_server: int) -> list[Job]:
    """Jobs in the sequential order (baseline first); configs with nothing left to do are left out."""
    jobs = []
    for config in config_order(suite):
        done = done_by.get(config.name, [])
        if not cells_left(suite, config, done):
            continue
        jobs.append(Job(config.name, config_gpu_count(suite, config, gpus_per_server), config.launched, done,
                        exclusive_keys(suite, config)))
    return jobs
