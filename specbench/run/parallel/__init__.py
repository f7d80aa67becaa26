"""Scale a run out: configs side by side on disjoint GPU sets of one machine (``--parallel gpus``),
or as Ray tasks on a cluster (``--ray ADDRESS``). See docs/parallel.md.

One config = one worker: it starts the config's server and measures it with the ordinary
``SequentialRun`` (``only_configs=[name]``), on the same machine as its server, reporting into a
``WorkerChannel`` that streams every measured phase back as plain dicts. The collector (this
process) applies them to the one ``RunSession``, so a parallel run leaves exactly the files a
sequential run leaves, and ``--resume`` works on either.

- ``gpus``: workers are subprocesses (``python -m specbench.run.parallel --worker``), each given
  its own ``CUDA_VISIBLE_DEVICES`` set; a config starts as soon as enough GPUs are free, so no GPU
  is ever shared and at most ``total // gpus_per_server`` configs run at once.
- ``ray``: workers are Ray generator tasks with ``num_gpus`` = the config's GPU count; Ray picks
  a node with that many free GPUs and sets ``CUDA_VISIBLE_DEVICES``. A lost worker or node fails
  only its config (``meta.json`` ``failed_configs``); ``--resume`` reruns its missing cells.
- ``load.restart``: the sequential run's rounds of fresh server starts, each round's configs side by side (a
  worker per config and round), the next round only once every config has finished this one.

A worker that dies hard (SIGKILL, OOM, lost node) cannot stop its server itself: a tiny
watchdog process started next to each worker kills the server process groups the worker had
started once the worker is gone.

Modules: ``planning`` (GPU counts, which configs may run together), ``worker`` (one config, in a
subprocess or a Ray task), ``node`` (port claims, log dirs, the watchdog), ``collector`` (worker
messages → the run session), ``gpus_mode`` / ``ray_mode`` (the two ways to start workers),
``restart_rounds`` (``load.restart``'s rounds, a barrier between them), ``entry`` (``run_parallel``).
"""

from ...launch.gpus import config_gpu_count, parallel_size, suite_gpus_per_server
from .collector import Collector
from .entry import run_parallel
from .planning import MODES, Job, detect_gpus, plan
from .worker import run_config

__all__ = ["MODES", "Collector", "Job", "config_gpu_count", "detect_gpus", "parallel_size", "plan", "run_config",
           "run_parallel", "suite_gpus_per_server"]
