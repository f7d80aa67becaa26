"""Model-runner hooks (worker, ``timing``): marks on the GPU timeline around the parts of a step."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .steplog_files import IN_FLIGHT, LOG, MARK, STEP_ATTR, guarded, resolvers, start_flusher, vllm_version
from .vllm_tokens import note_batch

#: tests only: the step in which the worker forces a full collection of cyclic garbage (a real cause, recorded by the
#: same ``gc`` hook as any other, for the CPU engine's test of stall causes); 0: never
TEST_GC_STEP = int(os.environ.get("SPECBENCH_STEPLOG_TEST_GC_STEP", "0") or 0)


def _forced_collection() -> None:
    junk = []
    for _ in range(300_000):
        a: list[Any] = []
        a.append([a])
        junk.append(a)
    del junk
    gc.collect()


class _Clock:
    """Marks on the GPU timeline (CUDA events) or the host's (perf_counter), resolved without a sync."""

    def __init__(self) -> None:
        torch: Any = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        self.cuda = bool(cuda is not None and cuda.is_available())
        self.torch = torch
        self.pool: list[Any] = []
        LOG.clock = "cuda_event" if self.cuda else "perf_counter"

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        if self.torch.cuda.is_current_stream_capturing():
            return None
        ev = self.pool.pop() if self.pool else self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def done(self, mark: Any) -> bool:
        return mark is None or not self.cuda or mark.query()

    def ms(self, a: Any, b: Any) -> float | None:
        if a is None or b is None:
            return None
        return round((b - a) * 1e3 if not self.cuda else a.elapsed_time(b), 4)

    def recycle(self, marks: list[Any]) -> None:
        if self.cuda:
            self.pool.extend(m for m in marks if m is not None)


class _Timeline:
    """The step in flight (marks by name) and the steps waiting for their marks to resolve."""

    POINTS = ("fwd", "fwd_end", "lg0", "lg1", "samp", "d0", "d1", "exec_end", "end")

    def __init__(self) -> None:
        self.clock: _Clock | None = None
        self.current: dict[str, Any] | None = None
        self.pending: deque[dict[str, Any]] = deque()
        self.prev_start: Any = None
        self.lock = threading.Lock()

    def begin(self, scheduler_output: Any) -> None:
        tag = getattr(scheduler_output, STEP_ATTR, None)
        if tag is None:  # a dummy run, a graph capture or a profile run: not a step
            self.current = None
            return
        if self.clock is None:
            self.clock = _Clock()
        self.resolve(block=False)
        start = self.clock.mark()
        self.current = {"step": tag[0], "wall": time.time(), "start": start, "prev": self.prev_start, "marks": {}}
        IN_FLIGHT[0] = tag[0]
        if TEST_GC_STEP and tag[0] == TEST_GC_STEP:
            _forced_collection()
        self.prev_start = start

    def mark(self, name: str, first: bool = True, same_as: str | None = None) -> None:
        """Record ``name`` now; with ``same_as``, at the instant of that mark, reusing its event (issue 39: one
        event fewer where two marks stand at the same point of the step)."""
        cur = self.current
        if cur is None or self.clock is None or (first and name in cur["marks"]):
            return
        cur["marks"][name] = cur["marks"].get(same_as) if same_as is not None else self.clock.mark()

    def end(self) -> None:
        cur = self.current
        if cur is None:
            return
        self.mark("end", first=False)
        self.current = None
        IN_FLIGHT[0] = None
        with self.lock:
            self.pending.append(cur)

    def resolve(self, block: bool) -> None:
        """Write every pending step whose last mark has completed (all of them when ``block``: the GPU is idle)."""
        clock = self.clock
        if clock is None:
            return
        with self.lock:
            while self.pending:
                step = self.pending[0]
                if not block and not clock.done(step["marks"].get("end")):
                    break
                self.pending.popleft()
                if block and not clock.done(step["marks"].get("end")):
                    continue  # the engine is gone or still busy: drop it rather than block
                try:
                    ms = {f"t_{p}": clock.ms(step["start"], step["marks"].get(p)) for p in self.POINTS}
                    since = clock.ms(step["prev"], step["start"]) if step["prev"] is not None else None
                except Exception:  # a mark on another stream not complete yet: this step has no times
                    continue
                LOG.write("gpu", {"step": step["step"], "wall": step["wall"], **ms, "since_prev_ms": since})
                clock.recycle(list({id(m): m for m in (step["prev"], *step["marks"].values())}.values()))


