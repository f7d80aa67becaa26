"""The step recorder: code that runs inside vLLM's own processes (API server, engine core, worker).

Loaded through the ``vllm.general_plugins`` entry point ``specbench_steplog`` in every vLLM process.
Idle unless ``SPECBENCH_STEPLOG`` is ``steps`` or ``timing``: then it patches, after vLLM imports them,

- the scheduler (engine core): ``schedule`` numbers each step and notes its batch; ``update_from_output``
  writes one ``sched`` row per step — requests, tokens, drafts, the per-request commit histogram
  ``hist`` and the step's own ``SpecDecodingStats`` (the numbers vLLM's counters add);
- at ``timing``, the model runner (worker, V1 and V2): events around ``execute_model``, the target's
  forward, its LM head, sampling and the drafter's ``propose``, and at ``sample_tokens``' end, written as
  one ``gpu`` row per step. CUDA events are recorded on the current stream and resolved later with
  ``query()`` (never a per-step synchronisation); on the CPU engine ``time.perf_counter`` at the same
  points (its kernels run synchronously).

Standard library only (torch is taken from ``sys.modules`` where vLLM already imported it). Every hook
is checked to exist first; each process writes ``header-<pid>.json`` naming the hooks it installed and
why any is missing. Nothing here may break the server: every hook body is guarded, and a failure turns
that hook off and is written to the header. Files go to ``SPECBENCH_STEPLOG_DIR``; the format is
docs/steplog.md's.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import steplog_files
from .steplog_files import IN_FLIGHT, LOG, PENDING, final_flush, level, start_flusher
from .vllm_events import install_gc, patch_preemption
from .vllm_onetime import PATCHES as ONE_TIME_PATCHES
from .vllm_onetime import install_allocator_poll
from .vllm_runner import TIMELINE, patch_cudagraph_v2, patch_runner
from .vllm_scheduler import patch_scheduler
from .vllm_tokens import patch_rejection_sampler, patch_rejection_sampler_v2

SCHEDULER = "vllm.v1.core.sched.scheduler"
RUNNER_V1 = "vllm.v1.worker.gpu_model_runner"
RUNNER_V2 = "vllm.v1.worker.gpu.model_runner"
CUDAGRAPH_V2 = "vllm.v1.worker.gpu.cudagraph_utils"
SAMPLER_V1 = "vllm.v1.sample.rejection_sampler"
SAMPLER_V2 = "vllm.v1.worker.gpu.spec_decode.rejection_sampler"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patch a module right after vLLM imports it, in whichever process that happens: nothing is imported
    here, so the API server never loads the engine's modules (or CUDA) on our account."""

    def __init__(self, patches: dict[str, Callable[[Any], None]]) -> None:
        self.patches = patches

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.patches:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _PatchingLoader(spec.loader, self.patches[name])
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Callable[[Any], None]) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        try:
            self.patch(module)
        except Exception as err:  # never break the import
            LOG.notes.append(f"patching {module.__name__} failed: {type(err).__name__}: {err}"[:300])
            LOG.header()


def _scheduler_and_preemption(module: Any) -> None:
    patch_scheduler(module)
    patch_preemption(module)


def register() -> None:
    """The ``vllm.general_plugins`` entry point: idle unless ``SPECBENCH_STEPLOG`` asks; idempotent."""
    lvl = level()
    if lvl == "off" or any(isinstance(f, _AfterImport) for f in sys.meta_path):
        return
    patches: dict[str, Callable[[Any], None]] = {SCHEDULER: _scheduler_and_preemption}
    patches.update(ONE_TIME_PATCHES)  # compiles, captures, Triton: what a steady warm-up waits out (issue 39)
    if lvl in ("timing", "tokens"):
        patches.update({RUNNER_V1: lambda m: patch_runner(m, "v1"), RUNNER_V2: lambda m: patch_runner(m, "v2"),
                        CUDAGRAPH_V2: patch_cudagraph_v2})
    if lvl == "tokens":
        patches.update({SAMPLER_V1: patch_rejection_sampler, SAMPLER_V2: patch_rejection_sampler_v2})
    for name, patch in patches.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport({k: v for k, v in patches.items() if k not in sys.modules}))
    install_gc()  # every process the plugin loads in: the API server that streams, the engine core, the workers
    install_allocator_poll()  # reads the allocator only where CUDA is already initialised
    start_flusher()
    atexit.register(final_flush)  # the API server; vLLM's children flush through LOG's finalizer
    os.register_at_fork(before=LOG.flush, after_in_child=_forked)


def _forked() -> None:
    """vLLM forks its engine core from the API server: the child keeps the patches, not the flusher thread."""
    steplog_files.flusher_thread = None
    LOG.lock, LOG.files = threading.Lock(), {}
    PENDING.clear()  # the parent's events are the parent's to write
    IN_FLIGHT[0] = None
    TIMELINE.lock = threading.Lock()
    if LOG.hooks:
        LOG.header()
        start_flusher()

