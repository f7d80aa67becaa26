"""``--ray ADDRESS``: configs as Ray tasks on a cluster; a lost worker or node fails only its config."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import LaunchError
from ...schemas.placement import WorkerPlace
from ...schemas.request import Prompt
from ...suite import Suite
from .collector import Collector, StopSignals
from .messages import WorkerFinished, decode
from .planning import FORWARDED_ENV, RAY_EXTRA, Job, WorkerJob
from .worker import ray_config_task


def worker_env(suite: Suite) -> dict[str, str]:
    """What a cluster's workers need of the collector's environment (they do not inherit it)."""
    names = list(FORWARDED_ENV) + ([suite.api_key_env] if suite.api_key_env else [])
    return {k: os.environ[k] for k in names if k in os.environ}


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise LaunchError(f"--ray needs Ray: pip install '{RAY_EXTRA}' (or pip install ray)") from None
    return ray


@contextmanager
def ray_connection(address: str | None) -> Iterator[Any]:
    """The ``ray`` module, connected to the cluster at ``address`` (shut down after, if connected here)."""
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address or "auto", log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise LaunchError(f"--ray {address or 'auto'}: cannot connect to a Ray cluster: {err}") from None
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def lost_worker(name: str, placements: dict[str, WorkerPlace], err: Exception) -> str:
    """The error of a config whose Ray worker or node was lost: where it ran, and where its log stays."""
    where = placements.get(name)
    node = f" on node {where.host} ({str(where.node)[:12]})" if where and where.keys() else ""
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    log = where.log_on_node if where else None
    steps = where.steplog_on_node if where else None
    return (f"config {name!r}: Ray worker lost{node}: {type(err).__name__}: {first}"
            + (f" (its server log stays on that node: {log})" if log else "")
            + (f" (its step log, copied back up to its last measured cell, stays there too: {steps})" if steps else ""))


async def run_ray(collector: Collector, suite: Suite, jobs: list[Job], address: str | None, prompts: dict[str, list[Prompt]],
                  restart_on_failure: bool) -> None:
    """Each config a Ray generator task with ``num_gpus`` = its GPU count; Ray picks the node."""
    with ray_connection(address) as ray:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        largest = max((int(n.get("Resources", {}).get("GPU", 0)) for n in nodes), default=0)
        placement = collector.parallel
        placement.ray_version, placement.nodes = ray.__version__, len(nodes)
        placement.cluster_resources = {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}
        here = ray.get_runtime_context().get_node_id()
        prompts_ref = ray.put(prompts)
        remote = ray.remote(ray_config_task)
        cpus = float(os.environ.get("SPECBENCH_RAY_CPUS", "1"))
        env = worker_env(suite)
        run_id = f"{collector.session.path.name}-{collector.session.meta.started_at or ''}"
        gens: dict[str, Any] = {}

        def cancel(force: bool) -> None:
            for gen in list(gens.values()):
                try:
                    ray.cancel(gen, force=force)
                except Exception:  # already finished, or the node is gone
                    pass

        async def consume(job: Job) -> None:
            if collector.stopping:
                return
            if job.launched and job.gpus > largest:
                collector.fail(job.config, f"config {job.config!r} needs {job.gpus} GPUs on one node; the largest "
                                           f"node of the Ray cluster has {largest}")
                return
            opts: dict[str, Any] = dict(num_cpus=cpus, num_gpus=job.gpus if job.launched else 0, max_retries=0,
                                        num_returns="streaming")
            if not job.launched:  # a URL the collector was given: measure it from the collector's node
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
            payload = WorkerJob(suite, job.config, job.done_phases, restart_on_failure,
                                gpus_needed=job.launched and job.gpus > 0, run_id=run_id, env=env,
                                first_start=collector.first_start(job.config), only=job.only)
            collector.progress("server", config=job.config, launching=job.launched)
            gen = remote.options(**opts).remote(payload, prompts_ref)
            gens[job.config] = gen
            finished = False
            try:
                async for ref in gen:
                    msg = decode(await ref)
                    collector.handle(msg)
                    finished = finished or isinstance(msg, WorkerFinished)
            except ray.exceptions.TaskCancelledError:
                collector.interrupted = True
                return
            except ray.exceptions.RayError as err:
                if not finished:
                    collector.fail(job.config, lost_worker(job.config, collector.parallel.configs or {}, err))
                    return
            finally:
                gens.pop(job.config, None)
            if not finished and not collector.stopping:
                collector.fail(job.config, f"config {job.config!r}: Ray task ended without finishing its cells")

        async def url_lane(url_jobs: list[Job]) -> None:
            for job in url_jobs:
                await consume(job)

        with StopSignals(collector, lambda: cancel(False), lambda: cancel(True)):
            launched = [j for j in jobs if j.launched]
            url_jobs = [j for j in jobs if not j.launched]
            # Ray queues the tasks in submission order (baseline first) and packs them onto nodes
            await asyncio.gather(*(consume(j) for j in launched), url_lane(url_jobs))
