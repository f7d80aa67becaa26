"""What a parallel worker tells the collector, one typed record per kind. The worker and the
collector pass these; ``encode``/``decode`` turn them into one JSON line, tagged by ``type``, only
where they cross a process boundary (a gpus worker's stdout, a Ray task's yield)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ...errors import ResultsError
from ...schemas.launched import ProcessIdentity
from ...schemas.meta import ServerMeta
from ...schemas.phase import PhaseInfo
from ...schemas.record import Record
from ...schemas.request import RequestRecord
from ...schemas.slo_search import SloSearch


@dataclass(frozen=True)
class WorkerStarted:
    """The worker runs: where (meta.json ``parallel.configs``)."""

    config: str
    gpus: str | None
    port: int | None
    host: str
    node: str | None
    pid: int
    started_at: str


@dataclass(frozen=True)
class ServerLaunched:
    """The worker's server started (its identity, so --resume can stop it, and its start number in the run) or
    stopped (None)."""

    config: str
    identity: ProcessIdentity | None
    start: int | None = None


@dataclass(frozen=True)
class ServerReady:
    config: str
    info: ServerMeta


@dataclass(frozen=True)
class ChunkClock:
    config: str
    clock: str


@dataclass(frozen=True)
class PhaseMeasured:
    config: str
    info: PhaseInfo
    records: list[RequestRecord]


@dataclass(frozen=True)
class ProbesMeasured:
    config: str
    rate: float
    records: list[RequestRecord]


@dataclass(frozen=True)
class SearchDone:
    config: str
    dataset: str
    result: SloSearch


@dataclass(frozen=True)
class Restarting:
    config: str
    attempt: int


@dataclass(frozen=True)
class LogShipped:
    """A Ray worker's server log of one server start (its tail when ``truncated``)."""

    config: str
    text: str
    truncated: bool
    start: int = 0


@dataclass(frozen=True)
class StepLogShipped:
    """A piece of a Ray worker's step log (``shipping``): ``text`` (bytes as UTF-8, undecodable bytes kept as
    surrogate escapes) goes at byte ``offset`` of ``folder/file`` under the run's logs/steplog/, or replaces the
    file when ``offset`` is None; ``error``: why the folder could not be read on the node (nothing else set)."""

    config: str
    folder: str
    file: str = ""
    offset: int | None = None
    text: str = ""
    error: str | None = None


@dataclass(frozen=True)
class WorkerFinished:
    """The worker's last message: which configs failed and why, whether it was interrupted."""

    config: str
    finished_at: str
    failed: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    traceback: str | None = None


WorkerMessage = (WorkerStarted | ServerLaunched | ServerReady | ChunkClock | PhaseMeasured | ProbesMeasured
                 | SearchDone | Restarting | LogShipped | StepLogShipped | WorkerFinished)

Emit = Callable[[WorkerMessage], None]

KINDS: dict[str, type[WorkerMessage]] = {
    "start": WorkerStarted, "launched": ServerLaunched, "server": ServerReady, "chunk_clock": ChunkClock,
    "phase": PhaseMeasured, "probes": ProbesMeasured, "search": SearchDone, "restart": Restarting,
    "log": LogShipped, "steplog": StepLogShipped, "done": WorkerFinished}
TYPE_OF = {cls: kind for kind, cls in KINDS.items()}


def encode(msg: WorkerMessage) -> str:
    """The message as one JSON line (no newline), tagged by ``type``."""
    out: dict[str, Any] = {"type": TYPE_OF[type(msg)]}
    for f in fields(msg):
        value = getattr(msg, f.name)
        if isinstance(value, (PhaseInfo, Record)):
            value = value.to_dict()
        elif f.name == "records":
            value = [r.to_dict() for r in value]
        out[f.name] = value
    return json.dumps(out, default=str)


def decode(line: str | bytes) -> WorkerMessage:
    """The typed message of an encoded line; ValueError, one line naming the kind or key, when it is none."""
    try:
        d = json.loads(line)
    except (ValueError, RecursionError):
        raise ValueError(f"worker message: not JSON: {line!r:.60}") from None
    cls = KINDS.get(str(d.get("type"))) if isinstance(d, dict) else None
    if cls is None:
        raise ValueError(f"worker message: not a known type: {d!r:.60}")
    where = f"worker message {d['type']!r}"
    args = {f.name: d[f.name] for f in fields(cls) if f.name in d}
    try:
        if "info" in args:
            args["info"] = PhaseInfo.from_dict(args["info"]) if cls is PhaseMeasured else ServerMeta.from_dict(args["info"], where)
        if args.get("identity") is not None:
            args["identity"] = ProcessIdentity.from_dict(args["identity"], where)
        if "result" in args:
            args["result"] = SloSearch.from_dict(args["result"], where)
        if "records" in args:
            args["records"] = [RequestRecord.from_dict(r) for r in args["records"]]
        return cls(**args)
    except (TypeError, ResultsError) as err:
        raise ValueError(f"{where}: {err}") from None