TIMELINE = _Timeline()
resolvers.append(TIMELINE.resolve)


def _wrap_method(owner: Any, name: str, hook: str, before: Callable[..., Any] | None,
                 after: Callable[..., Any] | None) -> bool:
    fn = getattr(owner, name, None)
    if fn is None or not callable(fn):
        LOG.hook(hook, f"missing: {getattr(owner, '__name__', type(owner).__name__)}.{name} (vLLM {vllm_version()})")
        return False
    if getattr(fn, MARK, False):
        return True
    b = guarded(hook, before, "timing") if before else None
    a = guarded(hook, after, "timing") if after else None

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if b:
            b(*args)
        out = fn(*args, **kwargs)
        if a:
            a(*args)
        return out

    wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(wrapped, MARK, True)
    setattr(owner, name, wrapped)
    LOG.hook(hook, "installed")
    return True


def _on_model_loaded(runner: Any) -> None:
    """Instance-level hooks at the first real step (a runner subclass may override ``load_model``): the LM
    head and the drafter's propose."""
    model = getattr(runner, "model", None)
    if model is not None:
        _wrap_method(model, "compute_logits", "model.compute_logits",
                     lambda *a: TIMELINE.mark("lg0") if "d0" not in _marks() else None, _after_lm_head)
    speculator = getattr(runner, "speculator", None)  # V2; V1 proposes through a runner method
    if speculator is not None:
        _wrap_method(speculator, "propose", "speculator.propose",
                     lambda *a: TIMELINE.mark("d0"), lambda *a: TIMELINE.mark("d1"))


def _after_lm_head(*_: Any) -> None:
    """The LM head's end; on V2 also the start of sampling/verification (its ``sample`` runs the LM head first)."""
    if "d0" in _marks():  # the drafter's own LM head, inside propose
        return
    TIMELINE.mark("lg1")
    if LOG.runner == "v2":
        TIMELINE.mark("samp", same_as="lg1")


def _before_sample_v1(runner: Any, *_: Any) -> None:
    TIMELINE.mark("samp")
    note_batch(runner, TIMELINE.current)


def _marks() -> dict[str, Any]:
    return TIMELINE.current["marks"] if TIMELINE.current else {}


def patch_runner(module: Any, version: str) -> None:
    cls = getattr(module, "GPUModelRunner", None)
    if cls is None:
        LOG.hook(f"runner_{version}", f"missing: {module.__name__}.GPUModelRunner (vLLM {vllm_version()})")
        return
    def begin(self: Any, scheduler_output: Any, *_: Any) -> None:
        TIMELINE.begin(scheduler_output)
        if TIMELINE.current is not None and not getattr(self, MARK, False):
            setattr(self, MARK, True)  # the first real step: the runner has its model and drafter now
            _on_model_loaded(self)
            LOG.runner = version
            LOG.header()

    # no mark at execute_model's end: no measure reads it, and every event costs host time (issue 39 item 6)
    _wrap_method(cls, "execute_model", f"runner_{version}.execute_model", begin, None)
    _wrap_method(cls, "sample_tokens", f"runner_{version}.sample_tokens", None, lambda *a: TIMELINE.end())
    if version == "v1":
        _wrap_method(cls, "_model_forward", "runner_v1._model_forward",
                     lambda *a: TIMELINE.mark("fwd"), lambda *a: TIMELINE.mark("fwd_end"))
        _wrap_method(cls, "_sample", "runner_v1._sample", _before_sample_v1, None)
        _wrap_method(cls, "propose_draft_token_ids", "runner_v1.propose_draft_token_ids",
                     lambda *a: TIMELINE.mark("d0"), lambda *a: TIMELINE.mark("d1"))
    start_flusher()


def patch_cudagraph_v2(module: Any) -> None:
    """V2 runs the target's forward as a replayed graph through its graph manager (FULL / PIECEWISE)."""
    for cls_name in dir(module):
        cls = getattr(module, cls_name)
        if isinstance(cls, type) and hasattr(cls, "run_fullgraph"):
            for meth in ("run_fullgraph", "run_pw_graph"):
                if hasattr(cls, meth):
                    _wrap_method(cls, meth, f"cudagraph_v2.{meth}",
                                 lambda *a: TIMELINE.mark("fwd"), lambda *a: TIMELINE.mark("fwd_end"))


