"""One measured phase as phases.jsonl holds it: the cell, the repeat, its window's wall time and
what the server's counters, GPU meters and probes said over it (the requests are in requests.jsonl)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from .acceptance import AcceptanceWindow
from .cell import Cell
from .record import Record, key
from .request import RequestRecord
from .run_files import META, PHASES


@dataclass
class PhaseInfo(Record):
    """What one measured phase left behind besides its request records (a line of phases.jsonl)."""

    FILE: ClassVar[str] = f"{PHASES} line"
    KEEP_NONE: ClassVar[bool] = True

    config: str = key("the config (server) measured", required=True)
    dataset: str = key("the data set", required=True)
    concurrency: int = key("streams in flight (closed loop) or the in-flight cap (open loop; 0 = none)", required=True,
                           low=0)
    request_rate: float | None = key("open loop: the arrival rate per second; null: closed loop", required=True, low=0)
    repeat: int = key("the repeat of the cell, from 0", required=True, low=0)
    wall_s: float = key("the timed window's wall time, first send to last end", required=True, low=0)
    acceptance: AcceptanceWindow = key("the server's spec-decode counters over the window (two /metrics scrapes)",
                                       factory=AcceptanceWindow)
    server: dict[str, Any] = key("the server that measured it: engine, url, version", factory=dict)
    interrupted: bool = key("cut by a stop (Ctrl-C, SIGTERM): measured again on --resume", default=False)
    server_died: bool = key("cut by the server's death: measured again on --resume", default=False)
    requests: int | None = key("measured request records stored with it: --resume re-measures a phase that lost one",
                               low=0)
    telemetry: dict[str, Any] = key("GPU energy and samples over the window (measure/telemetry.py)", factory=dict)
    generation: dict[str, Any] = key("the server's generated-token counter over the window (measure/keepup.py)",
                                     factory=dict)
    server_start: int | None = key("which start of the config's server measured it (run/servers.py); absent: a "
                                   "server given by URL", low=0, omit_none=True)
    scraped_before: float | None = key("Unix time of the window's first /metrics scrape (the step log is cut by it)")
    scraped_after: float | None = key("Unix time of the window's last /metrics scrape")
    steplog: str | None = key("the server launch's step-log folder, relative to the run directory (docs/steplog.md)")
    warmup_one_time: list[int] | None = key("load.warmup steady: the one-time events (compile, capture, autotune, "
                                            "allocator growth) the step log saw in each warm-up pass; the last is 0 when "
                                            "the warm-up reached the steady state before its cap", low=0, omit_none=True)
    prefix_cache: dict[str, Any] | None = key("the engine's prefix-cache counters over the window, in tokens: queries "
                                              "and hits, or why they cannot be trusted (measure/engine_counters.py)",
                                              omit_none=True)
    prefix_cache_reset: bool | None = key("load.prefix_cache reset: the server confirmed its prefix cache emptied after "
                                          "this pass's warm-up, right before its timed window (run/prefix_reset.py); "
                                          "absent: the cache was kept", omit_none=True)

    @property
    def complete(self) -> bool:
        """Counts as done for --resume and restarts: not cut by a stop or by the server's death."""
        return not (self.interrupted or self.server_died)

    @property
    def cell(self) -> Cell:
        return Cell.of_phase(self)


@dataclass
class SupersededPhase(PhaseInfo):
    """A phase ``--resume`` set aside to measure again (meta.json ``superseded_phases``): the line as
    phases.jsonl held it, and why where the reason is not plain (cut by a stop or a dead server)."""

    FILE: ClassVar[str] = f"{META} superseded_phases entry"

    superseded_because: str | None = key("why a complete phase is measured again (it lost request records)",
                                         omit_none=True)

    @classmethod
    def of(cls, phase: PhaseInfo, because: str | None = None) -> SupersededPhase:
        out = cls.from_dict(phase.to_dict(), "superseded phase")
        out.superseded_because = because
        return out


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
