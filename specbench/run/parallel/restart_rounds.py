"""``load.restart`` with ``--parallel gpus`` or ``--ray``: the rounds of a sequential restart run
(``run.rounds.restart_rounds``), each round's server starts side by side. Round r of every config runs at once, each
config on its own GPUs; round r+1 starts only once every config has finished round r (a barrier per round), so the
rounds stay interleaved over time as in a sequential run and slow drift hits every config alike. Each round gives
each config a fresh worker, which starts its server once (numbered on from the config's launches so far) and
measures just that round's (cell, repeat)s not measured yet; the rounds after the first stage of adaptive repeats
are planned from every config's first-stage rows, which the barrier makes complete. On one machine the order the
GPUs are handed out in turns each round (``round_gpus``), so a GPU's own speed spreads over the starts, inside the
between-start CI, instead of biasing every round's ratio alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...launch.gpus import config_gpu_count
from ...schemas.cell import Cell
from ...suite import Suite
from ..rounds import Visit, restart_rounds, run_order
from .collector import Collector
from .planning import Job, exclusive_keys

#: starts one round's jobs side by side and returns when all have ended: the jobs, and the round's repeat
Launch = Callable[[list[Job], int], Awaitable[None]]


def round_jobs(suite: Suite, taken: list[Visit], done: set[tuple[Cell, int]], gpus_per_server: int) -> list[Job]:
    """One round's jobs, in the round's order (baseline first): each config's (cell, repeat) of the round not
    measured yet (``done``: a --resume's, or an earlier round's); a config with none left is not started."""
    jobs = []
    for config, only in taken:
        left = frozenset(set(only or ()) - done)
        if left:
            jobs.append(Job(config.name, config_gpu_count(suite, config, gpus_per_server), config.launched,
                            exclusive=exclusive_keys(suite, config), only=left))
    return jobs


def round_gpus(suite: Suite, gpu_ids: list[str], rep: int, gpus_per_server: int) -> list[str]:
    """The machine's GPUs in the order round ``rep`` hands them out: turned by the first config's (the baseline's)
    GPU count per round, so with as many GPUs as the configs take each config's starts visit every GPU in turn."""
    order = run_order(suite, None)
    step = max(1, config_gpu_count(suite, order[0], gpus_per_server)) if order else 1
    turn = (rep * step) % len(gpu_ids) if gpu_ids else 0
    return gpu_ids[turn:] + gpu_ids[:turn]


async def run_rounds(collector: Collector, suite: Suite, gpus_per_server: int, launch: Launch) -> None:
    """Every round in turn, its jobs side by side (``launch``), the next only once all of them have ended; a config
    that failed is left out of later rounds, and a stop (Ctrl-C) starts no further round. Once the last round is
    done, every config that did not fail has succeeded, as in a sequential run (so a --resume's first round does
    not clear an earlier failure)."""
    collector.defer_success = True
    for rep, taken in restart_rounds(suite, None, collector.failed, collector.session.rows):
        if collector.stopping or collector.interrupted:
            return
        jobs = round_jobs(suite, taken, collector.session.done(), gpus_per_server)
        if jobs:
            await launch(jobs, rep)
    if collector.stopping or collector.interrupted:
        return
    for config in run_order(suite, None):
        if config.name not in collector.failed:
            collector.session.config_succeeded(config.name)
    collector.session.save_meta()
