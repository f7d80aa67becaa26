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
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

SCHEMA = "specbench.steplog/1"
LEVELS = ("off", "steps", "timing")
MAX_HIST = 17  # hist index 0..16: tokens a request committed in the step (accepted guesses plus one)

SCHEDULER = "vllm.v1.core.sched.scheduler"
RUNNER_V1 = "vllm.v1.worker.gpu_model_runner"
RUNNER_V2 = "vllm.v1.worker.gpu.model_runner"
CUDAGRAPH_V2 = "vllm.v1.worker.gpu.cudagraph_utils"
_MARK = "_specbench_steplog"
_STEP_ATTR = "_specbench_step"


def level() -> str:
    value = os.environ.get("SPECBENCH_STEPLOG", "off").strip().lower()
    return value if value in LEVELS else "off"


class _Log:
    """This process's step-log files, opened on first write (a forked child gets its own pid's files)."""

    def __init__(self) -> None:
        self.dir = os.environ.get("SPECBENCH_STEPLOG_DIR") or "."
        self.lock = threading.Lock()
        self.files: dict[str, Any] = {}
        self.pid = os.getpid()
        self.hooks: dict[str, str] = {}
        self.notes: list[str] = []
        self.clock: str | None = None
        self.runner: str | None = None

    def _file(self, kind: str) -> Any:
        if self.pid != os.getpid():  # forked: the parent's open files are not ours
            self.files, self.pid = {}, os.getpid()
        f = self.files.get(kind)
        if f is None:
            f = self.files[kind] = open(os.path.join(self.dir, f"{kind}-{os.getpid()}.jsonl"), "a", buffering=1 << 16)
        return f

    def write(self, kind: str, row: dict[str, Any]) -> None:
        line = json.dumps(row, separators=(",", ":"), allow_nan=False)
        with self.lock:
            self._file(kind).write(line + "\n")

    def flush(self) -> None:
        with self.lock:
            for f in self.files.values():
                try:
                    f.flush()
                except (OSError, ValueError):
                    pass

    def hook(self, name: str, state: str) -> None:
        self.hooks[name] = state
        self.header()

    def header(self) -> None:
        vllm = sys.modules.get("vllm")
        body = {"schema": SCHEMA, "pid": os.getpid(), "level": level(), "hooks": self.hooks, "notes": self.notes,
                "clock": self.clock, "runner": self.runner, "vllm_version": getattr(vllm, "__version__", None),
                "written_at": time.time()}
        path = os.path.join(self.dir, f"header-{os.getpid()}.json")
        try:
            with open(path + ".tmp", "w") as f:
                json.dump(body, f)
            os.replace(path + ".tmp", path)
        except OSError:
            pass


LOG = _Log()


def _guarded(name: str, body: Callable[..., Any]) -> Callable[..., Any]:
    """``body`` that turns itself off (and says so) at its first exception instead of raising into vLLM."""
    def run(*args: Any) -> Any:
        if LOG.hooks.get(name) != "installed":
            return None
        try:
            return body(*args)
        except Exception as err:  # never break the server: this hook stops, the step goes on
            LOG.hook(name, f"failed: {type(err).__name__}: {err}"[:300])
            return None
    return run


# --------------------------------------------------------------------------- scheduler (engine core)

