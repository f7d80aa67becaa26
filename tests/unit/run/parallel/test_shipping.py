"""A Ray worker's step log copied back into the run directory, piece by piece (issue 38 item 8): whole lines
while the server writes, every byte once it stopped; what cannot be copied is said, never guessed."""

import json
import types
from pathlib import Path

import pytest

from specbench.report.notes import sentence
from specbench.run.parallel.collector import Collector
from specbench.run.parallel.messages import StepLogShipped, decode, encode
from specbench.run.parallel.shipping import StepLogShipper, store_piece
from specbench.schemas.meta import RunMeta


def shipped_into(run_logs: Path):
    """An emit that sends each message across the process boundary and stores it as the collector does."""
    sent = []

    def emit(msg):
        back = decode(encode(msg))
        sent.append(back)
        assert store_piece(run_logs, back) is None

    return emit, sent


def test_pieces_come_back_whole_lines_first_then_every_byte(tmp_path):
    node, run = tmp_path / "node", tmp_path / "run" / "logs"
    folder = node / "steplog" / "spec-s1"
    folder.mkdir(parents=True)
    (folder / "header-7.json").write_text('{"schema": "specbench.steplog/1"}')
    sched = folder / "sched-7.jsonl"
    sched.write_bytes(b'{"step": 1}\n{"step": 2, "x": "\xff\xfe"}\n{"step": 3')  # a byte no UTF-8, a line half written
    emit, sent = shipped_into(run)
    shipper = StepLogShipper("spec", node, emit)
    assert shipper.ship("spec-s1")
    copy = run / "steplog" / "spec-s1"
    assert (copy / "sched-7.jsonl").read_bytes() == b'{"step": 1}\n{"step": 2, "x": "\xff\xfe"}\n'  # whole lines only
    assert (copy / "header-7.json").read_text() == '{"schema": "specbench.steplog/1"}'
    with sched.open("ab") as f:
        f.write(b'}\n{"step": 4}\n')
    n = len(sent)
    assert shipper.ship("spec-s1") and len(sent) == n + 1  # only what was new; the header did not change
    assert (copy / "sched-7.jsonl").read_bytes() == sched.read_bytes()
    with sched.open("ab") as f:
        f.write(b'{"step": 5, "torn')  # the server was killed mid-line: the copy is the node's, byte for byte
    shipper.finish(["spec-s1"])
    assert (copy / "sched-7.jsonl").read_bytes() == b'{"step": 1}\n{"step": 2, "x": "\xff\xfe"}\n{"step": 3}\n{"step": 4}\n{"step": 5, "torn'
    assert not folder.exists()  # copied: removed from the node
    assert all(m.folder == "spec-s1" for m in sent)


def test_a_folder_never_written_is_nothing_to_ship(tmp_path):
    emit, sent = shipped_into(tmp_path / "run")
    assert StepLogShipper("spec", tmp_path / "node", emit).ship("spec-s0") and sent == []


def test_an_unreadable_folder_is_said_and_kept_on_the_node(tmp_path, monkeypatch):
    folder = tmp_path / "node" / "steplog" / "spec-s0"
    folder.mkdir(parents=True)
    sent = []

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied)
    shipper = StepLogShipper("spec", tmp_path / "node", sent.append)
    shipper.finish(["spec-s0"])
    assert sent == [StepLogShipped("spec", "spec-s0", error=f"Permission denied ({folder})")]
    assert folder.exists()


@pytest.mark.parametrize("msg, why", [
    (StepLogShipped("spec", "other-s0", "sched-1.jsonl", 0, "x"), "no launch file of config 'spec'"),
    (StepLogShipped("spec", "spec-s0", "../../meta.json", None, "{}"), "no launch file"),
    (StepLogShipped("spec", "spec-s0", ".hidden", 0, "x"), "no launch file"),
    (StepLogShipped("spec", "spec-s0", "sched-1.jsonl", -1, "x"), "at offset -1"),
    (StepLogShipped("spec", "spec-s0", "sched-1.jsonl", 10, "x"), "a piece at byte 10 of a copy 0 bytes long"),
])
def test_a_piece_that_cannot_go_where_it_says_is_refused_in_one_line(tmp_path, msg, why):
    said = store_piece(tmp_path, msg)
    assert why in said and "\n" not in said
    assert not (tmp_path.parent / "meta.json").exists()


def test_the_collector_says_under_the_tables_which_step_log_stayed_on_the_node(tmp_path):
    meta, saved, told = RunMeta(), [], []
    session = types.SimpleNamespace(meta=meta, logs=tmp_path / "logs", path=tmp_path, save_meta=lambda: saved.append(1),
                                    progress=lambda event, **k: told.append(k["message"]))
    collector = Collector(session, "ray")
    collector.placement("spec").host, collector.placement("spec").steplog_on_node = "node-a", "/tmp/x/steplog/spec-s0"
    for _ in range(2):  # said once per folder
        collector.handle(StepLogShipped("spec", "spec-s0", error="Permission denied (/tmp/x/steplog/spec-s0)"))
    note = ("⚠ step log logs/steplog/spec-s0 of config spec was not copied back from Ray node node-a: Permission denied "
            "(/tmp/x/steplog/spec-s0); it stays there: /tmp/x/steplog/spec-s0")
    assert [sentence(n) for n in meta.run_dir_notes] == [note] and [sentence(n) for n in told] == [note] and saved == [1]
    collector.handle(StepLogShipped("spec", "spec-s1", "sched-1.jsonl", 0, '{"step": 1}\n'))
    assert json.loads((tmp_path / "logs" / "steplog" / "spec-s1" / "sched-1.jsonl").read_text()) == {"step": 1}
