"""One-time work that can stall a step (issue 39): torch.compile (dynamo) compiles, CUDA-graph captures, Triton
JIT compiles and autotuning, and the CUDA caching allocator growing — each an ``events`` row (``steplog_files.emit``).

Nothing here imports torch or Triton: each patch runs when the engine itself imports the module (the plugin's
post-import finder) or at once where it already has. Hooks checked to exist first, named in the header:

- ``onetime.dynamo``: ``torch._dynamo.callback.callback_handler``'s start/end callbacks (torch ≥ 2.4): one
  ``compile`` event per dynamo compilation (its compile id and trigger: a new frame, cudagraph-tree recording);
- ``onetime.graph_capture``: ``torch.cuda.graphs.CUDAGraph.capture_begin/capture_end``: one ``graph_capture``
  per capture, whoever captures (vLLM's V1 wrapper, V2's graph managers, the drafter's);
- ``onetime.triton_jit``: ``triton.knobs.runtime.jit_cache_hook`` / ``jit_post_compile_hook`` (Triton ≥ 3.3),
  chained after any hook already set (vLLM's own JIT monitor chains them too): one ``triton_compile`` per kernel
  specialisation compiled; ``triton.knobs.compilation.listener`` says whether it came from Triton's disk cache
  (about 1 ms) or was compiled cold (DSpark's ``_prepare_dflash_inputs_kernel``: 175–230 ms a block size on an
  H200), and from which cache folder;
- ``onetime.triton_build``: ``triton.runtime.build._build``: a launcher or ``cuda_utils`` built with the C
  compiler (0.3–0.6 s each) is a ``triton_compile`` of its own;
- ``onetime.numba``: ``numba.core.event``'s ``numba:compile`` (vLLM's n-gram proposer compiles its numba kernel at
  the first real decode step): a ``compile`` event per outermost compilation;
- ``onetime.triton_autotune``: ``triton.runtime.autotuner.Autotuner.run``: one ``triton_autotune`` when a call
  tuned a key it had not seen (its configs benchmarked);
- ``onetime.allocator``: every flusher tick (0.25 s) in a process whose CUDA is initialised,
  ``torch.cuda.memory_reserved()``; a rise is an ``alloc_growth`` event spanning the tick it happened in.

While a CUDA graph is being captured the flusher touches no CUDA (``CAPTURING``): a call from another thread
would break a capture in vLLM's ``global`` mode."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from .steplog_files import CAPTURING, LOG, MARK, emit, guarded, pollers

_local = threading.local()


def _started() -> list[tuple[str, float, float]]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _begin(name: str) -> None:
    _started().append((name, time.time(), time.perf_counter()))


def _end(kind: str, name: str, detail: str | None = None) -> None:
    stack = _started()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] == name:
            _, wall, t0 = stack.pop(i)
            emit(kind, wall, (time.perf_counter() - t0) * 1e3, detail or name)
            return


def patch_dynamo(module: Any) -> None:
    """``torch._dynamo.callback``: the compile start/end callbacks."""
    handler = getattr(module, "callback_handler", None)
    if handler is None or not callable(getattr(handler, "register_start_callback", None)):
        LOG.hook("onetime.dynamo", f"missing: {module.__name__}.callback_handler.register_start_callback")
        return
    if any(getattr(cb, MARK, False) for cb in getattr(handler, "start_callbacks", [])):
        return

    def start(args: Any) -> None:
        _begin(f"dynamo {getattr(args, 'compile_id', '?')}")

    def end(args: Any) -> None:
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "?")
        compile_id = getattr(args, "compile_id", "?")
        _end("compile", f"dynamo {compile_id}", f"dynamo compile {compile_id} ({trigger.lower()})")

    for register, fn in ((handler.register_start_callback, guarded("onetime.dynamo", start)),
                         (handler.register_end_callback, guarded("onetime.dynamo", end))):
        setattr(fn, MARK, True)
        register(fn)
    LOG.hook("onetime.dynamo", "installed")


def patch_graphs(module: Any) -> None:
    """``torch.cuda.graphs``: time each capture of a ``CUDAGraph``."""
    cls: Any = getattr(module, "CUDAGraph", None)
    if cls is None or not callable(getattr(cls, "capture_begin", None)) or not callable(getattr(cls, "capture_end", None)):
        LOG.hook("onetime.graph_capture", f"missing: {module.__name__}.CUDAGraph.capture_begin/capture_end")
        return
    if getattr(cls.capture_begin, MARK, False):
        return
    begin, end = cls.capture_begin, cls.capture_end
    note_begin = guarded("onetime.graph_capture", lambda: _begin("capture"))
    note_end = guarded("onetime.graph_capture", lambda: _end("graph_capture", "capture", "CUDA graph captured"))

    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        CAPTURING[0] += 1
        note_begin()
        try:
            return begin(self, *args, **kwargs)
        except BaseException:
            CAPTURING[0] -= 1
            raise

    def capture_end(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return end(self, *args, **kwargs)
        finally:
            CAPTURING[0] = max(CAPTURING[0] - 1, 0)
            note_end()

    for fn, orig in ((capture_begin, begin), (capture_end, end)):
        fn.__wrapped__ = orig  # type: ignore[attr-defined]
        setattr(fn, MARK, True)
    cls.capture_begin, cls.capture_end = capture_begin, capture_end
    LOG.hook("onetime.graph_capture", "installed")


def _kernel(fn: Any) -> str:
    return str(getattr(fn, "name", None) or getattr(getattr(fn, "jit_function", None), "__name__", "?"))[:120]


def _listener(kwargs: dict[str, Any]) -> None:
    """Triton's compilation listener: whether the compile now ending came from the disk cache, and from where."""
    group = kwargs.get("metadata_group") or {}
    paths = [str(v) for v in group.values()] if isinstance(group, dict) else []
    folder = paths[0].rsplit("/", 2)[0] if paths else None
    _local.source = ("disk cache" if kwargs.get("cache_hit") else "compiled") + (f", {folder}" if folder else "")


