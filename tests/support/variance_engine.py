"""A vLLM-shaped engine whose speed is set per server start and per pass, for the restart, adaptive
repeats and heterogeneity tests (tests/integration/run/test_restart.py).

Started through a launcher YAML, so every server start is a new process. ``FAKE_SCHEDULE`` names a
JSON file ``{config: [[step seconds of pass 0, pass 1, …] of start 0, … of start 1, …]}`` (the last
entry repeats); ``FAKE_CONFIG`` is the config (set in the config's ``env``); ``FAKE_PASS_REQUESTS``
the requests of one pass (warm-up 0). The start is counted in ``<schedule>.<config>.starts``, one
line per start. Each request's step time is also scaled by a fixed factor of its place in the pass,
different per config, so a pass has a real spread over prompts (its own bootstrap CI is not ~0).
"""

from __future__ import annotations

import contextvars
import json
import os
from pathlib import Path

from aiohttp import web

from tests.support.scripted_server import Script, ScriptedServer, engine_flags

SPREAD = (1.0, 1.5, 0.6, 1.3, 0.7, 1.4, 0.5, 1.2)
_GAP: contextvars.ContextVar[float] = contextvars.ContextVar("gap", default=0.005)


def read_start(schedule: Path, config: str) -> int:
    """This process's start index (0, 1, …), counted in a file beside the schedule."""
    starts = schedule.with_name(f"{schedule.name}.{config}.starts")
    before = len(starts.read_text().splitlines()) if starts.exists() else 0
    with starts.open("a") as f:
        f.write(f"{os.getpid()}\n")
    return before


def pick(values: list, i: int):
    return values[min(i, len(values) - 1)]


class VarianceEngine(ScriptedServer):
    def __init__(self, script: Script, passes: list[float], per_pass: int, shift: int) -> None:
        super().__init__(script)
        self.passes, self.per_pass, self.shift = passes, per_pass, shift

    def step_gap(self) -> float:
        return _GAP.get()

    async def complete(self, request: web.Request) -> web.StreamResponse:
        n = self.requests  # super().complete counts this request
        place = n % self.per_pass
        _GAP.set(pick(self.passes, n // self.per_pass) * SPREAD[(place + self.shift) % len(SPREAD)])
        return await super().complete(request)


def main() -> None:
    a = engine_flags()
    spec = json.loads(a.speculative_config) if a.speculative_config else {}
    config = os.environ["FAKE_CONFIG"]
    schedule = Path(os.environ["FAKE_SCHEDULE"])
    passes = pick(json.loads(schedule.read_text())[config], read_start(schedule, config))
    k = spec.get("num_speculative_tokens")
    script = Script(pattern=[2] if k else [1], k=1 if k else None, ttft_s=0.002, gap_s=0.005,
                    model=a.served_model_name, paced=True)
    server = VarianceEngine(script, passes, int(os.environ["FAKE_PASS_REQUESTS"]), shift=3 if k else 0)
    web.run_app(server.app, host=a.host, port=a.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
