"""Orchestration: for each config, launch (or reach) its server; for each data set and load point,
warm up, snapshot /metrics, drive, snapshot again → a cell; write results after every cell.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import os
import platform
import signal
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from . import __version__
from .cell import Cell, LoadPoint
from .client import RequestSpec, close_transport, open_transport, transport_clock
from .datasets import check_available, load_prompts
from .drive import Phase, drive, drive_processes
from .errors import LaunchError, ServerError, SuiteError
from .grade import grade_phase
from .launch import Engine, ServerProcess, load_engine, reap_all
from .launch.process import free_port, port_in_use, served_models, stop_leftover
from .measure import PhaseInfo, ResultRow, add_comparisons, summarize_cell
from .provenance import suite_file_provenance
from .quality import add_quality, suite_notes
from .records import Prompt, RequestRecord
from .report.markdown import markdown
from .scrape import PROBE_LIMIT, read_capped, scrape
from .secrets import redact_env, redact_mapping, redact_url
from .slo import PROBE_PHASE, PROBES_FILE, attach_capacity, search_server
from .store import RunDir
from .suite import ServerConfig, Suite
from .telemetry import PhaseMeter


def load_points(suite: Suite) -> list[LoadPoint]:
    if suite.load.request_rate:
        cap = suite.load.concurrency[0] if suite.raw.get("load", {}).get("concurrency") else 0
        return [LoadPoint(cap, r) for r in suite.load.request_rate]
    return [LoadPoint(c) for c in suite.load.concurrency]


@dataclass
class Server:
    """A reachable server for one config: launched by us or given as a URL."""

    config: ServerConfig
    url: str
    engine: Engine
    process: ServerProcess | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunOutcome:
    path: Path
    rows: list[ResultRow]
    failed_configs: dict[str, str]
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failed_configs or any(r.status != "ok" for r in self.rows) else 0


Progress = Callable[..., None]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def default_output(suite: Suite, root: Path = Path("results")) -> Path:
    return root / f"{suite.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def preflight(suite: Suite) -> dict[str, list[Prompt]]:
    """Everything that can fail before a server starts: engines, engine binaries, prompt sets."""
    for config in suite.configs:
        engine = load_engine(config.engine or suite.engine)
        if config.launched:
            python = engine.python(suite.server.python)
            if os.sep in python and not os.access(python, os.X_OK):
                raise LaunchError(f"config {config.name!r}: engine Python not found: {python} "
                                  f"(prepare it with `specbench setup cpu`, or set server.python / SPECBENCH_ENGINE_PYTHON)")
            if config.port and port_in_use(suite.server.host, config.port):
                raise LaunchError(f"config {config.name!r}: port {config.port} on {suite.server.host} is already in use")
    return load_suite_prompts(suite)


def load_suite_prompts(suite: Suite) -> dict[str, list[Prompt]]:
    """Every data set's prompts, or the one-line error of the first that cannot be had."""
    prompts = {}
    for spec in suite.datasets:
        check_available(spec, suite.data_dir)
        prompts[spec.name] = load_prompts(spec, suite.data_dir)
        if not prompts[spec.name]:
            raise SuiteError(f"{suite.path}: dataset {spec.name!r} yielded no prompts")
    return prompts


def _config_order(suite: Suite) -> list[ServerConfig]:
    """Baseline first: every later cell can then show its speedup as soon as it is measured."""
    base = suite.baseline
    return ([base] if base else []) + [c for c in suite.configs if c is not base]


async def _server_info(session: aiohttp.ClientSession, url: str, engine: Engine) -> dict[str, Any]:
    """The server's version (a string, or null with ``version_error``) and, for engines that read
    acceptance from it, the parsed answer as it came (the adapter checks its shape)."""
    path, key = engine.version_path
    where = f"GET {redact_url(url)}{path}"
    try:
        async with session.get(url + path, timeout=aiohttp.ClientTimeout(total=10)) as r:
            if r.status != 200:
                return {"version": None, "version_error": f"{where}: HTTP {r.status}", "raw": None}
            data = json.loads(await read_capped(r, PROBE_LIMIT))
    except (TimeoutError, aiohttp.ClientError, ValueError, RecursionError) as err:
        return {"version": None, "version_error": f"{where}: {type(err).__name__}: {str(err)[:100]}", "raw": None}
    info: dict[str, Any] = {"version": None, "raw": data if engine.acceptance_reads_server_info else None}
    version = data.get(key) if isinstance(data, dict) else None
    if isinstance(version, (int, float)) and not isinstance(version, bool) and math.isfinite(version):
        version = str(version)
    if isinstance(version, str) and 0 < len(version) <= 100:
        info["version"] = version
    elif not isinstance(data, dict):
        info["version_error"] = f"{where}: answered a JSON {type(data).__name__}, not an object"
    else:
        info["version_error"] = f"{where}: {key!r} is {'missing' if version is None else 'not a version string'}"
    return info


