"""Scale a run out: configs side by side on disjoint GPU sets of one machine (``--parallel gpus``),
or as Ray tasks on a cluster (``--ray ADDRESS``). See docs/parallel.md.

One config = one worker: it starts the config's server and drives it with the ordinary
``Runner`` (``only_configs=[name]``), on the same machine as its server, and streams every
measured phase back as plain dicts. The driver (this process) is the only writer of the run
dir: each phase goes through ``RunDir.append_phase`` and the runner's rewrite of results, so a
parallel run leaves exactly the files a sequential run leaves, and ``--resume`` works on either.

- ``gpus``: workers are subprocesses of the driver (``python -m specbench.parallel --worker``),
  each given its own ``CUDA_VISIBLE_DEVICES`` set; a config starts as soon as enough GPUs are
  free, so no GPU is ever shared and at most ``total // gpus_per_server`` configs run at once.
- ``ray``: workers are Ray generator tasks with ``num_gpus`` = the config's GPU count; Ray picks
  a node with that many free GPUs and sets ``CUDA_VISIBLE_DEVICES``. A lost worker or node fails
  only its config (``meta.json`` ``failed_configs``); ``--resume`` reruns its missing cells.

A worker that dies hard (SIGKILL, OOM, lost node) cannot stop its server itself: a tiny
watchdog process started next to each worker kills the server process groups the worker had
started once the worker is gone.

Modules: ``planning`` (GPU counts, which configs may run together), ``worker`` (one config, in a
subprocess or a Ray task), ``driver`` (the one writer of the run dir; gpus and Ray modes).
"""

from .driver import Driver, run_parallel
from .planning import MODES, Job, config_gpu_count, detect_gpus, parallel_size, plan, suite_gpus_per_server
from .worker import run_config

__all__ = ["MODES", "Driver", "Job", "config_gpu_count", "detect_gpus", "parallel_size", "plan", "run_config",
           "run_parallel", "suite_gpus_per_server"]
