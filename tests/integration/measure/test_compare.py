"""The speedup decomposition: tokens per step ÷ step cost × residual, exact on known step times."""

import json
import re

import pytest

from specbench.measure.compare import DECOMPOSITION_KEYS, Decomposition, decomposition, paired_decomposition
from specbench.report.html import render_html
from specbench.report.markdown import DECOMPOSITION_NOTE, markdown
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_read import rows_from
from specbench.suite import read_suite
from tests.support.runs import run_suite
from tests.support.scripted_server import Script, start
from tests.support.suites import baseline_and_spec, write_suite

PATTERN, K = [1, 2, 4], 3  # 7 tokens in 3 steps
CYCLES = 9
MAX_TOKENS = 1 + 7 * CYCLES  # prefill token + 63 decode tokens: 27 spec steps, 63 baseline steps
BASE_GAP, SPEC_GAP, TTFT = 0.012, 0.016, 0.100


def served_step_s(server) -> float:
    """The mean gap between the content chunks the server wrote in the timed pass (its requests after the one
    warm-up): what the client's step_mean_ms must read, whatever lateness a busy machine gave the server."""
    writes = [t.writes for n, t in server.timelines.items() if n > 1]
    return sum(w[-1] - w[0] for w in writes) / sum(len(w) - 1 for w in writes)


async def test_decomposition_exact_on_known_step_times(tmp_path, prompts_file):
    base_server, r1, base = await start(Script(pattern=[1], ttft_s=TTFT, gap_s=BASE_GAP, paced=True))
    spec_server, r2, spec = await start(Script(pattern=PATTERN, k=K, ttft_s=TTFT, gap_s=SPEC_GAP, paced=True))
    try:
        suite = write_suite(tmp_path, baseline_and_spec(base, spec, k=K), name="decomp", prompts=prompts_file, requests=6,
                            load={"concurrency": 2, "max_tokens": MAX_TOKENS, "warmup": 1})
        outcome = await run_suite(read_suite(suite), tmp_path / "out")
    finally:
        await r1.cleanup()
        await r2.cleanup()
    assert outcome.exit_code == 0
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    b, s = rows["baseline"], rows["spec"]
    al = 7 / 3
    assert s["stream_mean_acceptance_length"] == pytest.approx(al)
    # exact against the step times the servers really kept (their own write stamps; the scripted 16 ÷ 12 ms unless a
    # busy machine made them late): the client's reading of them
    served = served_step_s(spec_server) / served_step_s(base_server)
    assert s["step_cost_ratio"] == pytest.approx(served, rel=0.002)
    assert s["speedup_decomposed"] == pytest.approx(al / served, rel=0.002)
    # by definition, not approximately: the decomposition is the row's own numbers
    assert s["speedup_decomposed"] == pytest.approx(al / s["step_cost_ratio"], rel=1e-12)
    assert s["speedup_residual"] == pytest.approx(s["speedup_vs_baseline"] / s["speedup_decomposed"], rel=1e-12)
    # the 100 ms TTFT is not shortened by drafting: (100 + 63×12) / (100 + 27×16) = 1.609 of the 1.75 decode gain
    # (within 10 %: the throughput also holds the client's turnaround between requests, longer on a busy machine)
    ideal = (TTFT + 7 * CYCLES * BASE_GAP) / (TTFT + 3 * CYCLES * SPEC_GAP)
    assert s["speedup_residual"] == pytest.approx(ideal / 1.75, rel=0.1) and s["speedup_residual"] < 1
    lo, hi = s["ci95"]["speedup_decomposed"]
    assert lo <= s["speedup_decomposed"] <= hi and hi - lo < 0.25
    assert [s["speedup_decomposed_ci_low"], s["speedup_decomposed_ci_high"]] == [lo, hi]
    assert all(b[k] is None for k in DECOMPOSITION_KEYS)  # the baseline: keys present, not measured
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| Tok/step | Step cost | Decomposed speedup | Residual |" in md
    assert f"| {s['step_cost_ratio']:.3f}x | {s['speedup_decomposed']:.3f}x [{lo:.3f}–{hi:.3f}] |" in md
    assert DECOMPOSITION_NOTE in md


def _rec(config: str, times: list[float], tokens: list[int], prompt: str = "p0") -> RequestRecord:
    return RequestRecord(prompt_id=prompt, dataset="d", config=config, send_time=0.0, chunk_times=times,
                         chunk_tokens=tokens, token_source="usage_continuous", output_tokens=sum(tokens))


def test_paired_decomposition_is_the_decode_rate_ratio():
    # spec: 6 decode tokens in 2 steps over 40 ms; baseline: 6 tokens in 6 steps over 60 ms → (6/40)/(6/60) = 1.5
    spec = _rec("s", [0.1, 0.12, 0.14], [1, 3, 3])
    base = _rec("b", [0.1, 0.11, 0.12, 0.13, 0.14, 0.15, 0.16], [1] * 7)
    point, lo, hi = paired_decomposition([(spec, base)])
    assert point == pytest.approx(1.5) and lo is None and hi is None  # one prompt: no interval
    pairs = [(spec, base), (_rec("s", [0.1, 0.13, 0.16], [1, 3, 3], "p1"), _rec("b", [0.1, 0.16, 0.22], [1, 3, 3], "p1"))]
    point, lo, hi = paired_decomposition(pairs)
    assert point == pytest.approx((12 / 100) / (12 / 180)) and lo <= point <= hi


