"""Server lifecycle: reach a config's server at its URL or launch it, and tell it apart (version,
served model); the request every phase sends to it."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from .. import __version__
from ..client import RequestSpec
from ..errors import ServerError
from ..hooks import plugin_site, steplog_env
from ..launch import Engine, ServerProcess, read_engine
from ..launch.process import free_port, served_models, stop_off_loop
from ..launch.setup_cpu import cache_dir
from ..schemas.launched import ProcessIdentity
from ..suite import ServerConfig, Suite
from ..util.bounded import PROBE_LIMIT, read_capped
from ..util.diskio import writing
from ..util.numbers import is_number
from ..util.redact import redact_env, redact_url


class ServerBook(Protocol):
    """Where a launched server's log goes, and the record of servers started and not yet stopped."""

    logs: Path

    def record_server(self, name: str, identity: ProcessIdentity) -> None: ...

    def forget_server(self, name: str) -> None: ...

    def next_start(self, name: str) -> int:
        """The index of this launch of config ``name``'s server: 0, 1, … over the run and its --resumes."""
        ...


def server_log_name(config: str, start: int) -> str:
    """The log file of one server start under logs/ (``<config>.log`` for the first, as before restarts
    existed; ``<config>.start<N>.log`` after): the one name anything kept per server start uses."""
    return f"{config}.log" if start == 0 else f"{config}.start{start}.log"


@dataclass
class Server:
    """A reachable server for one config: launched by us or given as a URL."""

    config: ServerConfig
    url: str
    engine: Engine
    process: ServerProcess | None = None
    info: dict[str, Any] = field(default_factory=dict)
    steplog_dir: Path | None = None  # the launch's step-log folder (a launched config with the log on)


@dataclass(frozen=True)
class ServerVersion:
    """A server's answer to the version probe: its version (or None, with ``error`` saying why) and,
    for engines that read acceptance from it, the parsed answer as it came (the adapter checks its shape)."""

    version: str | None
    error: str | None = None
    raw: Any = None  # any JSON value: untrusted, read_acceptance checks it


async def server_info(session: aiohttp.ClientSession, url: str, engine: Engine) -> ServerVersion:
    """The server's version probe, answered or not (never raises for what the server sends)."""
    path, key = engine.version_path
    where = f"GET {redact_url(url)}{path}"
    try:
        async with session.get(url + path, timeout=aiohttp.ClientTimeout(total=10)) as r:
            if r.status != 200:
                return ServerVersion(None, f"{where}: HTTP {r.status}")
            data = json.loads(await read_capped(r, PROBE_LIMIT))
    except (TimeoutError, aiohttp.ClientError, ValueError, RecursionError) as err:
        return ServerVersion(None, f"{where}: {type(err).__name__}: {str(err)[:100]}")
    raw = data if engine.acceptance_reads_server_info else None
    version = data.get(key) if isinstance(data, dict) else None
    if is_number(version):
        version = str(version)
    if isinstance(version, str) and 0 < len(version) <= 100:
        return ServerVersion(version, raw=raw)
    if not isinstance(data, dict):
        return ServerVersion(None, f"{where}: answered a JSON {type(data).__name__}, not an object", raw)
    return ServerVersion(None, f"{where}: {key!r} is {'missing' if version is None else 'not a version string'}", raw)


async def check_url(session: aiohttp.ClientSession, config: ServerConfig, model: str, engine: Engine) -> None:
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


STEPLOG_DIR = "steplog"  # under the run's logs/: one folder per server start
SETTLE_QUIET_S, SETTLE_MAX_S = 0.6, 3.0  # the recorder flushes every 0.25 s


async def settle(folder: Path) -> None:
    """Wait until the step log's files stop growing (no change for ``SETTLE_QUIET_S``, at most ``SETTLE_MAX_S``)
    before the server is stopped: an idle server's last rows reach disk on the recorder's next flush, and a
    process that is killed instead of exiting loses what it had not flushed."""
    def sizes() -> tuple[tuple[str, int], ...]:
        out = []
        for p in sorted(folder.glob("*.jsonl")):
            try:
                out.append((p.name, p.stat().st_size))
            except OSError:
                continue
        return tuple(out)

    loop = asyncio.get_running_loop()
    start = last_change = loop.time()
    seen = sizes()
    while loop.time() - start < SETTLE_MAX_S and loop.time() - last_change < SETTLE_QUIET_S:
        await asyncio.sleep(0.1)
        now = sizes()
        if now != seen:
            seen, last_change = now, loop.time()


@dataclass(frozen=True)
class SteplogLaunch:
    """What the step log adds to one launch: the server's env, and its keys in meta.json's server entry."""

    env: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str | dict[str, str]] = field(default_factory=dict)  # ServerMeta's steplog* keys