async def _check_url(session: aiohttp.ClientSession, config: ServerConfig, model: str, engine: Engine) -> None:
    assert config.url is not None  # only a config given by URL is checked
    url = config.url + engine.models_path
    shown = redact_url(url)
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=15)) as r:
            if r.status != 200:
                raise ServerError(f"config {config.name!r}: GET {shown} returned HTTP {r.status}")
            body = await read_capped(r, PROBE_LIMIT)
    except ValueError as err:
        raise ServerError(f"config {config.name!r}: GET {shown}: {err}") from None
    except (TimeoutError, aiohttp.ClientError) as err:
        raise ServerError(redact_url(f"config {config.name!r}: cannot reach {shown}: {type(err).__name__} {err}".rstrip())) from None
    try:
        served = served_models(body)
    except ValueError as err:
        raise ServerError(redact_url(f"config {config.name!r}: GET {shown}: {err}")) from None
    if model not in served:
        raise ServerError(f"config {config.name!r}: {redact_url(config.url)} serves {served}, not the suite's model {model!r}")


@asynccontextmanager
async def open_server(suite: Suite, config: ServerConfig, run: RunDir, session: aiohttp.ClientSession,
                      stop: asyncio.Event | None = None):
    engine = load_engine(config.engine or suite.engine)
    if config.url is not None:  # not launched
        await _check_url(session, config, suite.model, engine)
        yield Server(config, config.url, engine, info={"engine": engine.name, "url": redact_url(config.url), "launched": False})
        return
    host = suite.server.host
    port = config.port or free_port(host)
    argv = engine.argv(config=config, model=suite.model, model_path=suite.server.model_path, host=host, port=port,
                       python=suite.server.python, extra=suite.server.args)
    env = {**engine.env, **suite.server.env, **config.env}
    if config.gpus is not None and engine.gpu_env:
        env[engine.gpu_env] = config.gpus
    url = f"http://{host}:{port}"
    proc = ServerProcess(config.name, argv, env, run.logs / f"{config.name}.log", url, engine.health_path,
                         engine.models_path, suite.model, suite.server.startup_timeout_s, engine.redact(argv))
    proc.start()
    identity = proc.identity()
    assert identity is not None and proc.proc is not None  # start() spawned the process or raised
    run.record_server(config.name, identity)
    try:
        ready_s = await proc.wait_ready(session, stop)
        yield Server(config, url, engine, proc, info={
            "engine": engine.name, "url": url, "launched": True, "argv": engine.redact(argv),
            "env": redact_env(env),
            "ready_s": round(ready_s, 1), "log": str(proc.log_path), "pid": proc.proc.pid,
        })
    finally:
        proc.stop()
        run.forget_server(config.name)


def auth_headers(suite: Suite) -> dict[str, str]:
    """``Authorization`` for every request to the suite's servers, probes included: vLLM's
    ``--api-key`` guards every /v1 path, /v1/models among them."""
    api_key = os.environ.get(suite.api_key_env) if suite.api_key_env else None
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _request_spec(suite: Suite, server: Server) -> RequestSpec:
    api_key = os.environ.get(suite.api_key_env) or None if suite.api_key_env else None
    extra = {**(server.engine.data.get("request_extra") or {}), **suite.load.extra_body}
    return RequestSpec(base_url=server.url, model=suite.model, endpoint=suite.endpoint,
                       max_tokens=suite.load.max_tokens, temperature=suite.load.temperature, top_p=suite.load.top_p,
                       ignore_eos=suite.load.ignore_eos, timeout_s=suite.load.timeout_s, extra_body=extra,
                       api_key=api_key)