class _Sched:
    step = 0

    @staticmethod
    def after_schedule(sched: Any, out: Any) -> None:
        _Sched.step += 1
        counts = getattr(out, "num_scheduled_tokens", None) or {}
        spec = getattr(out, "scheduled_spec_decode_tokens", None) or {}
        requests = getattr(sched, "requests", {})
        prefill_tokens = ctx = decode = 0
        for req_id, n in counts.items():
            req = requests.get(req_id)
            if req is None:
                continue
            before = int(req.num_computed_tokens) - int(n)  # schedule() already advanced it
            ctx += max(before, 0)
            prompt = int(getattr(req, "num_prompt_tokens", 0))
            if before < prompt:
                prefill_tokens += min(int(n), prompt - before)
            else:
                decode += 1
        kv = getattr(getattr(sched, "kv_cache_manager", None), "usage", None)
        setattr(out, _STEP_ATTR, (_Sched.step, time.time(), {
            "num_reqs": len(counts), "num_tokens": int(getattr(out, "total_num_scheduled_tokens", 0)),
            "decode_reqs": decode, "spec_tokens": sum(len(v) for v in spec.values()),
            "prefill_tokens": prefill_tokens, "ctx_tokens": ctx,
            "running": len(getattr(sched, "running", ())), "waiting": len(getattr(sched, "waiting", ())),
            "kv_usage": float(kv) if isinstance(kv, (int, float)) else None}))

    @staticmethod
    def hist(sched: Any, out: Any, result: Any) -> list[int]:
        sampled = getattr(result, "sampled_token_ids", None) or []
        index = getattr(result, "req_id_to_index", None) or {}
        hist = [0] * MAX_HIST
        for req_id in (getattr(out, "num_scheduled_tokens", None) or {}):
            req = sched.requests.get(req_id)
            if req is None or req.is_finished() or req_id not in index:
                continue  # vLLM skips these too (aborted, or finished while the step ran)
            j = len(sampled[index[req_id]]) if sampled else 0
            hist[min(j, MAX_HIST - 1)] += 1
        return hist

    @staticmethod
    def row(out: Any, hist: list[int], outputs: Any) -> None:
        tag = getattr(out, _STEP_ATTR, None)
        if tag is None:
            return
        step, wall, batch = tag
        stats = None
        for eco in (outputs.values() if isinstance(outputs, dict) else ()):
            stats = getattr(eco, "scheduler_stats", None) or stats
        spec = getattr(stats, "spec_decoding_stats", None)
        cg = getattr(stats, "cudagraph_stats", None)
        known = stats is not None  # without stats (--disable-log-stats) the step's spec numbers are unknown
        row = {"step": step, "wall": wall, **batch, "hist": hist,
               "drafts": int(getattr(spec, "num_drafts", 0)) if spec else (0 if known else None),
               "draft_tokens": int(getattr(spec, "num_draft_tokens", 0)) if spec else (0 if known else None),
               "accepted": int(getattr(spec, "num_accepted_tokens", 0)) if spec else (0 if known else None),
               "accepted_per_pos": [int(x) for x in getattr(spec, "num_accepted_tokens_per_pos", []) or []] if spec else []}
        if cg is not None:
            row["padded_tokens"] = getattr(cg, "num_padded_tokens", None)
            row["unpadded_tokens"] = getattr(cg, "num_unpadded_tokens", None)
            mode = getattr(cg, "runtime_mode", None)
            row["graph_mode"] = str(getattr(mode, "name", mode)) if mode is not None else None
        LOG.write("sched", row)


def _patch_scheduler(module: Any) -> None:
    cls = getattr(module, "Scheduler", None)
    for name in ("schedule", "update_from_output"):
        if cls is None or not callable(getattr(cls, name, None)):
            LOG.hook(f"scheduler.{name}", f"missing in {module.__name__} (vLLM {_version()})")
            return
    if getattr(cls.schedule, _MARK, False):
        return
    orig_schedule, orig_update = cls.schedule, cls.update_from_output
    after = _guarded("scheduler.schedule", _Sched.after_schedule)
    hist = _guarded("scheduler.update_from_output", _Sched.hist)
    row = _guarded("scheduler.update_from_output", _Sched.row)

    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig_schedule(self, *args, **kwargs)
        after(self, out)
        return out

    def update_from_output(self: Any, scheduler_output: Any, model_runner_output: Any, *args: Any, **kwargs: Any) -> Any:
        h = hist(self, scheduler_output, model_runner_output)
        outputs = orig_update(self, scheduler_output, model_runner_output, *args, **kwargs)
        if h is not None:
            row(scheduler_output, h, outputs)
        return outputs

    for fn, orig in ((schedule, orig_schedule), (update_from_output, orig_update)):
        fn.__wrapped__ = orig  # type: ignore[attr-defined]
        setattr(fn, _MARK, True)
    cls.schedule, cls.update_from_output = schedule, update_from_output
    LOG.hook("scheduler.schedule", "installed")
    LOG.hook("scheduler.update_from_output", "installed")
    _start_flusher()


# --------------------------------------------------------------------------- model runner (worker)

class _Clock:
    """Marks on the GPU timeline (CUDA events) or the host's (perf_counter), resolved without a sync."""

    def __init__(self) -> None:
        torch = sys.modules.get("torch")
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
        tag = getattr(scheduler_output, _STEP_ATTR, None)
        if tag is None:  # a dummy run, a graph capture or a profile run: not a step
            self.current = None
            return
        if self.clock is None:
            self.clock = _Clock()
        self.resolve(block=False)
        start = self.clock.mark()
        self.current = {"step": tag[0], "wall": time.time(), "start": start, "prev": self.prev_start, "marks": {}}
        self.prev_start = start

    def mark(self, name: str, first: bool = True) -> None:
        cur = self.current
        if cur is None or self.clock is None or (first and name in cur["marks"]):
            return
        cur["marks"][name] = self.clock.mark()

    def end(self) -> None:
        cur = self.current
        if cur is None:
            return
        self.mark("end", first=False)
        self.current = None
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
                clock.recycle([step["prev"], *step["marks"].values()])


TIMELINE = _Timeline()