def steplog_launch(logs: Path, config: ServerConfig, env: dict[str, str], start: int | None = None) -> SteplogLaunch:
    """A launch's step-log folder ``logs/steplog/<config>-s<start>/`` made (``start``: this config's
    server-start number in the run, 0-based; by default one past the highest there), the plugin folder found or
    built in specbench's cache (``hooks.plugin_site``: once per version, its sha256 recorded), and the server's
    env additions (nothing when the config's log is off)."""
    if config.steplog == "off":
        return SteplogLaunch()
    root = logs / STEPLOG_DIR
    if start is None:
        taken = [int(n) for p in root.glob(f"{config.name}-s*") if (n := p.name[len(config.name) + 2:]).isdigit()]
        start = max(taken, default=-1) + 1
    log_dir = root / f"{config.name}-s{start}"
    with writing(root):
        log_dir.mkdir(parents=True, exist_ok=True)
    try:
        site = plugin_site(cache_dir(), __version__)
    except OSError as err:
        raise ServerError(f"config {config.name!r}: cannot write the step recorder's plugin folder ({cache_dir() / 'plugin'}, "
                          f"nor a temporary one): {err.strerror or err}") from None
    env_added = steplog_env(config.steplog, log_dir.resolve(), site.path, env.get("PYTHONPATH", os.environ.get("PYTHONPATH")))
    return SteplogLaunch(env_added, {"steplog": f"logs/{STEPLOG_DIR}/{log_dir.name}", "steplog_level": config.steplog,
                                     "steplog_plugin": {"path": str(site.path), "sha256": site.sha256}})


@asynccontextmanager
async def open_server(suite: Suite, config: ServerConfig, book: ServerBook, session: aiohttp.ClientSession,
                      stop: asyncio.Event | None = None) -> AsyncIterator[Server]:
    """The config's server, reached or launched (and stopped on exit); a launched one is recorded in
    ``book`` while it runs, with its server-start number in the run (which names its log and step-log folder)."""
    engine = read_engine(config.engine or suite.engine)
    if config.url is not None:  # not launched
        await check_url(session, config, suite.model, engine)
        yield Server(config, config.url, engine, info={"engine": engine.name, "url": redact_url(config.url), "launched": False})
        return
    host = suite.server.host
    port = config.port or free_port(host)
    argv = engine.argv(config=config, model=suite.model, model_path=suite.server.model_path, host=host, port=port,
                       python=suite.server.python, extra=suite.server.args)
    # load.prefix_cache reset: what the engine needs to mount its reset endpoint (vLLM's dev mode); the suite's own
    # env still wins, so a server it starts without the endpoint fails before any pass, naming it
    reset_env = engine.prefix_cache_reset.env if suite.load.prefix_cache == "reset" else {}
    env = {**engine.env, **reset_env, **suite.server.env, **config.env}
    if config.gpus is not None and engine.gpu_env:
        env[engine.gpu_env] = config.gpus
    start = book.next_start(config.name)
    steplog_added = steplog_launch(book.logs, config, env, start)
    env.update(steplog_added.env)
    steplog = steplog_added.meta
    url = f"http://{host}:{port}"
    proc = ServerProcess(config.name, argv, env, book.logs / server_log_name(config.name, start), url, engine.health_path,
                         engine.models_path, suite.model, suite.server.startup_timeout_s, engine.redact(argv))
    proc.start()
    identity = proc.identity()
    assert identity is not None and proc.proc is not None  # start() spawned the process or raised
    book.record_server(config.name, identity)
    try:
        ready_s = await proc.wait_ready(session, stop)
        yield Server(config, url, engine, proc, info={
            "engine": engine.name, "url": url, "launched": True, "argv": engine.redact(argv),
            "env": redact_env(env),
            "ready_s": round(ready_s, 1), "log": str(proc.log_path), "pid": proc.proc.pid, "start": start, **steplog,
        }, steplog_dir=Path(env["SPECBENCH_STEPLOG_DIR"]) if "SPECBENCH_STEPLOG_DIR" in env else None)
    finally:
        try:
            if "SPECBENCH_STEPLOG_DIR" in env and not (stop is not None and stop.is_set()):
                await settle(Path(env["SPECBENCH_STEPLOG_DIR"]))
            await stop_off_loop(proc)  # a second Ctrl-C meanwhile kills the group at once
        finally:
            book.forget_server(config.name)


def auth_headers(suite: Suite) -> dict[str, str]:
    """``Authorization`` for every request to the suite's servers, probes included: vLLM's
    ``--api-key`` guards every /v1 path, /v1/models among them."""
    api_key = os.environ.get(suite.api_key_env) if suite.api_key_env else None
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def request_spec(suite: Suite, server: Server) -> RequestSpec:
    api_key = os.environ.get(suite.api_key_env) or None if suite.api_key_env else None
    extra = {**server.engine.launcher.request_extra, **suite.load.extra_body}
    return RequestSpec(base_url=server.url, model=suite.model, endpoint=suite.endpoint,
                       max_tokens=suite.load.max_tokens, temperature=suite.load.temperature, top_p=suite.load.top_p,
                       ignore_eos=suite.load.ignore_eos, timeout_s=suite.load.timeout_s, extra_body=extra,
                       api_key=api_key)
