"""One measured phase as phases.jsonl holds it: the cell, the repeat, its window's wall time and
what the server's counters, GPU meters and probes said over it (the requests are in requests.jsonl)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .acceptance import AcceptanceWindow
from .cell import Cell
from .request import RequestRecord


@dataclass
class PhaseInfo:
    """What one measured phase left behind besides its request records (stored in phases.jsonl)."""

    config: str
    dataset: str
    concurrency: int
    request_rate: float | None
    repeat: int
    wall_s: float
    acceptance: AcceptanceWindow = field(default_factory=AcceptanceWindow)
    server: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    server_died: bool = False
    requests: int | None = None  # measured records stored with it: --resume re-measures a phase that lost one
    telemetry: dict[str, Any] = field(default_factory=dict)  # GPU energy and samples (telemetry.py)
    generation: dict[str, Any] = field(default_factory=dict)  # the server's generated-token counter over the window (keepup.py)
    server_start: int | None = None  # which start of the config's server measured it (run/servers.py); null: given by URL
    #: the window's two /metrics scrapes (Unix time, taken with the server idle): the step log is cut by them
    scraped_before: float | None = None
    scraped_after: float | None = None
    steplog: str | None = None  # the server launch's step-log folder, relative to the run dir (docs/steplog.md)

    @property
    def complete(self) -> bool:
        """Counts as done for --resume and restarts: not cut by a stop or by the server's death."""
        return not (self.interrupted or self.server_died)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["acceptance"] = self.acceptance.to_dict()
        if out["server_start"] is None:  # a server given by URL: phases.jsonl as before server starts were counted
            del out["server_start"]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PhaseInfo:
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if "acceptance" in fields:  # not an object (a hand-edited line): nothing measured
            a = fields["acceptance"]
            fields["acceptance"] = AcceptanceWindow.from_dict(a) if isinstance(a, dict) else AcceptanceWindow()
        return cls(**fields)

    @property
    def cell(self) -> Cell:
        return Cell.of_phase(self)


def by_cell(phases: Sequence[PhaseInfo], records: Sequence[RequestRecord]) -> tuple[dict[Cell, list[RequestRecord]],
                                                                                  dict[Cell, list[PhaseInfo]]]:
    """The measured records and the phases of each cell (warm-up records are never counted)."""
    measured: dict[Cell, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.phase == "measure":
            measured[Cell.of_record(r)].append(r)
    cell_phases: dict[Cell, list[PhaseInfo]] = defaultdict(list)
    for p in phases:
        cell_phases[p.cell].append(p)
    return measured, cell_phases