def test_a_baseline_whose_chunks_merge_steps_is_costed_per_step():
    """vLLM on the H200 at C=64 sent 1.5 tokens per baseline chunk: a plain decode step makes one token, so its
    chunk gap spans 1.5 steps; the step cost is against the baseline's time per step, not per chunk."""
    base = {"dataset": "d", "run": "baseline", "step_mean_ms": 6.0, "stream_mean_acceptance_length": 1.5}
    spec = {"dataset": "d", "run": "spec", "step_mean_ms": 6.0, "stream_mean_acceptance_length": 3.0, "speedup_vs_baseline": 1.8}
    out = decomposition(*rows_from([spec, base]), [])
    assert out.step_cost_ratio == pytest.approx(1.5)     # 6 ms ÷ (6 ms ÷ 1.5 tokens); chunk gaps alone say 1.0
    assert out.speedup_decomposed == pytest.approx(2.0)  # = (3.0 / 6 ms) ÷ (1.5 / 6 ms), the decode-rate ratio
    assert out.speedup_residual == pytest.approx(0.9)
    unmerged = decomposition(*rows_from([spec, {**base, "stream_mean_acceptance_length": 1.0}]), [])
    assert unmerged.step_cost_ratio == pytest.approx(1.0) and unmerged.speedup_decomposed == pytest.approx(3.0)


def test_missing_inputs_give_null_never_zero():
    base = {"dataset": "d", "run": "baseline", "step_mean_ms": 10.0, "stream_mean_acceptance_length": None}
    row = {"dataset": "d", "run": "spec", "step_mean_ms": 15.0, "stream_mean_acceptance_length": 2.0, "speedup_vs_baseline": 1.2}
    out = decomposition(*rows_from([row, base]), [])
    assert out.step_cost_ratio == pytest.approx(1.5)
    assert out.speedup_decomposed is None and out.speedup_residual is None
    out = decomposition(*rows_from([{**row, "step_mean_ms": None}, {**base, "stream_mean_acceptance_length": 1.0}]), [])
    assert out == Decomposition()
    md = markdown(rows_from([{"dataset": "d", "run": "spec", "concurrency": 1, "step_cost_ratio": 1.5, "speedup_decomposed": None},
                             {"dataset": "d", "run": "baseline", "concurrency": 1}]))
    # the Why table: Step cost measured, the baseline's a dash; the columns nothing measured are left out, never 0
    assert "Why: tokens per step vs step cost\n\n| Dataset | Run | Step cost |\n| --- | --- | --- |\n" \
           "| d | spec | 1.500x |\n| d | baseline | — |\n\n- Decomposition:" in md


def test_columns_and_note_only_when_measured():
    rows = rows_from([{"dataset": "d", "run": "baseline", "concurrency": 1, "speedup_vs_baseline": 1.0}])
    md = markdown(rows)
    assert "Step cost" not in md and DECOMPOSITION_NOTE not in md


def _row(run: str, c: int, al: float | None, cost: float | None, speedup: float) -> dict:
    return {"dataset": "d", "run": run, "method": "baseline" if run == "baseline" else "ngram",
            "num_speculative_tokens": None if run == "baseline" else 3, "concurrency": c, "status": "ok",
            "stream_mean_acceptance_length": al, "step_cost_ratio": cost, "speedup_vs_baseline": speedup,
            "speedup_decomposed": None if al is None or cost is None else al / cost,
            "speedup_residual": None if al is None or cost is None else speedup / (al / cost)}


def test_html_plot_marks_where_tokens_per_step_meet_step_cost():
    rows = [_row("baseline", 1, 1.0, None, 1.0), _row("baseline", 16, 1.0, None, 1.0),
            _row("spec", 1, 2.4, 1.2, 1.8), _row("spec", 16, 2.2, 2.8, 0.7)]
    page = render_html(rows_from(rows), None, {})
    table = page[page.index('<table class="results">'):page.index("</table>")]
    assert re.search(r'>Step cost</th><th scope="col"[^>]*>Decomposed speedup</th>', table)
    assert "<td>2.000x</td>" in table and "<td>0.786x</td>" in table
    fig = page[page.index('id="fig-decomposition"'):]
    fig = fig[:fig.index("</figure>")]
    assert fig.count('class="crossover"') == 1
    # tokens 2.4 → 2.2 and cost 1.2 → 2.8 meet a third of the way from c=1 to c=16 in log(c): 16^(2/3)
    assert "meet at ≈ 6.35 (above it a step costs more" in fig
    assert "2.40 tokens per step ÷ step cost 1.20× = 2.000× in decode; measured 1.800× (residual 0.900)" in fig
    # a row without step cost is listed as not measured, not drawn at 0
    page = render_html(rows_from(rows[:3] + [_row("spec", 16, 2.2, None, 0.7)]), None, {})
    fig = page[page.index('id="fig-decomposition"'):]
    assert "not measured: spec step cost @ C=16" in fig[:fig.index("</figure>")]
