"""Scheduler hooks (engine core): one ``sched`` row per step, with the numbers vLLM's counters add."""

from __future__ import annotations

import time
from typing import Any

from .steplog_files import IN_FLIGHT, LOG, MARK, MAX_HIST, STEP_ATTR, guarded, start_flusher, vllm_version


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
        setattr(out, STEP_ATTR, (_Sched.step, time.time(), {
            "num_reqs": len(counts), "num_tokens": int(getattr(out, "total_num_scheduled_tokens", 0)),
            "decode_reqs": decode, "spec_tokens": sum(len(v) for v in spec.values()),
            "prefill_tokens": prefill_tokens, "ctx_tokens": ctx,
            "running": len(getattr(sched, "running", ())), "waiting": len(getattr(sched, "waiting", ())),
            "kv_usage": float(kv) if isinstance(kv, (int, float)) else None}))

    @staticmethod
    def hist(sched: Any, out: Any, result: Any) -> tuple[list[int], list[str]]:
        """The step's commit histogram, and the scheduled requests whose output vLLM does not count (aborted, or
        finished while the step ran: under async scheduling the runner still verified their guesses)."""
        sampled = getattr(result, "sampled_token_ids", None) or []
        index = getattr(result, "req_id_to_index", None) or {}
        hist = [0] * MAX_HIST
        skipped = []
        for req_id in (getattr(out, "num_scheduled_tokens", None) or {}):
            req = sched.requests.get(req_id)
            if req is None or req.is_finished() or req_id not in index:
                skipped.append(str(req_id)[:200])  # vLLM skips these too
                continue
            j = len(sampled[index[req_id]]) if sampled else 0
            hist[min(j, MAX_HIST - 1)] += 1
        return hist, skipped[:64]

    @staticmethod
    def row(out: Any, counted: tuple[list[int], list[str]], outputs: Any) -> None:
        tag = getattr(out, STEP_ATTR, None)
        if tag is None:
            return
        step, wall, batch = tag
        hist, skipped = counted
        if not batch["num_tokens"]:  # nothing scheduled: the runner does not execute it, it is no step
            return
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
               "accepted_per_pos": ([int(x) for x in getattr(spec, "num_accepted_tokens_per_pos", []) or []] if spec
                                     else ([] if known else None))}
        if skipped:
            row["skipped_reqs"] = skipped
        if cg is not None:
            row["padded_tokens"] = getattr(cg, "num_padded_tokens", None)
            row["unpadded_tokens"] = getattr(cg, "num_unpadded_tokens", None)
            mode = getattr(cg, "runtime_mode", None)
            row["graph_mode"] = str(getattr(mode, "name", mode)) if mode is not None else None
        LOG.write("sched", row)


def patch_scheduler(module: Any) -> None:
    cls: Any = getattr(module, "Scheduler", None)
    for name in ("schedule", "update_from_output"):
        if cls is None or not callable(getattr(cls, name, None)):
            LOG.hook(f"scheduler.{name}", f"missing: {module.__name__}.Scheduler.{name} (vLLM {vllm_version()})")
            return
    if getattr(cls.schedule, MARK, False):
        return
    orig_schedule, orig_update = cls.schedule, cls.update_from_output
    after = guarded("scheduler.schedule", _Sched.after_schedule)
    hist = guarded("scheduler.update_from_output", _Sched.hist)
    row = guarded("scheduler.update_from_output", _Sched.row)

    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        IN_FLIGHT[0] = _Sched.step + 1  # what happens while scheduling (a preemption) belongs to the step scheduled
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
        setattr(fn, MARK, True)
    cls.schedule, cls.update_from_output = schedule, update_from_output
    LOG.hook("scheduler.schedule", "installed")
    LOG.hook("scheduler.update_from_output", "installed")
    start_flusher()