def patch_triton_knobs(module: Any) -> None:
    """``triton.knobs``: the JIT's before- and after-compile hooks and the compilation listener, each chained after
    whatever was there."""
    compilation = getattr(module, "compilation", None)
    if compilation is not None and hasattr(compilation, "listener") and not getattr(compilation.listener, MARK, False):
        prev_listener = compilation.listener
        note = guarded("onetime.triton_jit", _listener)

        def listener(*args: Any, **kwargs: Any) -> Any:
            note(kwargs)
            return prev_listener(*args, **kwargs) if prev_listener else None

        setattr(listener, MARK, True)
        compilation.listener = listener
    runtime = getattr(module, "runtime", None)
    if runtime is None or not hasattr(runtime, "jit_cache_hook") or not hasattr(runtime, "jit_post_compile_hook"):
        LOG.hook("onetime.triton_jit", f"missing: {module.__name__}.runtime.jit_cache_hook/jit_post_compile_hook")
        return
    if getattr(runtime.jit_cache_hook, MARK, False):
        return
    before_prev, after_prev = runtime.jit_cache_hook, runtime.jit_post_compile_hook
    note_begin = guarded("onetime.triton_jit", lambda name: _begin(name))

    def ended(name: str) -> None:
        source = getattr(_local, "source", None)
        _local.source = None
        _end("triton_compile", name, f"Triton kernel {name.removeprefix('triton ')}" + (f" ({source})" if source else ""))

    note_end = guarded("onetime.triton_jit", ended)

    def cache_hook(*args: Any, **kwargs: Any) -> Any:
        note_begin(f"triton {_kernel(kwargs.get('fn'))}")
        return before_prev(*args, **kwargs) if before_prev else None  # truthy: skip the compile (another hook's call)

    def post_compile_hook(*args: Any, **kwargs: Any) -> Any:
        note_end(f"triton {_kernel(kwargs.get('fn'))}")
        return after_prev(*args, **kwargs) if after_prev else None

    for fn in (cache_hook, post_compile_hook):
        setattr(fn, MARK, True)
    runtime.jit_cache_hook, runtime.jit_post_compile_hook = cache_hook, post_compile_hook
    LOG.hook("onetime.triton_jit", "installed")


def patch_triton_build(module: Any) -> None:
    """``triton.runtime.build``: a launcher (or ``cuda_utils``) compiled with the C compiler."""
    fn = getattr(module, "_build", None)
    if not callable(fn):
        LOG.hook("onetime.triton_build", f"missing: {module.__name__}._build")
        return
    if getattr(fn, MARK, False):
        return
    note_begin = guarded("onetime.triton_build", lambda name: _begin(f"build {name}"))
    note_end = guarded("onetime.triton_build",
                       lambda name: _end("triton_compile", f"build {name}", f"Triton launcher {name} built with the C compiler"))

    def _build(name: str, *args: Any, **kwargs: Any) -> Any:
        note_begin(name)
        try:
            return fn(name, *args, **kwargs)
        finally:
            note_end(name)

    _build.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(_build, MARK, True)
    module._build = _build
    LOG.hook("onetime.triton_build", "installed")


