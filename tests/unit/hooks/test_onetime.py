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
    reserved = iter([100 << 20, 100 << 20, 612 << 20])
    cuda = SimpleNamespace(is_initialized=lambda: True, memory_reserved=lambda: next(reserved))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    h.onetime.install_allocator_poll()
    (poll,) = h.files.pollers
    poll(), poll(), poll()
    assert written(h) == [("alloc_growth", "+512 MiB reserved (612 MiB), within this window")]
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: False)))
    poll()  # the API server: torch imported, CUDA never initialised by us
    assert written(h) == [("alloc_growth", "+512 MiB reserved (612 MiB), within this window")]


def test_a_missing_hook_is_named_in_the_header(hooks) -> None:
    h = hooks("steps")
    h.onetime.patch_triton_knobs(fake_module("triton.knobs", runtime=SimpleNamespace()))
    h.onetime.patch_autotuner(fake_module("triton.runtime.autotuner"))
    assert h.files.LOG.hooks["onetime.triton_jit"].startswith("missing: triton.knobs.runtime.jit_cache_hook")
    assert h.files.LOG.hooks["onetime.triton_autotune"].startswith("missing: triton.runtime.autotuner.Autotuner.run")
