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
    StepLogShipped,
    WorkerFinished,
    WorkerMessage,
    WorkerStarted,
    decode,
    encode,
)
from specbench.schemas.acceptance import AcceptanceWindow
from specbench.schemas.launched import ProcessIdentity
from specbench.schemas.meta import ServerMeta
from specbench.schemas.phase import PhaseInfo
from specbench.schemas.request import RequestRecord
from specbench.schemas.slo_search import SloProbe, SloSearch

RECORD = RequestRecord(prompt_id="p", dataset="d", config="spec", send_time=1.0, chunk_times=[1.5, 1.6],
                       chunk_tokens=[1, 3])
PHASE = PhaseInfo("spec", "d", 4, None, 1, 2.5, acceptance=AcceptanceWindow.from_dict({"spec_drafts": 3}))
EVERY_KIND = [
    WorkerStarted("spec", gpus="0,1", port=8001, host="h", node=None, pid=7, started_at="2026-12-02T08:00:00+00:00"),
    ServerLaunched("spec", ProcessIdentity.from_dict({"pid": 9, "start_ticks": None, "port": 8001})),
    ServerLaunched("spec", None),
    ServerReady("spec", ServerMeta.from_dict({"engine": "vllm", "url": "http://127.0.0.1:8001", "version": None})),
    ChunkClock("spec", "kernel"),
    PhaseMeasured("spec", PHASE, [RECORD]),
    ProbesMeasured("spec", 4.0, [RECORD]),
    SearchDone("spec", "d", SloSearch(99.0, 3.5, [3.5, None], 1, False, False,
                                      [SloProbe.from_dict({"rate": 3.5, "ok": True, "p99_ms": {"ttft_ms": 80.0}})])),
    Restarting("spec", 2),
    LogShipped("spec", "log text\n", truncated=True),
    LogShipped("spec", "a restart's log\n", truncated=False, start=2),
    ServerLaunched("spec", ProcessIdentity.from_dict({"pid": 9, "start_ticks": None, "port": 8001}), start=3),
    StepLogShipped("spec", "spec-s3", "sched-11.jsonl", 4096, '{"step": 1, "x": "\udcff"}\n'),  # a byte no UTF-8
    StepLogShipped("spec", "spec-s3", "header-11.json", None, "{}"),
    StepLogShipped("spec", "spec-s3", error="Permission denied"),
    WorkerFinished("spec", "2026-12-02T08:01:00+00:00", {"spec": "worker error: boom"}, True, "Traceback …"),
]


@pytest.mark.parametrize("msg", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_each_kind_crosses_a_json_line_and_comes_back_equal(msg: WorkerMessage) -> None:
    line = encode(msg)
    assert "\n" not in line
    back = decode(line.encode())
    assert back == msg
    assert encode(back) == line  # the same bytes: records keep their keys' order and nulls


def test_every_kind_has_one_tag():
    assert set(KINDS.values()) == set(typing.get_args(WorkerMessage))
    assert json.loads(encode(Restarting("c", 1))) == {"type": "restart", "config": "c", "attempt": 1}
    assert json.loads(encode(PhaseMeasured("spec", PHASE, [RECORD])))["info"] == PHASE.to_dict()


@pytest.mark.parametrize("bad", [{"type": "gossip", "config": "c"}, {"config": "c"}, ["phase"], {"type": "restart"},
                                 {"type": "search", "config": "c", "dataset": "d", "result": {"steps": "many"}}])
def test_what_is_not_a_message_is_one_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="worker message") as err:
        decode(json.dumps(bad))
    assert len(str(err.value).splitlines()) == 1


def test_a_line_that_is_not_json_is_one_value_error() -> None:
    with pytest.raises(ValueError, match="worker message: not JSON"):
        decode("{half")
