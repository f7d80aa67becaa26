"""The V2 runner's token log (issue 39 item 7) with the engine's own torch: vLLM 0.26's V2 ``RejectionSampler``
(DSpark, EAGLE on dense targets) needs Triton, which the CPU engine lacks, so its hook is driven here directly,
with real tensors shaped as V2 hands them: each guess is verified by the logits row before it, its draft logits are
``draft_logits[idx_mapping[r], position − 1]``, and what was kept comes from ``num_sampled``.

Needs `specbench setup cpu` (its venv has torch); skips without it unless SPECBENCH_REQUIRE_ENGINE=1."""

import json
import os
import subprocess

import pytest

from tests.support.cpu_engine import ENGINE_PY
from tests.support.paths import ROOT

pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("cpu_engine_python")]

SCRIPT = r"""
import json, sys
from types import SimpleNamespace
import numpy as np, torch
from specbench.hooks import steplog_files, vllm_tokens
torch.manual_seed(0)
V, K = 50, 3
# request a: 3 guesses (logits rows 0-3), request b: a prefill chunk (row 4, no guess), request c: 2 guesses (5-7)
cu = np.array([0, 4, 5, 8], dtype=np.int32)
input_ids = torch.tensor([9, 11, 12, 13, 7, 30, 31, 32], dtype=torch.int64)
batch = SimpleNamespace(cu_num_logits_np=cu, input_ids=input_ids, logits_indices=torch.arange(8),
                        idx_mapping=torch.tensor([5, 0, 2], dtype=torch.int32), req_ids=["a", "b", "c"],
                        num_computed_tokens_np=np.array([20, 0, 40]), prefill_len_np=np.array([10, 64, 30]))
logits = torch.randn(8, V)
draft = torch.randn(6, K, V)
steplog_files.IN_FLIGHT[0] = 17
vllm_tokens._before_v2(None, logits, batch, draft)
vllm_tokens._after_v2(None, SimpleNamespace(num_sampled=torch.tensor([3, 0, 1])))  # a kept 2, c kept none
p = torch.softmax(logits, -1)
d = torch.softmax(draft, -1)
want = [(r, pos, row, tok, state) for r, pos, row, tok, state in
        [("a", 1, 0, 11, 5), ("a", 2, 1, 12, 5), ("a", 3, 2, 13, 5), ("c", 1, 5, 31, 2), ("c", 2, 6, 32, 2)]]
print(json.dumps([{"req": r, "pos": pos, "t_prob": float(p[row, tok]), "d_prob": float(d[state, pos - 1, tok]),
                   "top": int(p[row].argmax())} for r, pos, row, tok, state in want]))
"""


def test_each_v2_guess_gets_its_rows_probabilities_and_verdict(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECBENCH_STEPLOG": "tokens", "SPECBENCH_STEPLOG_DIR": str(tmp_path)}
    out = subprocess.run([str(ENGINE_PY), "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    want = json.loads(out.stdout.strip().splitlines()[-1])
    (path,) = tmp_path.glob("tokens-*.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    got = [(r["req_id"], r["draft_pos"], r["token"], r["accepted"], r["step"], r["batch"], r["ctx"], r["out_pos"]) for r in rows]
    assert got == [("a", 1, 11, True, 17, 3, 21, 11), ("a", 2, 12, True, 17, 3, 22, 12), ("a", 3, 13, False, 17, 3, 23, 13),
                   ("c", 1, 31, False, 17, 3, 41, 11), ("c", 2, 32, False, 17, 3, 42, 12)]
    for row, w in zip(rows, want):
        assert row["t_prob"] == pytest.approx(w["t_prob"], rel=1e-4) and row["d_prob"] == pytest.approx(w["d_prob"], rel=1e-4)
        assert row["target_top"] == w["top"]
