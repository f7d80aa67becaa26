"""Events that make a step slow (issue 39), recorded where they happen: one ``events`` row each (docs/steplog.md).

Installed at the ``steps`` level and above in every vLLM process the plugin loads in (API server, engine core,
worker). A hook here must never take the log's lock from inside the event it observes — a garbage collection
can start inside ``LOG.write`` itself — so each event is appended to ``PENDING`` (a deque: appends are atomic)
and the flusher writes them (``steplog_files.emit``). What each row says:

- ``gc``: a collection of at least ``GC_MIN_MS`` (or of the oldest generation), from ``gc.callbacks``;
- ``preemption``: the scheduler preempted a request (``Scheduler._preempt_request``);
- ``recorder_flush``: the recorder's own flush took at least 1 ms (``steplog_files``) — a stall it caused is named;
- ``compile`` / ``graph_capture`` / ``triton_compile`` / ``triton_autotune`` / ``alloc_growth``: the one-time
  work of torch, CUDA graphs, Triton and the CUDA caching allocator (``vllm_onetime``).

Each row carries the step the process had in flight (``steplog_files.IN_FLIGHT``; set by the scheduler and the
runner hooks), or null between steps: the harness then places it by its wall time."""

from __future__ import annotations

import gc
import time
from typing import Any

from .steplog_files import LOG, MARK, emit, guarded, vllm_version

GC_MIN_MS = 1.0


class _Gc:
    """``gc.callbacks``: each collection's start and stop (the interpreter calls it on the collecting thread)."""

    started: tuple[float, float] | None = None

    @staticmethod
    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            _Gc.started = (time.time(), time.perf_counter())
            return
        if _Gc.started is None:
            return
        wall, t0 = _Gc.started
        _Gc.started = None
        ms = (time.perf_counter() - t0) * 1e3
        generation = info.get("generation")
        if ms >= GC_MIN_MS or generation == 2:
            emit("gc", wall, ms, f"generation {generation}, {info.get('collected')} collected")


def install_gc() -> None:
    """The collection hook, once per process (a forked child inherits the parent's list of callbacks)."""
    if any(getattr(cb, MARK, False) for cb in gc.callbacks):
        LOG.hook("events.gc", "installed")
        return
    cb = guarded("events.gc", _Gc.callback)
    setattr(cb, MARK, True)
    gc.callbacks.append(cb)
    LOG.hook("events.gc", "installed")


def patch_preemption(module: Any) -> None:
    """``Scheduler._preempt_request`` (vLLM 0.26–0.32): one instant event per preempted request."""
    cls: Any = getattr(module, "Scheduler", None)
    fn = getattr(cls, "_preempt_request", None)
    if not callable(fn):
        LOG.hook("events.preemption", f"missing: {module.__name__}.Scheduler._preempt_request (vLLM {vllm_version()})")
        return
    if getattr(fn, MARK, False):
        return
    note = guarded("events.preemption", lambda req: emit("preemption", time.time(), 0.0,
                                                          f"request {str(getattr(req, 'request_id', '?'))[:80]}"))

    def _preempt_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        note(request)
        return fn(self, request, *args, **kwargs)

    _preempt_request.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(_preempt_request, MARK, True)
    cls._preempt_request = _preempt_request
    LOG.hook("events.preemption", "installed")
