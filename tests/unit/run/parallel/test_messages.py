"""A parallel worker's messages: typed on both sides, a tagged dict only across the process boundary."""

import json
import typing

import pytest

from specbench.run.parallel.messages import (
    KINDS,
    ChunkClock,
    LogShipped,
    PhaseMeasured,
    ProbesMeasured,
    Restarting,
    SearchDone,
    ServerLaunched,
    ServerReady,
    WorkerFinished,
    WorkerMessage,
    WorkerStarted,
    decode,
    encode,
)
from specbench.schemas.acceptance import AcceptanceWindow
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord

RECORD = RequestRecord(prompt_id="p", dataset="d", config="spec", send_time=1.0, chunk_times=[1.5, 1.6],
                       chunk_tokens=[1, 3])
PHASE = PhaseInfo("spec", "d", 4, None, 1, 2.5, acceptance=AcceptanceWindow.from_dict({"spec_drafts": 3}))
EVERY_KIND = [
    WorkerStarted("spec", gpus="0,1", port=8001, host="h", node=None, pid=7, started_at="2026-12-02T08:00:00+00:00"),
    ServerLaunched("spec", {"pid": 9, "port": 8001}), ServerLaunched("spec", None),
    ServerReady("spec", {"engine": "vllm", "url": "http://127.0.0.1:8001"}),
    ChunkClock("spec", "kernel"),
    PhaseMeasured("spec", PHASE, [RECORD]),
    ProbesMeasured("spec", 4.0, [RECORD]),
    SearchDone("spec", "d", {"max_rate": 3.5}),
    Restarting("spec", 2),
    LogShipped("spec", "log text\n", truncated=True),
    WorkerFinished("spec", "2026-12-02T08:01:00+00:00", {"spec": "worker error: boom"}, True, "Traceback …"),
]


@pytest.mark.parametrize("msg", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_each_kind_crosses_a_json_line_and_comes_back_equal(msg: WorkerMessage) -> None:
    line = json.dumps(encode(msg))
    assert decode(json.loads(line)) == msg


def test_every_kind_has_one_tag():
    assert set(KINDS.values()) == set(typing.get_args(WorkerMessage))
    assert encode(Restarting("c", 1)) == {"type": "restart", "config": "c", "attempt": 1}
    assert encode(PhaseMeasured("spec", PHASE, [RECORD]))["info"] == PHASE.to_dict()


@pytest.mark.parametrize("bad", [{"type": "gossip", "config": "c"}, {"config": "c"}, ["phase"], {"type": "restart"}])
def test_what_is_not_a_message_is_one_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="worker message"):
        decode(bad)  # type: ignore[arg-type]