def build_rows(suite: Suite, phases: list[PhaseInfo], records: list[RequestRecord]) -> list[ResultRow]:
    """Results rows for every cell measured so far, in suite order (data set, then config)."""
    configs = {c.name: c for c in suite.configs}
    by_cell: dict[Cell, list[PhaseInfo]] = {}
    for p in phases:
        by_cell.setdefault(p.cell, []).append(p)
    rec_by: dict[Cell, list[RequestRecord]] = {}
    for r in records:
        rec_by.setdefault(Cell.of_record(r), []).append(r)
    rows = []
    for spec in suite.datasets:
        for point in load_points(suite):
            for config in suite.configs:
                cell = Cell.at(config.name, spec.name, point)
                if cell not in by_cell:
                    continue
                c = configs[config.name]
                rows.append(summarize_cell(by_cell[cell], rec_by.get(cell, []), method=c.label_method,
                                           k=c.num_speculative_tokens))
    add_comparisons(rows, [r for r in records], suite.baseline.name if suite.baseline else None)
    add_quality(rows, phases, records, suite)
    return rows


def redact_raw(raw: Any) -> Any:
    """The suite as written, minus secrets (see ``specbench.secrets``)."""
    return redact_mapping(raw)


def _notes(suite: Suite, clocks: dict[str, str] | None = None) -> list[str]:
    clock = sorted(set((clocks or {}).values()))
    return [
        "Speedup = output tok/s of the run ÷ baseline's on the same data set and load point; its 95% CI is "
        "bootstrapped over paired prompts, or Student-t over repeats (speedup_ci_method in results.json).",
        "ITL is per token (a chunk of n tokens after a gap g gives n samples of g/n); TPOT = (latency − TTFT)/(output tokens − 1)."
        + (f" Chunk times: {' / '.join(clock)}; TTFT counts from just before the request is written to the socket." if clock else ""),
        "Acceptance: deltas of the engine's spec-decode counters over each measured phase (see acceptance_source in results.json); — = not measured.",
        f"temperature {suite.load.temperature:g}, max_tokens {suite.load.max_tokens}, warm-up "
        + ("a full matching pass" if suite.load.warmup == "pass" else f"{suite.load.warmup} request(s)") + " before each timed pass.",
    ] + suite_notes(suite)


