"""The one-time hooks (issue 39) on fakes shaped like torch's and Triton's: each compile, capture, Triton compile,
autotune and allocator rise becomes one ``events`` row, chained after what was there, and nothing is imported."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.hooks import events, fake_module


def written(h) -> list[tuple[str, str]]:
    h.files.write_pending()
    h.files.LOG.flush()
    return [(e["kind"], e["detail"]) for e in events(h.dir)]


def test_a_dynamo_compile_is_an_event(hooks) -> None:
    h = hooks("steps")
    handler = SimpleNamespace(start_callbacks=[], end_callbacks=[])
    handler.register_start_callback = handler.start_callbacks.append
    handler.register_end_callback = handler.end_callbacks.append
    h.onetime.patch_dynamo(fake_module("torch._dynamo.callback", callback_handler=handler))
    h.onetime.patch_dynamo(fake_module("torch._dynamo.callback", callback_handler=handler))  # idempotent
    args = SimpleNamespace(compile_id="0/3", callback_trigger=SimpleNamespace(name="DYNAMO"))
    assert len(handler.start_callbacks) == 1
    handler.start_callbacks[0](args)
    handler.end_callbacks[0](args)
    assert written(h) == [("compile", "dynamo compile 0/3 (dynamo)")]


def test_a_graph_capture_is_an_event_and_the_flusher_leaves_cuda_alone_meanwhile(hooks) -> None:
    h = hooks("steps")
    seen = []

    class CUDAGraph:
        def capture_begin(self, pool: Any = None) -> None:
            seen.append(h.files.CAPTURING[0])

        def capture_end(self) -> None:
            seen.append(h.files.CAPTURING[0])

    h.onetime.patch_graphs(fake_module("torch.cuda.graphs", CUDAGraph=CUDAGraph))
    g = CUDAGraph()
    g.capture_begin()
    g.capture_end()
    assert seen == [1, 1] and h.files.CAPTURING[0] == 0
    assert written(h) == [("graph_capture", "CUDA graph captured")]


def test_a_triton_compile_is_an_event_chained_after_the_hooks_already_set(hooks) -> None:
    h = hooks("steps")
    calls = []
    runtime = SimpleNamespace(jit_cache_hook=lambda **k: calls.append("theirs before") or False,
                              jit_post_compile_hook=lambda **k: calls.append("theirs after"))
    h.onetime.patch_triton_knobs(fake_module("triton.knobs", runtime=runtime))
    fn = SimpleNamespace(name="_topk_kernel")
    assert runtime.jit_cache_hook(key="k", fn=fn) is False  # their answer decides whether Triton compiles
    runtime.jit_post_compile_hook(key="k", fn=fn)
    assert calls == ["theirs before", "theirs after"]
    assert written(h) == [("triton_compile", "Triton kernel _topk_kernel")]


def test_only_an_autotune_of_a_new_key_is_an_event(hooks) -> None:
    h = hooks("steps")

    class Autotuner:
        def __init__(self) -> None:
            self.cache: dict[Any, Any] = {}
            self.configs = [1, 2, 3]
            self.base_fn = SimpleNamespace(__name__="_fused_moe")

        def run(self, n: int) -> int:
            self.cache.setdefault(n, "best")
            return n

    h.onetime.patch_autotuner(fake_module("triton.runtime.autotuner", Autotuner=Autotuner))
    tuner = Autotuner()
    assert [tuner.run(16), tuner.run(16), tuner.run(32)] == [16, 16, 32]
    assert written(h) == [("triton_autotune", "_fused_moe (3 configs)")] * 2


def test_the_allocator_growing_is_an_event_only_where_cuda_is_initialised(hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    h = hooks("steps")
    stats = iter([(100, 0), (100, 0), (612, 0), (612, 2)])

    def memory_stats(device: int) -> dict[str, Any]:
        reserved, retries = next(stats)
        return {"reserved_bytes": {"all": {"current": reserved << 20}}, "num_alloc_retries": retries}

    cuda = SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda, _C=SimpleNamespace(_cuda_memoryStats=memory_stats)))
    h.onetime.install_allocator_poll()
    (poll,) = h.files.pollers
    poll(), poll(), poll(), poll()
    grew = [("alloc_growth", "+512 MiB reserved (612 MiB), within this window"),
            ("alloc_growth", "+0 MiB reserved (612 MiB), 2 allocation retries, within this window")]
    assert written(h) == grew
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: False)))
    poll()  # the API server: torch imported, CUDA never initialised by us
    assert written(h) == grew


def test_triton_says_whether_a_kernel_came_from_its_disk_cache_and_a_launcher_build_is_an_event(hooks) -> None:
    h = hooks("steps")
    theirs = []
    runtime = SimpleNamespace(jit_cache_hook=None, jit_post_compile_hook=None)
    compilation = SimpleNamespace(listener=lambda **k: theirs.append(k["cache_hit"]))
    h.onetime.patch_triton_knobs(fake_module("triton.knobs", runtime=runtime, compilation=compilation))
    fn = SimpleNamespace(name="_prepare_dflash_inputs_kernel")
    for hit in (False, True):
        runtime.jit_cache_hook(key=hit, fn=fn)
        compilation.listener(cache_hit=hit, metadata_group={"k.cubin": "/root/.triton/cache/AB12/k.cubin"})
        runtime.jit_post_compile_hook(key=hit, fn=fn)
    built = []
    module = fake_module("triton.runtime.build", _build=lambda name, *a: built.append(name) or f"/tmp/{name}.so")
    h.onetime.patch_triton_build(module)
    assert module._build("__triton_launcher", "src.c", "/tmp") == "/tmp/__triton_launcher.so" and built == ["__triton_launcher"]
    assert theirs == [False, True]
    assert written(h) == [("triton_compile", "Triton kernel _prepare_dflash_inputs_kernel (compiled, /root/.triton/cache)"),
                          ("triton_compile", "Triton kernel _prepare_dflash_inputs_kernel (disk cache, /root/.triton/cache)"),
                          ("triton_compile", "Triton launcher __triton_launcher built with the C compiler")]


def test_a_numba_compile_is_one_event_for_its_outermost_compilation(hooks) -> None:
    h = hooks("steps")
    listeners = []

    class Listener:
        pass

    h.onetime.patch_numba(fake_module("numba.core.event", Listener=Listener, register=lambda kind, l: listeners.append((kind, l))))
    ((kind, listener),) = listeners
    outer = SimpleNamespace(data={"dispatcher": SimpleNamespace(__qualname__="batch_propose_numba")})
    listener.on_start(outer)
    listener.on_start(SimpleNamespace(data={}))  # a nested compile of a callee
    listener.on_end(SimpleNamespace(data={}))
    listener.on_end(outer)
    assert kind == "numba:compile" and written(h) == [("compile", "numba compile batch_propose_numba")]


def test_a_missing_hook_is_named_in_the_header(hooks) -> None:
    h = hooks("steps")
    h.onetime.patch_triton_knobs(fake_module("triton.knobs", runtime=SimpleNamespace()))
    h.onetime.patch_autotuner(fake_module("triton.runtime.autotuner"))
    assert h.files.LOG.hooks["onetime.triton_jit"].startswith("missing: triton.knobs.runtime.jit_cache_hook")
    assert h.files.LOG.hooks["onetime.triton_autotune"].startswith("missing: triton.runtime.autotuner.Autotuner.run")
