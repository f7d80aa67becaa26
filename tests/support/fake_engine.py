"""A vLLM-shaped engine on top of the scripted server, for `whatif` and `tune` known-answer tests.

Started through a launcher YAML (adapter vllm) like a real engine: it reads ``--port``,
``--served-model-name`` and ``--speculative-config`` and streams with a known cost model:

- one target step takes ``--gap`` (10 ms) + ``--gap-per-draft`` (4.5 ms) × K × batch, every chunk of a request
  due on one timeline from its arrival (``Script.paced``): drafting work grows with K and with the batch, so
  more K pays at low load and loses at high load. The batch is counted, not read off the clock: with
  ``--batches 1,4 --pass-requests 9`` request n (0-based, warm-ups included) is in pass n // 9 and its batch is
  that pass's entry (the load's concurrency; the last repeats), however late the client sends its next request.
  Without them it is the requests in flight when a step is due, which a slow client makes smaller
  (a known-speed test needs the counted batch);
- tokens per step: with ``rejection_sample_method: synthetic`` a cycle whose mean is
  ``synthetic_acceptance_length``, or, given ``synthetic_acceptance_rates`` [p_1..p_k], a cycle of n steps
  (4, 10 or 20) of which round(n·p_i) accept at least i drafts, so the per-position counters read p_i back;
  otherwise the real "drafter" accepts min(K, 2) drafts;
- ``num_speculative_tokens_per_batch_size`` is recorded in ``/version`` (``schedule``) so a test
  can see the flag arrived;
- with ``SPECBENCH_STEPLOG`` / ``SPECBENCH_STEPLOG_DIR`` set (a suite's ``steplog:``), one step-log row per
  decode chunk (``tests/support/steplog.StepWriter``), its accepted tokens the ones /metrics counts; with
  ``FAKE_ONE_TIME_REQUESTS=N`` also a one-time ``compile`` event for each of the first N requests it serves (what
  ``load.warmup: steady`` waits out).
"""

from __future__ import annotations

import argparse
import contextvars
import json
import math
import os
import time

from aiohttp import web

from tests.support.scripted_server import Script, ScriptedServer, engine_flags
from tests.support.steplog import StepWriter


def batch_args(concurrency: list[int], pass_requests: int) -> list[str]:
    """A config's ``args`` that fix the batch of each pass: the suite's load points in order, and the
    requests one pass sends to the server (its warm-up included)."""
    return ["--batches", ",".join(str(c) for c in concurrency), "--pass-requests", str(pass_requests)]


def synthetic_pattern(length: float) -> list[int]:
    """Ten steps whose tokens average ``length`` (to 0.1), spread evenly: 1.5 → 1, 2, 1, 2, …"""
    return [math.floor((i + 1) * length + 1e-9) - math.floor(i * length + 1e-9) for i in range(10)]


def rates_pattern(rates: list[float]) -> list[int]:
    """The fewest of 4, 10 or 20 steps in which round(steps·p_i) steps accept at least i drafts exactly (else 20)."""
    steps = next((n for n in (4, 10) if all(abs(n * p - round(n * p)) < 1e-9 for p in rates)), 20)
    reach = [round(steps * p) for p in rates]
    return [1 + sum(1 for r in reach if s < r) for s in range(steps)]


_BATCH: contextvars.ContextVar[int | None] = contextvars.ContextVar("batch", default=None)


class FakeEngine(ScriptedServer):
    def __init__(self, script: Script, gap_per_draft: float, schedule, batches: list[int] | None = None,
                 pass_requests: int | None = None) -> None:
        super().__init__(script)
        self.gap_per_draft, self.inflight, self.schedule_flag = gap_per_draft, 0, schedule
        self.batches, self.pass_requests = batches, pass_requests
        level, folder = os.environ.get("SPECBENCH_STEPLOG", "off"), os.environ.get("SPECBENCH_STEPLOG_DIR")
        self.steplog = StepWriter(folder, level) if folder and level in ("steps", "timing") else None
        self.one_time_left = int(os.environ.get("FAKE_ONE_TIME_REQUESTS", "0"))

    def _count_step(self, n: int) -> None:
        super()._count_step(n)
        if self.steplog is not None:
            self.steplog.write(time.time(), n, self.s.k)

    def step_gap(self) -> float:
        batch = _BATCH.get()
        return self.s.gap_s + self.gap_per_draft * (self.s.k or 0) * (batch if batch is not None else max(self.inflight, 1))

    async def complete(self, request: web.Request) -> web.StreamResponse:
        if self.steplog is not None and self.one_time_left > 0:
            self.one_time_left -= 1
            self.steplog.event("compile", time.time(), 3.0, "fake first-call compile")
        if self.batches and self.pass_requests:
            n = self.requests  # super().complete counts this request
            _BATCH.set(self.batches[min(n // self.pass_requests, len(self.batches) - 1)])
        self.inflight += 1
        try:
            return await super().complete(request)
        finally:
            self.inflight -= 1

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "fake-engine-1", "schedule": self.schedule_flag})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--gap", type=float, default=0.010)
    p.add_argument("--gap-per-draft", type=float, default=0.0045)
    p.add_argument("--ttft", type=float, default=0.010)
    p.add_argument("--batches", help="the batch of each pass, in order (the suite's concurrencies): 1,4")
    p.add_argument("--pass-requests", type=int, help="requests per pass, warm-ups included")
    a = engine_flags(p)
    spec = json.loads(a.speculative_config) if a.speculative_config else {}
    k = spec.get("num_speculative_tokens")
    if not spec:
        pattern = [1]
    elif spec.get("rejection_sample_method") == "synthetic" and "synthetic_acceptance_rates" in spec:
        pattern = rates_pattern([float(p) for p in spec["synthetic_acceptance_rates"]])
    elif spec.get("rejection_sample_method") == "synthetic":
        pattern = synthetic_pattern(float(spec["synthetic_acceptance_length"]))
    else:
        pattern = [min(k, 2) + 1]
    script = Script(pattern=pattern, k=k, ttft_s=a.ttft, gap_s=a.gap, model=a.served_model_name, paced=True)
    batches = [int(b) for b in a.batches.split(",")] if a.batches else None
    server = FakeEngine(script, a.gap_per_draft, spec.get("num_speculative_tokens_per_batch_size"), batches, a.pass_requests)
    web.run_app(server.app, host=a.host, port=a.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
