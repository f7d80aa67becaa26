"""What the phase loop reports to: the run directory (a sequential run, or the parallel collector
behind a worker's messages). The loop never touches files itself."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..schemas.cell import Cell
from ..schemas.meta import ServerMeta, Timing
from ..schemas.phase import PhaseInfo
from ..schemas.request import Prompt, RequestRecord
from ..schemas.row import ResultRow
from ..schemas.slo_search import SloSearch
from .servers import ServerBook


class Recorder(ServerBook, Protocol):
    path: Path  # where the run's files are

    def prepare(self) -> None:
        """Checks before anything is loaded or launched."""

    def begin(self, prompts: dict[str, list[Prompt]]) -> None:
        """Open for writing; ``prompts`` as loaded (a resumed run checks them against its own)."""

    def done(self) -> set[tuple[Cell, int]]:
        """(cell, repeat) of every phase measured completely, which a resumed or restarted config skips."""
        ...

    def searched(self, config: str) -> set[str]:
        """Data sets whose rate search for ``config`` is done."""
        ...

    def server_ready(self, name: str, server: ServerMeta) -> None: ...

    def chunk_clock(self, name: str, clock: str) -> None: ...

    def store_phase(self, info: PhaseInfo, records: list[RequestRecord]) -> None: ...

    def rows(self) -> list[ResultRow]:
        """The rows as last written (what adaptive repeats plan from); empty where none are built here."""
        ...

    def store_probes(self, records: list[RequestRecord], rate: float) -> None: ...

    def store_search(self, name: str, dataset: str, result: SloSearch) -> None: ...

    def config_failed(self, name: str, error: str) -> None: ...

    def config_restarting(self, name: str, attempt: int) -> None: ...

    def config_succeeded(self, name: str) -> None: ...

    def finish(self, timing: Timing) -> list[ResultRow]:
        """The timing into meta.json; the rows as finally written."""
        ...

    def close(self) -> None:
        """Let go of the run dir (its lock), after ``finish`` or when ``prepare`` or ``begin`` failed."""