def patch_numba(module: Any) -> None:
    """``numba.core.event``: a listener of ``numba:compile`` (the outermost compilation of each call)."""
    base: Any = getattr(module, "Listener", None)
    register = getattr(module, "register", None)
    if base is None or not callable(register):
        LOG.hook("onetime.numba", f"missing: {module.__name__}.Listener/register")
        return
    if LOG.hooks.get("onetime.numba") == "installed":
        return
    depth = [0]
    note_begin = guarded("onetime.numba", lambda: _begin("numba"))

    def ended(event: Any) -> None:
        data = getattr(event, "data", None) or {}
        what = getattr(data.get("dispatcher"), "__qualname__", None) or getattr(data.get("dispatcher"), "py_func", None)
        name = getattr(what, "__qualname__", what)
        _end("compile", "numba", f"numba compile {str(name)[:100]}" if name else "numba compile")

    note_end = guarded("onetime.numba", ended)

    class _Compiles(base):  # type: ignore[misc, valid-type]
        def on_start(self, event: Any) -> None:
            depth[0] += 1
            if depth[0] == 1:
                note_begin()

        def on_end(self, event: Any) -> None:
            depth[0] = max(depth[0] - 1, 0)
            if depth[0] == 0:
                note_end(event)

    register("numba:compile", _Compiles())
    LOG.hook("onetime.numba", "installed")


def patch_autotuner(module: Any) -> None:
    """``triton.runtime.autotuner``: a ``run`` that tuned a new key is an event (its configs were benchmarked)."""
    cls: Any = getattr(module, "Autotuner", None)
    if cls is None or not callable(getattr(cls, "run", None)):
        LOG.hook("onetime.triton_autotune", f"missing: {module.__name__}.Autotuner.run")
        return
    if getattr(cls.run, MARK, False):
        return
    orig = cls.run

    def after(tuner: Any, before: int, wall: float, t0: float) -> None:
        cache = getattr(tuner, "cache", None)
        if isinstance(cache, dict) and len(cache) > before:
            name = getattr(getattr(tuner, "base_fn", None), "__name__", "?")
            emit("triton_autotune", wall, (time.perf_counter() - t0) * 1e3,
                 f"{name} ({len(getattr(tuner, 'configs', ()) or ())} configs)")

    note = guarded("onetime.triton_autotune", after)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        cache = getattr(self, "cache", None)
        before, wall, t0 = len(cache) if isinstance(cache, dict) else 0, time.time(), time.perf_counter()
        out = orig(self, *args, **kwargs)
        note(self, before, wall, t0)
        return out

    run.__wrapped__ = orig  # type: ignore[attr-defined]
    setattr(run, MARK, True)
    cls.run = run
    LOG.hook("onetime.triton_autotune", "installed")


class _Allocator:
    """The CUDA caching allocator, read by the flusher every tick (``torch._C._cuda_memoryStats``: ~18 µs on an H200,
    where ``memory_reserved()`` builds the whole stats dict, ~120 µs): reserved bytes that rose are a one-time
    ``alloc_growth``; an allocation retry (a failed cudaMalloc, the cache freed with a device sync) is one too, and a
    stall of its own."""

    last: tuple[int, int] | None = None
    at: float | None = None

    @staticmethod
    def read(torch: Any) -> tuple[int, int]:
        stats_of = getattr(torch._C, "_cuda_memoryStats", None)
        if stats_of is None:
            return int(torch.cuda.memory_reserved()), 0
        stats = stats_of(torch.cuda.current_device())
        return int(stats["reserved_bytes"]["all"]["current"]), int(stats.get("num_alloc_retries", 0))

    @staticmethod
    def poll() -> None:
        torch: Any = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if CAPTURING[0] or cuda is None or not cuda.is_initialized():
            return
        now, (reserved, retries) = time.time(), _Allocator.read(torch)
        last, at = _Allocator.last, _Allocator.at
        _Allocator.last, _Allocator.at = (reserved, retries), now
        if last is None or at is None:
            return
        if reserved > last[0] or retries > last[1]:
            retried = f", {retries - last[1]} allocation retries" if retries > last[1] else ""
            emit("alloc_growth", at, (now - at) * 1e3,
                 f"+{(reserved - last[0]) / 2**20:.0f} MiB reserved ({reserved / 2**20:.0f} MiB){retried}, within this window")


def install_allocator_poll() -> None:
    if any(getattr(p, MARK, False) for p in pollers):
        return
    poll = guarded("onetime.allocator", _Allocator.poll)
    setattr(poll, MARK, True)
    pollers.append(poll)
    LOG.hook("onetime.allocator", "installed")


#: module → its patch, applied when the engine imports it (or at once where it already has)
PATCHES = {"torch._dynamo.callback": patch_dynamo, "torch.cuda.graphs": patch_graphs, "triton.knobs": patch_triton_knobs,
           "triton.runtime.build": patch_triton_build, "triton.runtime.autotuner": patch_autotuner,
           "numba.core.event": patch_numba}
