"""meta.json as a typed, versioned record: ``RunMeta`` (one field per top-level key) and the small
records whose shape is fixed and read (the suite block, the suite file's provenance, the
comparability fingerprint, the host, a server, a run entry, the timing).

Every key is typed: the parts whose shape is fixed here, and the parts other modules own as their
own records — the derived suites' plans ``whatif``/``tune``/``schedule`` (``schemas.plans``),
``superseded_phases`` (``schemas.phase.SupersededPhase``), ``parallel`` (``schemas.placement``),
``slo_search`` (``schemas.slo_search``) and ``runs[].stopped_leftovers`` (``schemas.launched``). Only
the suite as written (``SuiteRaw``) keeps its blocks as the YAML had them: ``suite.parse`` owns
their shape and the file is echoed, not read back.

Versions (``Record.VERSION``, docs/records.md). Version 1 is every meta.json written so far; the
record adds no key of its own, so a file's bytes stay what the run wrote. Every field is optional:
a file from before a key existed (``suite_file``, ``weights``, ``restarts`` …) reads as that key
absent, and a key a newer version adds is kept in ``unknown`` and written back unchanged. A version
that changes a key's meaning bumps ``VERSION``: the file then carries ``schema_version`` first and an
older specbench refuses it in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..util.jsonio import read_json, write_json
from .launched import StoppedLeftover
from .phase import SupersededPhase
from .placement import Placement
from .plans import ScheduleCheck, TunePlan, WhatifPlan
from .record import Record
from .run_files import META
from .slo_search import SloSearch


@dataclass
class SuiteRaw(Record):
    """The suite file as written, secrets masked (its shape is ``suite.parse``'s): typed are only the
    keys the report, the gate and the profile read; every other key is kept as it is."""

    name: str | None = None
    model: str | None = None
    description: str | None = None
    configs: list[dict[str, Any]] | None = None
    datasets: list[Any] | None = None
    load: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    gate: Any = None

    def config(self, name: str | None) -> dict[str, Any]:
        """The raw config named ``name`` ({} when there is none)."""
        return next((c for c in self.configs or [] if c.get("name") == name), {})


@dataclass
class SuiteInfo(Record):
    name: str | None = None
    path: str | None = None
    raw: SuiteRaw | None = None


@dataclass
class GitState(Record):
    commit: str | None = None
    dirty: bool | None = None
    tracked: bool | None = None


@dataclass
class SuiteFile(Record):
    """``run.provenance``: the suite file's sha256 and the git commit it was run at (null outside git)."""

    sha256: str | None = None
    git: GitState | None = None


@dataclass
class Comparability(Record):
    """``Suite.comparability()``: what must match between two runs; compared as a whole
    (``to_dict``), so a key added there needs no change here."""

    suite: str | None = None
    model: str | None = None
    endpoint: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    ignore_eos: bool | None = None
    warmup: int | str | None = None
    extra_body: dict[str, Any] | None = None
    engine: str | None = None
    model_path: str | None = None
    load_format: str | None = None
    datasets: dict[str, str] | None = None
    configs: dict[str, str] | None = None


@dataclass
class PromptSet(Record):
    """One data set's prompts as the run loaded them (``run.prompt_prints``): what the comparability
    fingerprint (the suite entry) cannot see, so that ``--resume`` never pairs different prompts."""

    sha256: str | None = None
    prompts: int | None = None
    source: str | None = None


@dataclass
class Host(Record):
    platform: str | None = None
    python: str | None = None
    cpus: int | None = None


@dataclass
class ServerMeta(Record):
    """One config's server as the run saw it ready (``run.servers``): a URL, or a launched process."""

    engine: str | None = None
    url: str | None = None
    launched: bool | None = None
    argv: list[str] | None = None
    env: dict[str, str] | None = None
    ready_s: float | None = None
    log: str | None = None
    pid: int | None = None
    version: str | None = None
    version_error: str | None = None
    start: int | None = None  # which launch of the config's server (run/servers.py server_log_name)


@dataclass
class RunStart(Record):
    """One ``specbench run`` into the directory (a fresh start, then each ``--resume``)."""

    started_at: str | None = None
    resume: bool | None = None
    overwrite: bool | None = None
    stopped_leftovers: list[StoppedLeftover] | None = None
    parallel: str | None = None


@dataclass
class Timing(Record):
    """Where the run's time went (``run.sequential.run_timing``; a parallel run's configs overlap)."""

    servers_s: float | None = None
    warmup_s: float | None = None
    measured_s: float | None = None
    total_s: float | None = None
    harness_s: float | None = None
    harness_share: float | None = None
    parallel: bool | None = None


@dataclass
class RunMeta(Record):
    """meta.json: one field per top-level key (see the module's docstring for versions)."""

    FILE: ClassVar[str] = META

    specbench_version: str | None = None
    suite: SuiteInfo | None = None
    suite_file: SuiteFile | None = None
    comparability: Comparability | None = None
    prompts: dict[str, PromptSet] | None = None
    weights: str | None = None
    dummy_weight_configs: list[str] | None = None
    started_at: str | None = None
    host: Host | None = None
    servers: dict[str, ServerMeta] | None = None
    failed_configs: dict[str, str] | None = None
    runs: list[RunStart] | None = None
    superseded_phases: list[SupersededPhase] | None = None
    run_dir_notes: list[str] | None = None
    restarts: dict[str, int] | None = None
    chunk_clock: dict[str, str] | None = None
    slo_search: dict[str, dict[str, SloSearch]] | None = None
    parallel: Placement | None = None
    whatif: WhatifPlan | None = None
    tune: TunePlan | None = None
    schedule: ScheduleCheck | None = None
    updated_at: str | None = None
    notes: list[str] | None = None
    finished_at: str | None = None
    timing: Timing | None = None
    merged_from: list[str] | None = None
    server_launches: dict[str, int] | None = None  # launches per config so far: the next start's index
    server_starts: dict[str, list[ServerMeta]] | None = None  # every ready start per config (``servers``: the latest)

    @classmethod
    def load(cls, path: Path, problems: list[str] | None = None) -> RunMeta:
        """A meta.json file; strict unless ``problems`` collects the values dropped (see ``Record``)."""
        return cls.from_dict(read_json(Path(path)), path, problems)

    def save(self, path: Path) -> None:
        write_json(Path(path), self.to_dict())

    # ---- what the report reads ----
    @property
    def raw(self) -> SuiteRaw:
        """The suite as written (empty when meta.json has none)."""
        return (self.suite.raw if self.suite else None) or SuiteRaw()

    @property
    def suite_name(self) -> str | None:
        return self.suite.name if self.suite else None

    # ---- what a run records, in the order it happens (``run.session``) ----
    def start_run(self, started_at: str, *, resume: bool, overwrite: bool, stopped_leftovers: list[StoppedLeftover]) -> None:
        """One more entry in ``runs`` (the servers it stopped, where an earlier, killed run left them)."""
        self.grown("runs", []).append(RunStart(started_at, resume, overwrite, list(stopped_leftovers) or None))

    def set_aside(self, cut: list[SupersededPhase], notes: list[str]) -> None:
        """Phases to measure again (``superseded_phases``) and what the run dir's repair said."""
        if cut:
            self.grown("superseded_phases", []).extend(cut)
        for note in notes:
            self.grown("run_dir_notes", []).append(note)

    def server_ready(self, name: str, server: ServerMeta) -> None:
        self.grown("servers", {})[name] = server
        if server.start is not None:
            self.grown("server_starts", {}).setdefault(name, []).append(server)

    def next_start(self, name: str) -> int:
        """The index of config ``name``'s next server launch, counted."""
        launches = self.grown("server_launches", {})
        launches[name] = launches.get(name, 0) + 1
        return int(launches[name] - 1)

    def set_chunk_clock(self, name: str, clock: str) -> None:
        self.grown("chunk_clock", {})[name] = clock

    def store_search(self, name: str, dataset: str, result: SloSearch) -> None:
        self.grown("slo_search", {}).setdefault(name, {})[dataset] = result

    def searched(self, config: str) -> set[str]:
        """The data sets of ``config`` whose SLO search is done."""
        return set((self.slo_search or {}).get(config, {}))

    def config_failed(self, name: str, error: str) -> None:
        self.grown("failed_configs", {})[name] = error

    def config_restarting(self, name: str, attempt: int) -> None:
        self.grown("restarts", {})[name] = attempt

    def config_succeeded(self, name: str) -> None:
        """A config that completed every cell this time is no longer failed (from an earlier run)."""
        self.grown("failed_configs", {}).pop(name, None)

    def failed_notes(self) -> list[str]:
        """One line under the table per failed config: its error's first line."""
        return [f"⚠ config {name} failed: {(str(err).splitlines() or ['?'])[0]}"
                for name, err in (self.failed_configs or {}).items()]
