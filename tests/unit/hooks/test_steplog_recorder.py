"""The step recorder (specbench/hooks) against small fakes shaped like vLLM's scheduler and model runner.

Each test reloads the hook modules under its own environment (their ``LOG`` / ``ACTIVE`` read it at
import), keeps the flusher thread from starting (the tests call its ``refresh`` / ``resolve`` themselves)
and restores ``sys.meta_path``, so no test sees another's state.
"""

from __future__ import annotations

import gc
import importlib
import json
import sys
import time
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specbench.hooks import steplog_files, vllm_tokens
from tests.support.hooks import events, fake_module, header, rows

HIST_LEN = 17
NO_STATS = object()


# -- fakes shaped like vLLM's ----------------------------------------------------------------------------

class FakeRequest:
    def __init__(self, prompt: int, computed: int, finished: bool = False) -> None:
        self.num_prompt_tokens, self.num_computed_tokens, self.finished = prompt, computed, finished

    def is_finished(self) -> bool:
        return self.finished


def scheduler_class() -> type:
    class Scheduler:
        """``schedule()`` plans the next step of ``plan``; ``update_from_output`` returns ``outputs``."""

        def __init__(self, requests: dict[str, Any], plan: list[dict[str, Any]], stats: Any = NO_STATS) -> None:
            self.requests, self.plan, self.stats = requests, list(plan), stats
            self.running, self.waiting = list(requests), []
            self.kv_cache_manager = SimpleNamespace(usage=0.25)
            self.updates = 0

        def schedule(self) -> Any:
            step = self.plan.pop(0)
            for req_id, n in step["tokens"].items():
                if n:
                    self.requests[req_id].num_computed_tokens += n
            return SimpleNamespace(num_scheduled_tokens=dict(step["tokens"]),
                                   scheduled_spec_decode_tokens={k: [0] * v for k, v in step.get("spec", {}).items()},
                                   total_num_scheduled_tokens=sum(step["tokens"].values()))

        def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
            self.updates += 1
            if self.stats is NO_STATS:  # --disable-log-stats
                return {0: SimpleNamespace(scheduler_stats=None)}
            return {0: SimpleNamespace(scheduler_stats=SimpleNamespace(spec_decoding_stats=self.stats))}

    return Scheduler


def spec_stats(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]) -> Any:
    return SimpleNamespace(num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
                           num_accepted_tokens_per_pos=per_pos)


def runner_output(sampled: dict[str, int]) -> Any:
    ids = list(sampled)
    return SimpleNamespace(req_id_to_index={r: i for i, r in enumerate(ids)},
                           sampled_token_ids=[[1] * sampled[r] for r in ids])


def runner_class(calls: list[str]) -> type:
    """V1's shape: execute_model → _model_forward, the LM head; sample_tokens → _sample, the drafter's propose
    (whose own LM head must not move the target's marks)."""

    class Model:
        def compute_logits(self, hidden: Any) -> Any:
            calls.append("compute_logits")
            return "logits"

    class GPUModelRunner:
        def __init__(self) -> None:
            self.model = Model()

        def execute_model(self, scheduler_output: Any, intermediate: Any = None) -> Any:
            self._model_forward()
            self.model.compute_logits("h")
            return "executed"

        def sample_tokens(self, grammar: Any) -> Any:
            self._sample()
            self.propose_draft_token_ids()
            return "sampled"

        def _model_forward(self) -> Any:
            calls.append("forward")
            return "hidden"

        def _sample(self) -> Any:
            calls.append("sample")

        def propose_draft_token_ids(self) -> Any:
            calls.append("propose")
            self.model.compute_logits("drafter")

    return GPUModelRunner


def step(sched: Any, sampled: dict[str, int]) -> Any:
    out = sched.schedule()
    return sched.update_from_output(out, runner_output(sampled))


# -- scheduler rows --------------------------------------------------------------------------------------

def three_requests() -> dict[str, Any]:
    return {"spec_hit": FakeRequest(prompt=10, computed=12), "spec_miss": FakeRequest(prompt=5, computed=20),
            "prefill": FakeRequest(prompt=100, computed=0), "done": FakeRequest(prompt=4, computed=9, finished=True)}


PLAN = [{"tokens": {"spec_hit": 4, "spec_miss": 4, "prefill": 64, "done": 1}, "spec": {"spec_hit": 3, "spec_miss": 3}}]
SAMPLED = {"spec_hit": 3, "spec_miss": 1, "prefill": 0, "done": 1}


