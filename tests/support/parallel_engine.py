"""A vLLM-shaped engine for the scale-out tests: reads ``--speculative-config`` (pattern 1,2,k+1 with
k = num_speculative_tokens, else 1) and can kill its parent, the worker, after N requests
(FAKE_KILL_PARENT_AFTER; once, FAKE_MARKER); with ``SPECBENCH_STEPLOG_DIR`` set (a suite's ``steplog:``) it
writes a step-log row per decode chunk (``tests/support/steplog.StepWriter``); with ``FAKE_STARTS`` set it appends
a JSON line to that file as it starts (its pid, Unix time and CUDA_VISIBLE_DEVICES: the restart rounds' tests)."""

import json
import os
import signal
import time

from aiohttp import web

from tests.support.scripted_server import Script, ScriptedServer, engine_flags
from tests.support.steplog import StepWriter


class Server(ScriptedServer):
    def __init__(self, script: Script, kill_after: str | None, marker: str | None) -> None:
        super().__init__(script)
        self.kill_after, self.marker = kill_after, marker
        level, folder = os.environ.get("SPECBENCH_STEPLOG", "off"), os.environ.get("SPECBENCH_STEPLOG_DIR")
        self.steplog = StepWriter(folder, level) if folder and level in ("steps", "timing") else None

    def _count_step(self, n: int) -> None:
        super()._count_step(n)
        if self.steplog is not None:
            self.steplog.write(time.time(), n, self.s.k)

    async def complete(self, request):
        if self.kill_after and self.requests + 1 > int(self.kill_after) and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getppid(), signal.SIGKILL)  # the worker that started us
        return await super().complete(request)


def main() -> None:
    a = engine_flags()
    if os.environ.get("FAKE_STARTS"):
        with open(os.environ["FAKE_STARTS"], "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "t": time.time(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}) + "\n")
    spec = json.loads(a.speculative_config) if a.speculative_config else None
    k = spec["num_speculative_tokens"] if spec else None
    script = Script(pattern=[1, 2, k + 1] if k else [1], k=k,
                    ttft_s=0.02, gap_s=float(os.environ.get("FAKE_GAP", "0.01")), model=a.served_model_name)
    server = Server(script, os.environ.get("FAKE_KILL_PARENT_AFTER"), os.environ.get("FAKE_MARKER"))
    web.run_app(server.app, host=a.host, port=a.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
