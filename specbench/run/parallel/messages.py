"""What a parallel worker tells the collector, one typed record per kind. The worker and the
collector pass these; ``encode``/``decode`` turn them into plain dicts only where they cross a
process boundary (a JSON line on a gpus worker's stdout, a Ray task's yield), tagged by ``type``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ...schemas.phase import PhaseInfo
from ...schemas.request import RequestRecord


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
    """The worker's server started (its identity, so --resume can stop it) or stopped (None)."""

    config: str
    identity: dict[str, Any] | None


@dataclass(frozen=True)
class ServerReady:
    config: str
    info: dict[str, Any]


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
    result: dict[str, Any]


@dataclass(frozen=True)
class Restarting:
    config: str
    attempt: int


@dataclass(frozen=True)
class LogShipped:
    """A Ray worker's server log (its tail when ``truncated``)."""

    config: str
    text: str
    truncated: bool


@dataclass(frozen=True)
class WorkerFinished:
    """The worker's last message: which configs failed and why, whether it was interrupted."""

    config: str
    finished_at: str
    failed: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    traceback: str | None = None


WorkerMessage = (WorkerStarted | ServerLaunched | ServerReady | ChunkClock | PhaseMeasured | ProbesMeasured
                 | SearchDone | Restarting | LogShipped | WorkerFinished)

KINDS: dict[str, type[WorkerMessage]] = {
    "start": WorkerStarted, "launched": ServerLaunched, "server": ServerReady, "chunk_clock": ChunkClock,
    "phase": PhaseMeasured, "probes": ProbesMeasured, "search": SearchDone, "restart": Restarting,
    "log": LogShipped, "done": WorkerFinished}
TYPE_OF = {cls: kind for kind, cls in KINDS.items()}


def encode(msg: WorkerMessage) -> dict[str, Any]:
    """The message as a plain dict tagged by ``type`` (JSON- and pickle-safe)."""
    out: dict[str, Any] = {"type": TYPE_OF[type(msg)]}
    for f in fields(msg):
        value = getattr(msg, f.name)
        if isinstance(value, PhaseInfo):
            value = value.to_dict()
        elif f.name == "records":
            value = [r.to_dict() for r in value]
        out[f.name] = value
    return out


def decode(d: dict[str, Any]) -> WorkerMessage:
    """The typed message of an encoded dict; ValueError, one line naming the kind or key, when it is none."""
    cls = KINDS.get(d.get("type")) if isinstance(d, dict) else None  # type: ignore[arg-type]  # any JSON value
    if cls is None:
        raise ValueError(f"worker message: not a known type: {d!r:.60}")
    args = {f.name: d[f.name] for f in fields(cls) if f.name in d}
    if "info" in args and cls is PhaseMeasured:
        args["info"] = PhaseInfo.from_dict(args["info"])
    if "records" in args:
        args["records"] = [RequestRecord.from_dict(r) for r in args["records"]]
    try:
        return cls(**args)
    except TypeError as err:
        raise ValueError(f"worker message {d['type']!r}: {err}") from None