def _wrap_method(owner: Any, name: str, hook: str, before: Callable[..., Any] | None,
                 after: Callable[..., Any] | None) -> bool:
    fn = getattr(owner, name, None)
    if fn is None or not callable(fn):
        LOG.hook(hook, f"missing: {getattr(owner, '__name__', type(owner).__name__)}.{name} (vLLM {_version()})")
        return False
    if getattr(fn, _MARK, False):
        return True
    b = _guarded(hook, before) if before else None
    a = _guarded(hook, after) if after else None

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if b:
            b(*args)
        out = fn(*args, **kwargs)
        if a:
            a(*args)
        return out

    wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(wrapped, _MARK, True)
    setattr(owner, name, wrapped)
    LOG.hook(hook, "installed")
    return True


def _on_model_loaded(runner: Any) -> None:
    """Instance-level hooks once the runner has its model and drafter: the LM head and the drafter's propose."""
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
        TIMELINE.mark("samp")


def _marks() -> dict[str, Any]:
    return TIMELINE.current["marks"] if TIMELINE.current else {}


def _patch_runner(module: Any, version: str) -> None:
    cls = getattr(module, "GPUModelRunner", None)
    if cls is None:
        LOG.hook(f"runner_{version}", f"missing: {module.__name__}.GPUModelRunner (vLLM {_version()})")
        return
    def begin(self: Any, scheduler_output: Any, *_: Any) -> None:
        if LOG.runner != version:
            LOG.runner = version
            LOG.header()
        TIMELINE.begin(scheduler_output)

    _wrap_method(cls, "execute_model", f"runner_{version}.execute_model", begin,
                 lambda *a: TIMELINE.mark("exec_end"))
    _wrap_method(cls, "sample_tokens", f"runner_{version}.sample_tokens", None, lambda *a: TIMELINE.end())
    _wrap_method(cls, "load_model", f"runner_{version}.load_model", None, lambda self, *a: _on_model_loaded(self))
    if version == "v1":
        _wrap_method(cls, "_model_forward", "runner_v1._model_forward",
                     lambda *a: TIMELINE.mark("fwd"), lambda *a: TIMELINE.mark("fwd_end"))
        _wrap_method(cls, "_sample", "runner_v1._sample", lambda *a: TIMELINE.mark("samp"), None)
        _wrap_method(cls, "propose_draft_token_ids", "runner_v1.propose_draft_token_ids",
                     lambda *a: TIMELINE.mark("d0"), lambda *a: TIMELINE.mark("d1"))
    _start_flusher()


def _patch_cudagraph_v2(module: Any) -> None:
    """V2 runs the target's forward as a replayed graph through its graph manager (FULL / PIECEWISE)."""
    for cls_name in dir(module):
        cls = getattr(module, cls_name)
        if isinstance(cls, type) and hasattr(cls, "run_fullgraph"):
            for meth in ("run_fullgraph", "run_pw_graph"):
                if hasattr(cls, meth):
                    _wrap_method(cls, meth, f"cudagraph_v2.{meth}",
                                 lambda *a: TIMELINE.mark("fwd"), lambda *a: TIMELINE.mark("fwd_end"))


# --------------------------------------------------------------------------- install

_flusher: threading.Thread | None = None


def _start_flusher() -> None:
    """Resolve finished steps and flush files every 0.25 s, so an idle server's last steps reach disk."""
    global _flusher
    if _flusher is not None and _flusher.is_alive():
        return

    def loop() -> None:
        while True:
            time.sleep(0.25)
            try:
                TIMELINE.resolve(block=False)
                LOG.flush()
            except Exception as err:  # keep the thread: the next tick may succeed
                LOG.notes.append(f"flush: {type(err).__name__}: {err}"[:300])

    _flusher = threading.Thread(target=loop, name="specbench-steplog", daemon=True)
    _flusher.start()


def _at_exit() -> None:
    try:
        TIMELINE.resolve(block=True)
    finally:
        LOG.flush()


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


def _version() -> str:
    return str(getattr(sys.modules.get("vllm"), "__version__", "?"))


def register() -> None:
    """The ``vllm.general_plugins`` entry point: idle unless ``SPECBENCH_STEPLOG`` asks; idempotent."""
    lvl = level()
    if lvl == "off" or any(isinstance(f, _AfterImport) for f in sys.meta_path):
        return
    patches: dict[str, Callable[[Any], None]] = {SCHEDULER: _patch_scheduler}
    if lvl == "timing":
        patches.update({RUNNER_V1: lambda m: _patch_runner(m, "v1"), RUNNER_V2: lambda m: _patch_runner(m, "v2"),
                        CUDAGRAPH_V2: _patch_cudagraph_v2})
    for name, patch in patches.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport({k: v for k, v in patches.items() if k not in sys.modules}))
    atexit.register(_at_exit)
    os.register_at_fork(before=LOG.flush, after_in_child=_forked)


def _forked() -> None:
    """vLLM forks its engine core from the API server: the child keeps the patches, not the flusher thread."""
    global _flusher
    _flusher = None
    LOG.lock, LOG.files = threading.Lock(), {}
    TIMELINE.lock = threading.Lock()
    if LOG.hooks:
        LOG.header()
        _start_flusher()
