"""``run_parallel``: plan the configs, then feed the collector from the gpus or Ray workers."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ...errors import SuiteError
from ...launch import read_engine
from ...launch.gpus import suite_gpus_per_server
from ...schemas.placement import Placement
from ...schemas.request import Prompt
from ...suite import Suite
from ..interrupts import forward_signals
from ..preflight import preflight, read_suite_prompts
from ..sequential import RunOutcome
from ..session import Progress, Render, RunSession
from .collector import Collector
from .gpus_mode import run_gpus
from .planning import MODES, Job, detect_gpus, done_by_config, plan
from .ray_mode import import_ray, ray_connection, run_ray
from .restart_rounds import round_gpus, run_rounds


def cluster_prompts(suite: Suite) -> dict[str, list[Prompt]]:
    """The data-set half of preflight (engine binaries may exist only on the cluster's nodes)."""
    for config in suite.configs:
        read_engine(config.engine or suite.engine)
    return read_suite_prompts(suite)


async def run_parallel(suite: Suite, out: Path, *, mode: Literal["gpus", "ray"], render: Render, address: str | None = None,
                       resume: bool = False, progress: Progress | None = None, gpus_per_server: int | None = None,
                       restart_on_failure: bool = False, overwrite: bool = False) -> RunOutcome:
    """Run ``suite`` into ``out`` with configs in parallel; returns the same ``RunOutcome`` as
    ``run_suite``. ``mode="gpus"``: this machine's GPUs (``SPECBENCH_GPUS`` or ``nvidia-smi -L``);
    ``mode="ray"``: the Ray cluster at ``address`` ("auto": the one ``ray start`` made here). With ``load.restart``
    the configs run in the sequential run's rounds, each round's fresh starts side by side (``restart_rounds``)."""
    if mode not in MODES:
        raise SuiteError(f"parallel mode must be one of {', '.join(MODES)}, got {mode!r}")
    per_server = suite_gpus_per_server(suite, gpus_per_server)
    session = RunSession(suite, Path(out), render=render, resume=resume, overwrite=overwrite, progress=progress)
    session.prepare()
    try:
        return await _run_jobs(session, suite, mode, address, resume, per_server, restart_on_failure)
    finally:
        session.close()


async def _run_jobs(session: RunSession, suite: Suite, mode: str, address: str | None, resume: bool, per_server: int,
                    restart_on_failure: bool) -> RunOutcome:
    if mode == "gpus":
        gpu_ids = detect_gpus()
        prompts = preflight(suite)
        where: dict[str, list[str] | str | None] = {"gpus": gpu_ids}
    else:
        import_ray()
        prompts = cluster_prompts(suite)
        where = {"address": address}  # null: the local cluster, written so
    session.extra_meta.parallel = Placement.from_dict({"mode": mode, **where, "gpus_per_server": per_server, "configs": {}},
                                                      "parallel")
    session.begin(prompts)  # on resume: damaged lines quarantined, phases cut short set aside to be measured again
    assert session.meta.runs  # begin added this run's entry
    session.meta.runs[-1].parallel = mode
    session.save_meta()
    collector = Collector(session, mode)

    async def launch(jobs: list[Job], rep: int) -> None:
        if mode == "gpus":  # a round of load.restart hands the GPUs out in its own order (restart_rounds)
            ids = round_gpus(suite, gpu_ids, rep, per_server) if suite.load.restart else gpu_ids
            await run_gpus(collector, suite, jobs, ids, prompts, restart_on_failure)
        else:
            await run_ray(collector, suite, jobs, address, prompts, restart_on_failure)

    with forward_signals(lambda: None, collector.signalled):  # before and after the workers: the final write
        try:
            if not suite.load.restart:
                await launch(plan(suite, done_by_config(session.dir.read_phases()) if resume else {}, per_server), 0)
            elif mode == "gpus":
                await run_rounds(collector, suite, per_server, launch)
            else:
                with ray_connection(address):  # once for every round
                    await run_rounds(collector, suite, per_server, launch)
        finally:
            outcome = collector.finish()
    return outcome
