"""Accepted draft tokens per step: from the stream's decode chunks (the prefill chunk left out), per cell and per
category; from the step log's commit histogram where the cell ran with one; nothing for a plain config."""

from specbench.measure.accepted import SOURCE_CHUNKS, SOURCE_STEPLOG, accepted_per_step, from_steplog
from specbench.schemas.request import RequestRecord
from specbench.schemas.row_acceptance import AcceptedPerStep


def rec(tokens: list[int], category: str | None = None, error: str | None = None,
        source: str = "usage_continuous") -> RequestRecord:
    return RequestRecord(prompt_id="p", dataset="d", config="c", chunk_times=[0.1 * i for i in range(1, len(tokens) + 1)],
                         chunk_tokens=tokens, output_tokens=sum(tokens), category=category, error=error,
                         token_source=source)


def test_decode_chunks_give_steps_by_accepted_tokens_per_cell_and_category():
    records = [rec([1, 4, 1, 2], "math"), rec([3, 1, 1], "code"),  # a first chunk of 3 (prefill) never counts
               rec([1, 4], "math", error="cut"), rec([1, 2], source="usage_total_spread")]  # failed / spread: left out
    got = accepted_per_step(records, spec=True)
    assert got == AcceptedPerStep(accepted_per_step=[3, 1, 0, 1], accepted_per_step_source=SOURCE_CHUNKS,
                                  accepted_per_step_categories={"code": [2], "math": [1, 1, 0, 1]})


def test_a_plain_config_and_a_cell_without_chunk_counts_have_none():
    assert accepted_per_step([rec([1, 1, 1])], spec=False) == AcceptedPerStep()
    assert accepted_per_step([rec([1, 2], source="usage_total_spread")], spec=True) == AcceptedPerStep()


def test_the_step_logs_histogram_replaces_the_chunks_and_keeps_their_categories():
    hist = [0, 5, 2, 0, 3] + [0] * 12  # 5 steps committed 1 token (0 accepted), 2 committed 2, 3 committed 4
    got = from_steplog(hist, {"math": [1]})
    assert got == AcceptedPerStep(accepted_per_step=[5, 2, 0, 3], accepted_per_step_source=SOURCE_STEPLOG,
                                  accepted_per_step_categories={"math": [1]})
    assert from_steplog([4] + [0] * 16, None) is None and from_steplog(None, None) is None