def test_a_step_writes_one_row_with_the_documented_keys_and_its_histogram(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    sched = Scheduler(three_requests(), PLAN, stats=spec_stats(2, 6, 2, [1, 1, 0]))
    step(sched, SAMPLED)
    h.files.LOG.flush()

    (row,) = rows(h.dir, "sched")
    assert set(row) == {"step", "wall", "num_reqs", "num_tokens", "decode_reqs", "spec_tokens", "prefill_tokens",
                        "ctx_tokens", "running", "waiting", "kv_usage", "hist", "drafts", "draft_tokens", "accepted",
                        "accepted_per_pos", "skipped_reqs"}
    assert row["skipped_reqs"] == ["done"]  # finished while the step ran: the runner's output for it is not counted
    assert row["step"] == 1 and abs(row["wall"] - time.time()) < 60
    assert (row["num_reqs"], row["num_tokens"], row["decode_reqs"], row["spec_tokens"]) == (4, 73, 3, 6)
    assert (row["prefill_tokens"], row["ctx_tokens"]) == (64, 12 + 20 + 9)
    assert (row["running"], row["waiting"], row["kv_usage"]) == (4, 0, 0.25)
    # the finished request is skipped; the prefill chunk sampled nothing (j = 0); j = accepted guesses + 1
    assert row["hist"] == [1, 1, 0, 1] + [0] * (HIST_LEN - 4)
    assert (row["drafts"], row["draft_tokens"], row["accepted"], row["accepted_per_pos"]) == (2, 6, 2, [1, 1, 0])
    assert sum((j - 1) * n for j, n in enumerate(row["hist"]) if j >= 1) == row["accepted"]
    assert header(h.dir)["hooks"] == {"scheduler.schedule": "installed", "scheduler.update_from_output": "installed"}
    assert header(h.dir)["level"] == "steps"


def test_the_wrapped_scheduler_returns_what_the_original_returns(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    stats = spec_stats(2, 6, 2, [1, 1, 0])
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    sched = Scheduler(three_requests(), PLAN, stats=stats)
    out = sched.schedule()
    assert out.total_num_scheduled_tokens == 73
    result = sched.update_from_output(out, runner_output(SAMPLED))
    assert result[0].scheduler_stats.spec_decoding_stats is stats and sched.updates == 1


def test_steps_numbered_in_order_and_no_spec_stats_without_scheduler_stats(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    plan = [{"tokens": {"a": 1}}, {"tokens": {"a": 1}}]
    sched = Scheduler({"a": FakeRequest(prompt=3, computed=3)}, plan, stats=NO_STATS)
    step(sched, {"a": 1})
    step(sched, {"a": 1})
    h.files.LOG.flush()

    first, second = rows(h.dir, "sched")
    assert (first["step"], second["step"]) == (1, 2)
    assert first["hist"][1] == 1 and sum(first["hist"]) == 1
    assert (first["drafts"], first["draft_tokens"], first["accepted"]) == (None, None, None)


def test_accepted_per_pos_is_null_without_scheduler_stats(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    step(Scheduler({"a": FakeRequest(prompt=3, computed=3)}, [{"tokens": {"a": 1}}], stats=NO_STATS), {"a": 1})
    h.files.LOG.flush()
    assert rows(h.dir, "sched")[0]["accepted_per_pos"] is None


def test_a_step_without_spec_decoding_stats_counts_zero_drafts(hooks) -> None:
    """Stats present but no spec-decode stats in them (no drafts this step): 0, known, not null."""
    h = hooks("steps")
    Scheduler = scheduler_class()
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    step(Scheduler({"a": FakeRequest(prompt=3, computed=3)}, [{"tokens": {"a": 1}}], stats=None), {"a": 1})
    h.files.LOG.flush()
    assert [rows(h.dir, "sched")[0][k] for k in ("drafts", "draft_tokens", "accepted")] == [0, 0, 0]


def test_a_hook_that_raises_is_marked_failed_and_the_server_goes_on(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    sched = Scheduler({"a": FakeRequest(prompt=3, computed=3)}, [{"tokens": {"a": 1}}] * 2, stats=NO_STATS)
    broken = SimpleNamespace(req_id_to_index={"a": 5}, sampled_token_ids=[[1]])  # index out of range

    result = sched.update_from_output(sched.schedule(), broken)
    assert result[0].scheduler_stats is None and sched.updates == 1
    state = header(h.dir)["hooks"]["scheduler.update_from_output"]
    assert state.startswith("failed: IndexError")
    # turned off: later steps write nothing through it, and the scheduler still answers
    assert sched.update_from_output(sched.schedule(), runner_output({"a": 1}))[0].scheduler_stats is None
    h.files.LOG.flush()
    assert rows(h.dir, "sched") == []


def test_a_failing_schedule_hook_leaves_schedule_returning_its_output(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    sched = Scheduler({"a": SimpleNamespace(num_computed_tokens="many", num_prompt_tokens=3)},
                      [{"tokens": {"a": 0}}], stats=NO_STATS)
    out = sched.schedule()
    assert out.total_num_scheduled_tokens == 0
    assert header(h.dir)["hooks"]["scheduler.schedule"].startswith("failed: ValueError")


def test_a_missing_runner_method_is_named_in_the_header_and_the_rest_installs(hooks) -> None:
    h = hooks("timing")
    Runner = runner_class([])
    del Runner._model_forward
    h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    state = header(h.dir)["hooks"]
    assert state["runner_v1._model_forward"].startswith("missing: GPUModelRunner._model_forward (vLLM ")
    assert state["runner_v1.execute_model"] == "installed" and state["runner_v1._sample"] == "installed"


def test_a_module_without_the_runner_class_is_named_missing(hooks) -> None:
    h = hooks("timing")
    h.runner.patch_runner(fake_module("fake.runner"), "v2")
    assert header(h.dir)["hooks"] == {"runner_v2": "missing: fake.runner.GPUModelRunner (vLLM ?)"}


def test_a_missing_scheduler_method_is_named_missing_like_the_runners(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    del Scheduler.update_from_output
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    assert header(h.dir)["hooks"]["scheduler.update_from_output"].startswith("missing: ")


def test_a_missing_scheduler_method_patches_nothing(hooks) -> None:
    h = hooks("steps")
    Scheduler = scheduler_class()
    del Scheduler.update_from_output
    original = Scheduler.schedule
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    assert Scheduler.schedule is original
    assert header(h.dir)["hooks"]["scheduler.update_from_output"].startswith("missing")


# -- runner rows -----------------------------------------------------------------------------------------

class Ticks:
    """perf_counter advancing 1 ms a call: every mark gets its own instant."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


def tagged(step_no: int) -> Any:
    out = SimpleNamespace()
    setattr(out, steplog_files.STEP_ATTR, (step_no, time.time(), {}))
    return out


def test_timing_rows_mark_the_parts_of_a_step_in_order(hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    h = hooks("timing")
    monkeypatch.setattr(h.runner, "time", SimpleNamespace(perf_counter=Ticks(), time=time.time))
    calls: list[str] = []
    Runner = runner_class(calls)
    h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    runner = Runner()
    for n in (1, 2):
        assert runner.execute_model(tagged(n)) == "executed"
        assert runner.sample_tokens(None) == "sampled"
    h.runner.TIMELINE.resolve(block=False)
    h.files.LOG.flush()

    assert calls == ["forward", "compute_logits", "sample", "propose", "compute_logits"] * 2
    first, second = rows(h.dir, "gpu")
    assert (first["step"], second["step"]) == (1, 2)
    order = ["t_fwd", "t_fwd_end", "t_lg0", "t_lg1", "t_exec_end", "t_samp", "t_d0", "t_d1", "t_end"]
    assert set(first) == {"step", "wall", "since_prev_ms", *order}
    # the drafter's LM head moves nothing; execute_model's end is not marked (issue 39: one event fewer a step)
    assert [first[k] for k in order] == pytest.approx([1, 2, 3, 4, None, 5, 6, 7, 8])
    assert first["since_prev_ms"] is None and second["since_prev_ms"] == pytest.approx(9)
    hdr = header(h.dir)
    assert (hdr["clock"], hdr["runner"]) == ("perf_counter", "v1")
    assert hdr["hooks"]["model.compute_logits"] == "installed"


def test_a_failing_runner_hook_is_marked_failed_and_the_runner_returns_its_result(
        hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    h = hooks("timing")

    def broken_clock() -> float:
        raise RuntimeError("no clock")

    monkeypatch.setattr(h.runner, "time", SimpleNamespace(perf_counter=broken_clock, time=time.time))
    calls: list[str] = []
    Runner = runner_class(calls)
    h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    runner = Runner()
    assert runner.execute_model(tagged(1)) == "executed"
    assert runner.sample_tokens(None) == "sampled"
    assert calls == ["forward", "compute_logits", "sample", "propose", "compute_logits"]
    assert header(h.dir)["hooks"]["runner_v1.execute_model"] == "failed: RuntimeError: no clock"


def test_a_dummy_run_writes_no_gpu_row(hooks) -> None:
    h = hooks("timing")
    Runner = runner_class([])
    h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    runner = Runner()
    runner.execute_model(SimpleNamespace())  # a dummy / profile run: no step number
    runner.sample_tokens(None)
    h.runner.TIMELINE.resolve(block=True)
    h.files.LOG.flush()
    assert rows(h.dir, "gpu") == []
    hooks_state = header(h.dir)["hooks"]
    assert "model.compute_logits" not in hooks_state  # instance hooks wait for a real step
    assert hooks_state["runner_v1.execute_model"] == "installed"  # skipped, not failed
    runner.execute_model(tagged(1))
    runner.sample_tokens(None)
    h.runner.TIMELINE.resolve(block=False)
    h.files.LOG.flush()
    assert [r["step"] for r in rows(h.dir, "gpu")] == [1]


def test_a_part_run_twice_in_a_step_keeps_its_first_marks(hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    h = hooks("timing")
    monkeypatch.setattr(h.runner, "time", SimpleNamespace(perf_counter=Ticks(), time=time.time))
    Runner = runner_class([])
    original = Runner.execute_model

    def execute_twice(self: Any, scheduler_output: Any) -> Any:
        self._model_forward()
        return original(self, scheduler_output)

    Runner.execute_model = execute_twice
    h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    runner = Runner()
    runner.execute_model(tagged(1))
    runner.sample_tokens(None)
    h.runner.TIMELINE.resolve(block=False)
    h.files.LOG.flush()
    (row,) = rows(h.dir, "gpu")
    assert (row["t_fwd"], row["t_fwd_end"], row["t_lg0"]) == pytest.approx((1, 2, 3))


def test_patching_twice_wraps_once(hooks) -> None:
    h = hooks("timing")
    Scheduler, Runner = scheduler_class(), runner_class([])
    originals = (Scheduler.schedule, Scheduler.update_from_output, Runner.execute_model, Runner._sample)
    for _ in range(2):
        h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
        h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    now = (Scheduler.schedule, Scheduler.update_from_output, Runner.execute_model, Runner._sample)
    assert [f.__wrapped__ for f in now] == list(originals)


# -- turning it on and down ------------------------------------------------------------------------------

@pytest.mark.parametrize("level", [None, "off", "OFF", "nonsense"])
def test_register_off_patches_nothing_and_writes_nothing(hooks, level: str | None) -> None:
    h = hooks(level)
    Scheduler = scheduler_class()
    original = Scheduler.schedule
    before = list(sys.meta_path)
    sys.modules[h.plugin.SCHEDULER] = fake_module(h.plugin.SCHEDULER, Scheduler=Scheduler)
    try:
        h.plugin.register()
    finally:
        del sys.modules[h.plugin.SCHEDULER]
    assert sys.meta_path == before and Scheduler.schedule is original
    assert list(h.dir.iterdir()) == [] and h.registered == []


def test_register_twice_installs_once(hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    h = hooks("timing")
    Scheduler = scheduler_class()
    original = Scheduler.schedule
    monkeypatch.setitem(sys.modules, h.plugin.SCHEDULER, fake_module(h.plugin.SCHEDULER, Scheduler=Scheduler))
    h.plugin.register()
    h.plugin.register()
    assert Scheduler.schedule.__wrapped__ is original
    assert sum(isinstance(f, h.plugin._AfterImport) for f in sys.meta_path) == 1
    assert len(h.registered) == 2  # one atexit, one fork hook


def test_register_patches_a_module_when_vllm_imports_it(hooks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import hook: nothing imported on the recorder's account, the scheduler patched as vLLM loads it."""
    h = hooks("steps")
    pkg = tmp_path / "site" / "vllm" / "v1" / "core" / "sched"
    pkg.mkdir(parents=True)
    for d in (pkg, *list(pkg.parents)[:3]):
        (d / "__init__.py").write_text("")
    (pkg / "scheduler.py").write_text("class Scheduler:\n    def schedule(self): return 'out'\n"
                                      "    def update_from_output(self, so, mro): return {}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    h.plugin.register()
    assert h.plugin.SCHEDULER not in sys.modules
    try:
        mod = importlib.import_module(h.plugin.SCHEDULER)
        assert getattr(mod.Scheduler.schedule, steplog_files.MARK) is True
    finally:
        for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[name]


def test_the_control_file_lowers_the_level_at_run_time(hooks, tmp_path: Path) -> None:
    control = tmp_path / "control"
    h = hooks("timing", control=control)
    Scheduler = scheduler_class()
    Runner = runner_class([])
    h.sched.patch_scheduler(fake_module("fake.scheduler", Scheduler=Scheduler))
    h.runner.patch_runner(fake_module("fake.runner", GPUModelRunner=Runner), "v1")
    sched = Scheduler({"a": FakeRequest(prompt=3, computed=3)}, [{"tokens": {"a": 1}}] * 5, stats=NO_STATS)
    runner = Runner()

    def one_step() -> tuple[int, int]:
        out = sched.schedule()
        runner.execute_model(out)
        runner.sample_tokens(None)
        sched.update_from_output(out, runner_output({"a": 1}))
        h.runner.TIMELINE.resolve(block=False)
        h.files.LOG.flush()
        return len(rows(h.dir, "sched")), len(rows(h.dir, "gpu"))

    assert one_step() == (1, 1)
    for wanted, seen in (("steps", (2, 1)), ("off", (2, 1)), ("bogus", (2, 1)), ("timing", (3, 2))):
        control.write_text(wanted + "\n")
        h.files.ACTIVE.refresh()
        assert one_step() == seen, wanted


def test_the_control_file_never_raises_the_launch_level(hooks, tmp_path: Path) -> None:
    control = tmp_path / "control"
    control.write_text("timing")
    h = hooks("steps", control=control)
    h.files.ACTIVE.refresh()
    assert h.files.LEVELS[h.files.ACTIVE.rank] == "steps"
    control.unlink()
    h.files.ACTIVE.refresh()  # a missing file keeps the level it had
    assert h.files.LEVELS[h.files.ACTIVE.rank] == "steps"


CHILD = """
import multiprocessing, os, sys
def child():
    from specbench.hooks.steplog_files import LOG
    LOG.write("sched", {"step": 1})  # buffered: no flush before the child ends
if __name__ == "__main__":
    p = multiprocessing.get_context(sys.argv[1]).Process(target=child)
    p.start(); p.join(); sys.exit(p.exitcode)
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_multiprocessing_child_flushes_its_rows_when_it_ends(tmp_path: Path, method: str) -> None:
    """Issue 38: vLLM's engine core and workers are multiprocessing children, which end through os._exit, so an
    atexit flush never ran there and their last buffered rows were lost (a token log one guess short)."""
    import os
    import subprocess

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "SPECBENCH_STEPLOG": "steps", "SPECBENCH_STEPLOG_DIR": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    subprocess.run([sys.executable, str(script), method], env=env, check=True, timeout=60)
    (written,) = tmp_path.glob("sched-*.jsonl")
    assert written.read_text() == '{"step":1}\n'


def test_the_token_log_reaches_disk_with_its_step(hooks) -> None:
    """The tokens level (accuracy runs only) flushes each step's guesses as the sampler returns: none waits for
    the flusher, so none is lost when the worker ends."""
    h = hooks("tokens")
    tokens = vllm_tokens
    stats = ([0.9, 0.2], [0.1, 0.3], [0.5, 0.1], [7, 9])
    tokens._BATCH.update(step=3, req_ids=["r"], computed=[10], prompt=[8], pending=([7, 8], [2], stats, None))
    tokens._after(None, SimpleNamespace(sampled_token_ids=SimpleNamespace(tolist=lambda: [[7, 5, -1]])))
    rows = [json.loads(line) for line in (h.dir / f"tokens-{h.files.LOG.pid}.jsonl").read_text().splitlines()]
    assert [(r["step"], r["draft_pos"], r["accepted"]) for r in rows] == [(3, 1, True), (3, 2, False)]


def test_a_full_collection_is_an_event_with_the_step_in_flight(hooks) -> None:
    """Issue 39: gc.callbacks in every process the plugin loads in; the row names the generation and the step the
    process had in flight, and is written by the flusher, never from inside the collection."""
    h = hooks("steps")
    h.plugin.register()
    assert h.files.LOG.hooks["events.gc"] == "installed"
    h.files.IN_FLIGHT[0] = 7
    gc.collect()
    assert events(h.dir) == []  # queued, not written inside the collection
    h.files.write_pending()
    h.files.LOG.flush()
    (row,) = [e for e in events(h.dir) if e["kind"] == "gc"]
    assert row["step"] == 7 and row["detail"].startswith("generation 2,") and row["ms"] >= 0


def test_no_event_hook_when_the_log_is_off(hooks) -> None:
    h = hooks("off")
    h.plugin.register()
    gc.collect()
    assert "events.gc" not in h.files.LOG.hooks and not h.files.PENDING


def test_a_preemption_is_an_event_of_the_step_being_scheduled(hooks) -> None:
    h = hooks("steps")
    preempted = []

    class Scheduler:
        def schedule(self) -> Any:
            self._preempt_request(SimpleNamespace(request_id="req-9"), 1.0)
            return SimpleNamespace(num_scheduled_tokens={}, total_num_scheduled_tokens=0)

        def update_from_output(self, out: Any, result: Any) -> dict[str, Any]:
            return {}

        def _preempt_request(self, request: Any, timestamp: float) -> None:
            preempted.append(request.request_id)

    module = types.ModuleType("vllm.v1.core.sched.scheduler")
    module.Scheduler = Scheduler  # type: ignore[attr-defined]
    h.plugin._scheduler_and_preemption(module)
    Scheduler().schedule()
    h.files.write_pending()
    h.files.LOG.flush()
    assert preempted == ["req-9"]
    assert [(e["kind"], e["step"], e["detail"]) for e in events(h.dir)] == [("preemption", 1, "request req-9")]


def test_a_slow_flush_of_the_recorder_is_an_event_of_its_own(hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    """So a stall the recorder itself caused is named, not hidden (the flusher's loop, one tick)."""
    h = hooks("steps")
    ticks = iter([0.0, 0.0025])  # perf_counter: the tick's start, its end 2.5 ms later
    monkeypatch.setattr(h.files.time, "perf_counter", lambda: next(ticks, 0.0025))
    sleeps = []
    monkeypatch.setattr(h.files.time, "sleep", lambda s: sleeps.append(s) if len(sleeps) < 1 else (_ for _ in ()).throw(SystemExit))
    h.files.flusher_thread = None
    started = []
    monkeypatch.setattr(h.files.threading, "Thread", lambda target, **k: started.append(target) or SimpleNamespace(start=lambda: None))
    h.files.start_flusher()
    with pytest.raises(SystemExit):
        started[0]()
    h.files.write_pending()
    h.files.LOG.flush()
    assert [(e["kind"], e["ms"]) for e in events(h.dir)] == [("recorder_flush", 2.5)]


def test_a_v2_step_takes_eight_marks_its_verification_start_sharing_the_lm_heads_end(
        hooks, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 item 6: V2's LM head ends where sampling begins — one event for both — and execute_model's end is
    not marked: 8 events a step (start, forward, its end, LM head start and end, drafter start and end, end)."""
    h = hooks("timing")
    ticks = Ticks()
    monkeypatch.setattr(h.runner, "time", SimpleNamespace(perf_counter=ticks, time=time.time))

    class Model:
        def compute_logits(self, hidden: Any) -> Any:
            return "logits"

    class Speculator:
        def propose(self) -> Any:
            return "drafts"

    class Graphs:
        def run_fullgraph(self) -> Any:
            return "hidden"

    class GPUModelRunner:
        def __init__(self) -> None:
            self.model, self.speculator, self.graphs = Model(), Speculator(), Graphs()

        def execute_model(self, scheduler_output: Any) -> Any:
            self.graphs.run_fullgraph()
            return None

        def sample_tokens(self, grammar: Any) -> Any:
            self.model.compute_logits("h")
            self.speculator.propose()
            return "sampled"

    h.runner.patch_cudagraph_v2(fake_module("fake.cudagraph_utils", Graphs=Graphs))
    h.runner.patch_runner(fake_module("fake.v2", GPUModelRunner=GPUModelRunner), "v2")
    runner = GPUModelRunner()
    before = ticks.now
    runner.execute_model(tagged(1))
    runner.sample_tokens(None)
    assert round((ticks.now - before) / 0.001) == 8
    h.runner.TIMELINE.resolve(block=False)
    h.files.LOG.flush()
    (row,) = rows(h.dir, "gpu")
    assert row["t_samp"] == row["t_lg1"] and row["t_exec_end"] is None
    assert [row[k] for k in ("t_fwd", "t_fwd_end", "t_lg0", "t_lg1", "t_d0", "t_d1", "t_end")] == pytest.approx([1, 2, 3, 4, 5, 6, 7])
