"""The step recorder's own host time per engine step (issue 33, item 5), without a server.

The scheduler hooks (``steps`` level) run in the engine core's thread between steps; where a small model sets
the pace on the host, that time is what the server loses. This times the three hook bodies on objects shaped
like vLLM's (1 and 64 scheduled requests, no spec stats) and prints µs per step.

    python benchmarks/steplog_hook_cost.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class _Request:
    num_computed_tokens, num_prompt_tokens = 200, 100

    def is_finished(self) -> bool:
        return False


def per_step_us(n: int, steps: int) -> float:
    from specbench.hooks import vllm_scheduler as hooks
    reqs = {f"r{i}": _Request() for i in range(n)}
    sched = types.SimpleNamespace(requests=reqs, running=list(reqs), waiting=[], kv_cache_manager=types.SimpleNamespace(usage=0.1))
    out = types.SimpleNamespace(num_scheduled_tokens=dict.fromkeys(reqs, 1), scheduled_spec_decode_tokens={},
                                total_num_scheduled_tokens=n)
    result = types.SimpleNamespace(sampled_token_ids=[[1]] * n, req_id_to_index={k: i for i, k in enumerate(reqs)})
    outputs = {0: types.SimpleNamespace(scheduler_stats=types.SimpleNamespace(spec_decoding_stats=None, cudagraph_stats=None))}
    t = time.perf_counter()
    for _ in range(steps):
        hooks._Sched.after_schedule(sched, out)
        hooks._Sched.row(out, hooks._Sched.hist(sched, out, result), outputs)
    return (time.perf_counter() - t) / steps * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20000)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as log:
        os.environ.update(SPECBENCH_STEPLOG="steps", SPECBENCH_STEPLOG_DIR=log)
        for n in (1, 64):
            print(f"{n:>3} requests: {per_step_us(n, a.steps):.1f} µs per step (scheduler hooks, one row written)")


if __name__ == "__main__":
    main()
