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
older specbench refuses it in one line where it would act on it (``--resume``, the gate), while its
report reads it with what it knows and says which keys it ignored (``run.readback.Newer``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..util.jsonio import write_json
from .accelerator import Accelerator
from .cell import find_baseline, unique
from .launched import StoppedLeftover
from .notes import Note, NoteCode, Notes
from .phase import SupersededPhase
from .placement import Placement
from .plans import ScheduleCheck, TunePlan, WhatifPlan
from .record import Record, key
from .row import ResultRow
from .run_files import META
from .slo_search import SloSearch


@dataclass
class SuiteRaw(Record):
    """The suite file as written, secrets masked (its shape is ``suite.parse``'s): typed are only the
    keys the report, the gate and the profile read; every other key is kept as it is."""

    OPEN: ClassVar[bool] = True

    name: str | None = None
    model: str | None = None
    description: str | None = None
    configs: list[dict[str, Any]] | None = None
    datasets: list[Any] | None = None
    load: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    gate: Any = None

    def config(self, name: str | None) -> Mapping[str, object]:
        """The raw config named ``name`` as the suite file had it ({} when there is none): read, never trusted."""
        return next((c for c in self.configs or [] if c.get("name") == name), {})


@dataclass
class SuiteInfo(Record):
    name: str | None = key("the suite's name")
    path: str | None = key('the suite file it was read from')
    raw: SuiteRaw | None = key('the suite as written, secrets masked')


@dataclass
class GitState(Record):
    commit: str | None = key('the commit checked out')
    dirty: bool | None = key('uncommitted changes anywhere in the checkout')
    tracked: bool | None = key('the suite file is tracked by git')


@dataclass
class SuiteFile(Record):
    """``run.provenance``: the suite file's sha256 and the git commit it was run at (null outside git)."""

    sha256: str | None = key("the suite file's sha256")
    git: GitState | None = key('the git state it was run at (null outside git)')


@dataclass
class Comparability(Record):
    """``Suite.comparability()``: what must match between two runs; compared as a whole
    (``to_dict``), so a key added there needs no change here."""

    OPEN: ClassVar[bool] = True

    suite: str | None = key("the suite's name")
    model: str | None = key("the served model's name")
    endpoint: str | None = key('chat or completions')
    max_tokens: int | None = key('load.max_tokens')
    temperature: float | None = key('load.temperature')
    top_p: float | None = key('load.top_p')
    ignore_eos: bool | None = key('load.ignore_eos')
    warmup: int | str | None = key('load.warmup')
    extra_body: dict[str, Any] | None = key('load.extra_body, secrets masked')
    engine: str | None = key("the suite's engine")
    model_path: str | None = key('server.model_path')
    load_format: str | None = key('server.load_format, only when not auto (dummy: random weights)')
    prefix_cache: str | None = key('load.prefix_cache, only when reset (the prefix cache emptied before each timed pass)')
    datasets: dict[str, str] | None = key('per data set: a hash of its entry in the suite')
    configs: dict[str, str] | None = key('per config: a hash of its entry, secrets masked')


@dataclass
class PromptSet(Record):
    """One data set's prompts as the run loaded them (``run.prompt_prints``): what the comparability
    fingerprint (the suite entry) cannot see, so that ``--resume`` never pairs different prompts."""

    sha256: str | None = key('sha256 over what is sent, prompt by prompt')
    prompts: int | None = key('prompts loaded')
    source: str | None = key('the file or source they came from')


@dataclass
class Host(Record):
    platform: str | None = key("the client machine's platform")
    python: str | None = key('its Python version')
    cpus: int | None = key('its CPU count')


@dataclass
class SteplogPlugin(Record):
    """The plugin folder that made the step recorder loadable by the server (``hooks.plugin_site``): built once per
    specbench version in its cache, not copied into the run."""

    path: str | None = key('the folder put first on the server\'s PYTHONPATH (CACHE/plugin/<sha256[:16]>, or a temporary one)')
    sha256: str | None = key("sha256 over its files in path order, each as path, size and bytes (hooks.site.tree_sha256)")


@dataclass
class ServerMeta(Record):
    """One config's server as the run saw it ready (``run.servers``): a URL, or a launched process."""

    engine: str | None = key("the launcher (vllm, sglang, vllm-cpu) or the URL server's engine")
    url: str | None = key('where it was reached')
    launched: bool | None = key('started by specbench (false: given by URL)')
    argv: list[str] | None = key('the command line, secrets masked')
    env: dict[str, str] | None = key('the environment set for it, secrets masked')
    ready_s: float | None = key('seconds from launch to ready')
    log: str | None = key('its log file, relative to the run directory')
    pid: int | None = key('its process id')
    version: str | None = key("the engine's version, as the server said")
    version_error: str | None = key('why the version could not be read')
    start: int | None = key("which launch of the config's server (run/servers.py server_log_name)")
    accelerator: Accelerator | None = key('what it ran on: GPU model, count, memory, driver (absent: a run from before '
                                          'it was recorded; the export then labels it cpu)')
    steplog: str | None = key("its step-log folder, relative to the run directory (docs/steplog.md)")
    steplog_level: str | None = key("the step log's level: steps, timing or tokens")
    steplog_plugin: SteplogPlugin | None = key('the plugin folder that loaded the step recorder, and its sha256')


@dataclass
class RunStart(Record):
    """One ``specbench run`` into the directory (a fresh start, then each ``--resume``)."""

    started_at: str | None = key('when this run started (UTC)')
    resume: bool | None = key('a --resume')
    overwrite: bool | None = key('an --overwrite')
    stopped_leftovers: list[StoppedLeftover] | None = key('servers an earlier, killed run left running, stopped before measuring')
    parallel: str | None = key('--parallel gpus or --ray, where used')


@dataclass
class Timing(Record):
    """Where the run's time went (``run.sequential.run_timing``; a parallel run's configs overlap)."""

    servers_s: float | None = key('seconds spent starting and stopping servers')
    warmup_s: float | None = key('seconds of warm-up passes')
    measured_s: float | None = key('seconds of timed passes')
    total_s: float | None = key("the run's wall time")
    harness_s: float | None = key("what is left: specbench's own time")
    harness_share: float | None = key('harness_s ÷ total_s')
    parallel: bool | None = key('configs ran side by side (their times overlap)')


@dataclass
class RunMeta(Record):
    """meta.json: one field per top-level key (see the module's docstring for versions)."""

    FILE: ClassVar[str] = META

    specbench_version: str | None = key('the specbench that wrote the file')
    suite: SuiteInfo | None = key('the suite: name, path, the file as written')
    suite_file: SuiteFile | None = key("the suite file's hash and git state")
    comparability: Comparability | None = key('what must match between two runs to compare them')
    prompts: dict[str, PromptSet] | None = key("per data set: the prompts' hash, count and source (--resume refuses changed prompts)")
    weights: str | None = key('"dummy": served with random weights (suite load_format: dummy)')
    dummy_weight_configs: list[str] | None = key('configs served with random weights')
    started_at: str | None = key('when the first run into the directory started (UTC)')
    host: Host | None = key('the client machine')
    servers: dict[str, ServerMeta] | None = key('per config: its latest server as the run saw it ready')
    failed_configs: dict[str, str] | None = key('per config: why it failed')
    runs: list[RunStart] | None = key('each specbench run into the directory: the start, then each --resume')
    superseded_phases: list[SupersededPhase] | None = key('phases set aside to measure again, as phases.jsonl held them')
    run_dir_notes: Notes | None = key('what --resume repaired in the run directory, and what it lacks (a step log a Ray '
                                      'node could not send back): notes, or sentences an earlier specbench stored')
    restarts: dict[str, int] | None = key('per config: restarts after its server died')
    chunk_clock: dict[str, str] | None = key('per config: which clock stamped its chunks')
    slo_search: dict[str, dict[str, SloSearch]] | None = key('per config and data set: the SLO capacity search')
    parallel: Placement | None = key('where each config ran (--parallel gpus, --ray)')
    whatif: WhatifPlan | None = key("a whatif run's plan")
    tune: TunePlan | None = key("a tune run's plan and result")
    schedule: ScheduleCheck | None = key("a tune --verify run's plan")
    updated_at: str | None = key('when the file was last written (UTC)')
    notes: Notes | None = key('what the report says under the tables about the whole run: notes (a code and its values, '
                              'worded by the report), or the sentences an earlier specbench stored')
    finished_at: str | None = key('when the run finished (UTC)')
    timing: Timing | None = key("where the run's time went")
    merged_from: list[str] | None = key('the runs a merged report was made of')
    server_launches: dict[str, int] | None = key("launches per config so far: the next start's index")
    server_starts: dict[str, list[ServerMeta]] | None = key('every ready start per config (servers: the latest)')

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

    def set_aside(self, cut: list[SupersededPhase], notes: Sequence[Note]) -> None:
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

    def start_taken(self, name: str, start: int) -> None:
        """Config ``name``'s server start ``start`` was launched elsewhere (a parallel worker): counted, so the
        next start is numbered after it."""
        launches = self.grown("server_launches", {})
        launches[name] = max(launches.get(name, 0), start + 1)

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

    def failed_notes(self) -> list[Note]:
        """One note under the table per failed config: its error's first line."""
        return [Note.of(NoteCode.CONFIG_FAILED, config=name, error=(str(err).splitlines() or ['?'])[0])
                for name, err in (self.failed_configs or {}).items()]


def baseline_name(rows: Sequence[ResultRow], meta: RunMeta | None) -> str | None:
    """A run's baseline: the config its suite (meta.json) marked ``baseline: true``, else the one named "baseline",
    else a row's of method baseline (results without a meta.json)."""
    marked = [c["name"] for c in (meta.raw.configs if meta else None) or [] if c.get("baseline")
              and isinstance(c.get("name"), str)]
    found = find_baseline(unique(r.run for r in rows), marked)
    return found or next((r.run for r in rows if r.method == "baseline"), None)