class Runner:
    def __init__(self, suite: Suite, out: Path, *, resume: bool = False, progress: Progress | None = None,
                 restart_on_failure: bool = False, only_configs: list[str] | None = None,
                 on_phase: Callable[[PhaseInfo, list[RequestRecord]], None] | None = None,
                 grace_s: float = 10.0, prompts: dict[str, list[Prompt]] | None = None,
                 overwrite: bool = False) -> None:
        """``only_configs`` and ``on_phase`` let a distributed driver run one config per worker and
        receive each phase's data as it completes (see ``specbench.parallel``). ``out`` must hold no
        run unless ``resume`` (continue it) or ``overwrite`` (replace it)."""
        if resume and overwrite:
            raise SuiteError("--resume and --overwrite exclude each other")
        self.suite, self.run = suite, RunDir(out)
        self.overwrite = overwrite
        self.stopped_leftovers: list[dict[str, Any]] = []
        self.only_configs = only_configs
        self.grace_s = grace_s
        self.timing = {"servers_s": 0.0, "warmup_s": 0.0, "measured_s": 0.0}
        self.prompts = prompts
        self.on_phase = on_phase or self.store_phase
        self.resume, self.progress = resume, progress or (lambda *a, **k: None)
        self.restart_on_failure = restart_on_failure
        self.stop = asyncio.Event()
        self.meta: dict[str, Any] = {}

    # ---- the run dir ----
    def prepare(self) -> None:
        """Before anything is loaded or launched: refuse a run dir that cannot be used as asked (one
        line, exit 2, nothing touched), then stop servers a killed earlier run left running in it."""
        if self.resume:
            self.run.check_resumable()
            self._check_comparable()
        elif not self.overwrite:
            self.run.check_fresh()
        if self.resume or self.overwrite:
            self._stop_leftovers()

    def begin(self) -> None:
        """Open the run dir for writing: cleared (--overwrite), or its damaged lines quarantined and
        its cut phases set aside (--resume)."""
        if self.overwrite:
            self.run.clear()
        self.run.create()
        self._start_meta()
        if self.resume:
            self._supersede_incomplete()
        self.run.write_meta(self.meta)

    def _check_comparable(self) -> None:
        previous = self.run.load_meta()
        if not previous:
            return
        old, new = previous.get("comparability", {}), self.suite.comparability()
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k not in ("configs", "datasets"))
        phases = self.run.load_phases()
        measured = {"configs": {p.config for p in phases}, "datasets": {p.dataset for p in phases}}
        for group in ("configs", "datasets"):
            o, n = old.get(group, {}), new.get(group, {})
            # only what has measured cells must stay the same; a config that never ran may be fixed
            changed += [f"{group}.{name}" for name in sorted(set(o) & set(n) & measured[group]) if o[name] != n[name]]
        if changed:
            raise SuiteError(f"{self.suite.path}: cannot resume {self.run.path}: the suite changed in ways that break "
                             f"comparability: {', '.join(changed)}")

    def _stop_leftovers(self) -> None:
        for name, identity in self.run.launched().items():
            if stop_leftover(identity):
                self.stopped_leftovers.append({"config": name, **identity})
                self.progress("notice", message=f"stopped a leftover server of config {name!r} (pid {identity.get('pid')}) "
                                                f"that an earlier, killed run had left running")
        self.run.forget_all_servers()

    def _notice(self, message: str) -> None:
        """Said now and kept under the table: something about the run dir that bears on its numbers."""
        self.progress("notice", message=message)
        self.meta.setdefault("run_dir_notes", []).append(message)

    def store_phase(self, info: PhaseInfo, records: list[RequestRecord]) -> None:
        grade_phase(self.suite, info.dataset, records)
        self.run.append_phase(info, records)
        rows = self.write()
        row = next((r for r in rows if Cell.of_row(r) == info.cell), None)
        self.progress("cell_done", row=row)

    def write(self) -> list[ResultRow]:
        phases, records = self.run.load_phases(), self.run.load_requests()
        rows = build_rows(self.suite, phases, records)
        attach_capacity(rows, self.meta.get("slo_search"), self.suite.baseline.name if self.suite.baseline else None)
        self.meta["updated_at"] = _now()
        # `specbench report` prints them too
        self.meta["notes"] = _notes(self.suite, self.meta.get("chunk_clock")) + self.meta.get("run_dir_notes", [])
        self.run.write_meta(self.meta)
        self.run.write_results(rows, markdown(rows, self.meta))
        return rows

    def _start_meta(self) -> None:
        previous = self.run.load_meta() if self.resume else {}
        self.meta = previous or {
            "specbench_version": __version__,
            "suite": {"name": self.suite.name, "path": str(self.suite.path), "raw": redact_raw(self.suite.raw)},
            "suite_file": suite_file_provenance(self.suite.path),
            "comparability": self.suite.comparability(),
            "started_at": _now(),
            "host": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
            "servers": {},
            "failed_configs": {},
        }
        self.meta.setdefault("runs", []).append({"started_at": _now(), "resume": self.resume, "overwrite": self.overwrite,
                                                 **({"stopped_leftovers": self.stopped_leftovers} if self.stopped_leftovers else {})})

    # ---- measuring ----
    async def _phase(self, session, server: Server, spec: RequestSpec, prompts: list[Prompt], dataset: str,
                     point: LoadPoint, repeat: int) -> None:
        cfg = server.config
        transport = open_transport(server.url, self.suite.load.client)
        meter = PhaseMeter.for_config(self.suite, cfg)
        try:
            warm = self.suite.load.warmup if isinstance(self.suite.load.warmup, int) else len(prompts)  # or "pass"
            if warm:
                warm_prompts = prompts if self.suite.load.warmup == "pass" else [
                    Prompt(p.id, p.dataset, p.turns[:1], p.category, p.system) for p in prompts[:warm]]
                self.progress("phase", config=cfg.name, dataset=dataset, point=point.label, total=len(warm_prompts), warmup=True)
                res = await drive(transport, spec, warm_prompts, Phase(cfg.name, "warmup", max(point.concurrency, 1), None),
                                  on_record=lambda r: self.progress("request", record=r), stop=self.stop,
                                  grace_s=self.grace_s)
                warm_records = res.records
                self.timing["warmup_s"] += res.wall_s
            else:
                warm_records = []
            total = sum(len(p.turns) for p in prompts)
            self.progress("phase", config=cfg.name, dataset=dataset, point=point.label, total=total, warmup=False)
            before = await scrape(session, server.url)
            meter.start()
            phase = Phase(cfg.name, "measure", point.concurrency, point.request_rate, seed=self.suite.load.seed + repeat, repeat=repeat)
            processes = self.suite.load.processes_at(point.concurrency) if point.request_rate is None else 1
            if processes > 1:
                result = await drive_processes(spec, prompts, phase, processes,
                                               on_record=lambda r: self.progress("request", record=r),
                                               client=self.suite.load.client, stop=self.stop, grace_s=self.grace_s)
            else:
                result = await drive(transport, spec, prompts, phase, on_record=lambda r: self.progress("request", record=r),
                                     stop=self.stop, grace_s=self.grace_s)
        finally:
            meter.stop()
            self.meta.setdefault("chunk_clock", {})[cfg.name] = transport_clock(transport)
            await close_transport(transport)
        after = await scrape(session, server.url)
        self.timing["measured_s"] += result.wall_s
        died = server.process is not None and (
            not server.process.alive
            # a server killed mid-phase fails its requests a moment before its process is reaped
            or (any(r.error for r in result.records) and await asyncio.to_thread(server.process.exited_within, 1.0)))
        info = await _server_info(session, server.url, server.engine) if server.engine.acceptance_reads_server_info else {}
        acceptance = server.engine.acceptance(before, after, cfg.num_speculative_tokens, info.get("raw"))
        if not before.ok or not after.ok:
            acceptance["acceptance_error"] = redact_url(before.error or after.error)
        for r in warm_records + result.records:
            if r.error:
                r.error = redact_url(r.error)
        info_row = PhaseInfo(config=cfg.name, dataset=dataset, concurrency=point.concurrency,
                             request_rate=point.request_rate, repeat=repeat, wall_s=result.wall_s,
                             acceptance=acceptance, server={k: server.info.get(k) for k in ("engine", "version", "url")},
                             interrupted=self.stop.is_set(),
                             server_died=died, telemetry=meter.stop())
        self.on_phase(info_row, warm_records + result.records)

    async def _config(self, session, config: ServerConfig, prompts: dict[str, list[Prompt]], done: set) -> None:
        todo = [(spec.name, point, rep) for spec in self.suite.datasets for point in load_points(self.suite)
                for rep in range(self.suite.load.repeats)
                if (Cell.at(config.name, spec.name, point), rep) not in done]
        searches = [] if self.suite.load.rate_search is None else [
            d.name for d in self.suite.datasets if d.name not in (self.meta.get("slo_search") or {}).get(config.name, {})]
        if not todo and not searches:
            return
        self.progress("server", config=config.name, launching=config.launched)
        t0 = time.monotonic()
        async with self._timed_server(open_server(self.suite, config, self.run, session, self.stop), t0) as server:
            server.info.update(await _server_info(session, server.url, server.engine))
            server.info.pop("raw", None)
            self.meta["servers"][config.name] = server.info
            self.run.write_meta(self.meta)
            spec = _request_spec(self.suite, server)
            for dataset, point, rep in todo:
                if self.stop.is_set():
                    return
                if server.process is not None and not server.process.alive:
                    raise server.process.death("between cells")
                pool = prompts[dataset]
                chosen = pool[: self.suite.load.prompts_at(point.concurrency, len(pool))]
                await self._phase(session, server, spec, chosen, dataset, point, rep)
                if server.process is not None and not server.process.alive:
                    raise server.process.death(f"during data set {dataset!r} ({point.label})")
            for dataset in searches:
                if self.stop.is_set():
                    return
                await self._rate_search(server, spec, prompts[dataset], dataset)

    async def _rate_search(self, server: Server, spec: RequestSpec, prompts: list[Prompt], dataset: str) -> None:
        """--max-rate-at-slo for one config × data set; probe requests go to slo_probes.jsonl, the result to meta.json."""
        name = server.config.name

        def on_probe(probe: dict[str, Any], records: list[RequestRecord]) -> None:
            with (self.run.path / PROBES_FILE).open("a") as f:
                f.writelines(json.dumps({**r.to_dict(), "probe_rate": probe["rate"]}) + "\n" for r in records)
            self.progress("cell_done", row=None)

        def on_record(r: RequestRecord) -> None:
            self.progress("request", record=r)

        def on_start(rate: float) -> None:
            self.progress("phase", config=name, dataset=dataset, point=f"{PROBE_PHASE} {rate:g} req/s", total=len(prompts), warmup=False)

        result = await search_server(url=server.url, client=self.suite.load.client, spec=spec, prompts=prompts, config=name,
                                     slo=self.suite.load.slo, search=self.suite.load.rate_search, seed=self.suite.load.seed,
                                     stop=self.stop, grace_s=self.grace_s, on_probe=on_probe, on_record=on_record,
                                     on_start=on_start)
        if not result["interrupted"]:
            self.meta.setdefault("slo_search", {}).setdefault(name, {})[dataset] = result
            self.write()

    def _done(self) -> set[tuple[Cell, int]]:
        return {(p.cell, p.repeat) for p in self.run.load_phases() if p.complete}

    async def _config_with_restart(self, session, config: ServerConfig, prompts: dict[str, list[Prompt]]) -> str | None:
        """Run one config; on a launch or server failure optionally restart it once. Returns the error, if any."""
        attempts = 2 if self.restart_on_failure else 1
        error = None
        for attempt in range(attempts):
            if attempt:
                self.meta.setdefault("restarts", {})[config.name] = attempt
                self._supersede_incomplete()
            try:
                await self._config(session, config, prompts, self._done())
                return None
            except (LaunchError, ServerError) as err:
                if self.stop.is_set():
                    return None  # stopped by the user, not a failure of the config
                error = str(err)
                self.meta["failed_configs"][config.name] = error
                self.progress("config_failed", config=config.name, error=error)
        return error

    @asynccontextmanager
    async def _timed_server(self, cm, t0: float):
        """Time spent starting and stopping servers, kept apart from the harness's own overhead."""
        t1 = None
        try:
            async with cm as server:
                self.timing["servers_s"] += time.monotonic() - t0
                try:
                    yield server
                finally:
                    t1 = time.monotonic()
        finally:
            if t1 is not None:
                self.timing["servers_s"] += time.monotonic() - t1

    async def execute(self) -> RunOutcome:
        t_start = time.monotonic()
        self.prepare()
        prompts = self.prompts if self.prompts is not None else preflight(self.suite)
        self.begin()
        loop = asyncio.get_running_loop()
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal)
                handled.append(sig)
            except (RuntimeError, ValueError):  # not the main thread: the caller owns signals
                pass
        failed: dict[str, str] = {}
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        try:
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                             headers=auth_headers(self.suite)) as session:
                for config in _config_order(self.suite):
                    if self.only_configs is not None and config.name not in self.only_configs:
                        continue
                    if self.stop.is_set():
                        break
                    error = await self._config_with_restart(session, config, prompts)
                    if error is None:
                        self.meta["failed_configs"].pop(config.name, None)
                    else:
                        failed[config.name] = error
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
            reap_all()
            self.meta["finished_at"] = _now()
            total = time.monotonic() - t_start
            busy = sum(self.timing.values())
            self.meta["timing"] = {**{k: round(v, 3) for k, v in self.timing.items()}, "total_s": round(total, 3),
                                   "harness_s": round(total - busy, 3),
                                   "harness_share": round((total - busy) / total, 4) if total else None}
            rows = self.write()
        return RunOutcome(self.run.path, rows, failed, interrupted=self.stop.is_set())

    def _supersede_incomplete(self) -> None:
        """Set aside what must be measured again (the cut phases are listed in meta.json), after
        quarantining unreadable lines; see ``RunDir.supersede_incomplete``."""
        cut, notes = self.run.supersede_incomplete()
        if cut:
            self.meta.setdefault("superseded_phases", []).extend(cut)
        for note in notes:
            self._notice(note)

    def _on_signal(self) -> None:
        if self.stop.is_set():
            reap_all(grace_s=2)
            raise KeyboardInterrupt
        self.stop.set()
        self.progress("interrupt")


async def run_suite(suite: Suite, out: Path, **kwargs) -> RunOutcome:
    return await Runner(suite, out, **kwargs).execute()
