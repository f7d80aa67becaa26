"""Token trace: annotation rules (pure) and the whole command against scripted servers."""

import yaml

from specbench.run.trace import ACCEPTED, BONUS, CORRECTED, PREFILL, TARGET, annotate, run_trace
from specbench.suite import read_suite
from tests.support.scripted_server import Script, start


def test_annotate_marks_accepted_bonus_and_corrections():
    # k=3: prefill, a full step (3 accepted + bonus), a step with 1 accepted + correction, a rejected draft
    kinds = annotate([1, 4, 2, 1], k=3, every_step_drafts=True)
    assert kinds == [PREFILL, ACCEPTED, ACCEPTED, ACCEPTED, BONUS, ACCEPTED, CORRECTED, CORRECTED]


def test_annotate_single_token_steps_are_ambiguous_without_a_draft_every_step():
    assert annotate([1, 1, 2], k=3, every_step_drafts=False) == [PREFILL, TARGET, ACCEPTED, CORRECTED]


async def test_trace_against_scripted_servers(tmp_path):
    base, r1, base_url = await start(Script(pattern=[1], token_ids=True))
    spec, r2, spec_url = await start(Script(pattern=[4, 2, 1], k=3, token_ids=True))
    try:
        path = tmp_path / "suite.yaml"
        path.write_text(yaml.safe_dump({
            "name": "t", "model": "smol",
            "configs": [{"name": "baseline", "url": base_url},
                        {"name": "ngram_k3", "url": spec_url, "method": "ngram", "num_speculative_tokens": 3}],
            "datasets": [{"name": "builtin", "requests": 1}], "load": {"max_tokens": 15},
        }))
        md, side, kinds = await run_trace(read_suite(path), "repeat after me", None, None, tmp_path / "logs")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    # 15 tokens: prefill 1, then steps of 4, 2, 1, 4, 2, 1 → 7 chunks instead of 15
    assert side.record.chunk_tokens == [1, 4, 2, 1, 4, 2, 1]
    assert kinds.count(BONUS) == 2 and kinds.count(ACCEPTED) == 8
    assert "| Target forward passes (steps) | 15 | 7 | 53.3% reduction |" in md
    assert "8 accepted / 18 proposed" in md
    assert "Output identical to baseline: yes" in md
