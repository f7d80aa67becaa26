"""A suite mapping → ``Suite``, one function per block; every problem is collected, then raised
as one ``SuiteError`` with one line each."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

from ..datasets import DatasetSpec
from ..errors import SuiteError
from ..util.redact import redact_url
from .arrival import parse_arrival
from .checks import (
    CLIENTS,
    CONFIG_KEYS,
    ENDPOINTS,
    LOAD_KEYS,
    MAX_CLIENT_PROCESSES,
    MAX_CONCURRENCY,
    MAX_GPUS_PER_SERVER,
    MAX_REPEATS,
    MAX_REQUEST_RATE,
    MAX_SPECULATIVE_TOKENS,
    MAX_TARGET_CI,
    MAX_TEMPERATURE,
    MAX_TIMEOUT_S,
    MAX_TOKENS,
    MAX_WARMUP_PASSES,
    MIN_REQUEST_RATE,
    MIN_TARGET_CI,
    PREFIX_CACHE_MODES,
    SERVER_KEYS,
    TOP_KEYS,
    ConfigBlock,
    LoadBlock,
    ServerBlock,
    TopBlock,
    at_most,
    check_keys,
    check_load_format,
    check_name,
    check_steplog,
    check_url,
    check_warmup,
    non_finite,
    parse_workload,
    positive_list,
)
from .gate import GateSpec
from .model import MIN_ADAPTIVE_REPEATS, LaunchSettings, LoadSpec, ServerConfig, Suite
from .objectives import parse_cost, parse_grade, parse_search, parse_slo
from .yamlfile import read_yaml


def parse_suite(data: Any, path: Path) -> Suite:
    """Validate a suite mapping; raise one ``SuiteError`` listing every problem, one per line."""
    problems: list[str] = []
    where = str(path)
    bad_numbers: list[str] = []
    non_finite(data, "", bad_numbers)
    if bad_numbers:
        raise SuiteError("\n".join(f"{where}: {p}" for p in bad_numbers))
    top = cast(TopBlock, check_keys(data, TOP_KEYS, where, problems))
    if "name" in top:
        check_name(top["name"], f"{where}.name", problems)
    for key in ("name", "model", "configs", "datasets"):
        if key not in top and isinstance(data, dict) and key not in data:
            problems.append(f"{where}.{key}: required key missing")
    endpoint = top.get("endpoint", "chat")
    if endpoint not in ENDPOINTS:
        problems.append(f"{where}.endpoint: expected one of {', '.join(ENDPOINTS)}, got {endpoint!r}")

    base = path.parent
    server = _server(top, where, problems)
    configs = _configs(top, where, problems, server.load_format, server.steplog)
    datasets = _datasets(top, where, base, problems)
    _configs_on_datasets(configs, datasets, where, problems)
    lraw = cast(LoadBlock, check_keys(top.get("load", {}), LOAD_KEYS, f"{where}: load", problems))
    load = _load(lraw, datasets, base, where, problems)
    _contexts_hold_datasets(top, configs, server, datasets, load.max_tokens, where, problems)
    data_dir = None
    if "data_dir" in top:
        data_dir = (base / os.path.expanduser(top["data_dir"])).resolve()
        if not data_dir.is_dir():
            problems.append(f"{where}.data_dir: directory not found: {data_dir}")
    _urls_against_settings(top, lraw, configs, where, problems)
    gate = top.get("gate")
    if gate is not None:
        try:
            GateSpec.from_mapping(gate, f"{where}: gate")
        except SuiteError as err:
            problems.append(str(err))
    cost = None
    if "cost" in top:
        cost = parse_cost(top["cost"], f"{where}: cost", problems)

    if problems:
        raise SuiteError("\n".join(problems))
    return Suite(
        name=top["name"], model=top["model"], endpoint=endpoint, configs=tuple(configs),
        datasets=tuple(datasets), load=load, path=path,
        engine=top.get("engine", "vllm"), server=server, data_dir=data_dir,
        api_key_env=top.get("api_key_env"), gate=gate, raw=data, cost=cost,
    )


def _configs(top: TopBlock, where: str, problems: list[str], load_format: str = "auto",
             steplog: str = "off") -> list[ServerConfig]:
    """The ``configs:`` entries; a launched one without its own ``load_format`` or ``steplog`` takes the
    ``server:`` block's (a config with ``url:`` is not launched: its ``load_format`` only says how that
    server was started, and specbench cannot turn a step log on in it)."""
    configs: list[ServerConfig] = []
    for i, raw in enumerate(top.get("configs") or []):
        cwhere = f"{where}: configs[{i}]"
        c = cast(ConfigBlock, check_keys(raw, CONFIG_KEYS, cwhere, problems))
        if "name" not in c:
            problems.append(f"{cwhere}.name: required key missing")
            continue
        check_name(c["name"], f"{cwhere}.name", problems)
        if "url" in c:
            check_url(c["url"], f"{cwhere}.url", problems)
        if "port" in c and not 0 < c["port"] < 65536:
            problems.append(f"{cwhere}.port: expected 1-65535, got {c['port']}")
        k = c.get("num_speculative_tokens")
        if k is not None and k < 1:
            problems.append(f"{cwhere}.num_speculative_tokens: expected a positive integer, got {k}")
        at_most(k, MAX_SPECULATIVE_TOKENS, f"{cwhere}.num_speculative_tokens", problems)
        if "load_format" in c:
            check_load_format(c["load_format"], f"{cwhere}.load_format", problems)
        if "steplog" in c:
            check_steplog(c["steplog"], f"{cwhere}.steplog", problems)
            if "url" in c and c["steplog"] != "off":
                problems.append(f"{cwhere}.steplog: only a server specbench launches can write a step log "
                                f"(this config has url:)")
        if "warmup" in c:
            check_warmup(c["warmup"], f"{cwhere}.warmup", problems)
        if k is not None and not c.get("method"):
            problems.append(f"{cwhere}.method: required when num_speculative_tokens is given")
        configs.append(ServerConfig(
            name=c["name"], url=c.get("url", "").rstrip("/") or None, method=c.get("method"),
            num_speculative_tokens=k, drafter=c.get("drafter"), speculative=dict(c.get("speculative", {})),
            baseline=c.get("baseline", False), engine=c.get("engine"),
            args=tuple(str(a) for a in c.get("args", [])), env={str(k2): str(v) for k2, v in c.get("env", {}).items()},
            port=c.get("port"), gpus=str(c["gpus"]) if "gpus" in c else None,
            load_format=c.get("load_format", "auto" if "url" in c else load_format),
            datasets=_name_list(c["datasets"], f"{cwhere}.datasets", problems) if "datasets" in c else None,
            steplog=c.get("steplog", "off" if "url" in c else steplog), warmup=c.get("warmup"),
        ))
    names = [c.name for c in configs]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{where}: configs: name {dup!r} used more than once")
    marked = [c.name for c in configs if c.baseline]
    if len(marked) > 1:
        problems.append(f"{where}: configs: baseline: true on more than one config ({', '.join(marked)})")
    if isinstance(top.get("configs"), list) and not top["configs"]:
        problems.append(f"{where}.configs: at least one config is needed")
    return configs


def _name_list(value: list[Any], where: str, problems: list[str]) -> tuple[str, ...]:
    names = tuple(v for v in value if isinstance(v, str))
    if len(names) != len(value) or not names:
        problems.append(f"{where}: expected a non-empty list of data set names, got {value!r}")
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{where}: data set {dup!r} named more than once")
    return names


def _configs_on_datasets(configs: list[ServerConfig], datasets: list[DatasetSpec], where: str,
                         problems: list[str]) -> None:
    """A config's ``datasets:`` (it measures only those) must name data sets of the suite."""
    known = [d.name for d in datasets]
    for i, c in enumerate(configs):
        for name in c.datasets or ():
            if known and name not in known:
                problems.append(f"{where}: configs[{i}].datasets: no data set {name!r} in this suite "
                                f"(data sets: {', '.join(known)})")


def _datasets(top: TopBlock, where: str, base: Path, problems: list[str]) -> list[DatasetSpec]:
    datasets: list[DatasetSpec] = []
    for i, raw in enumerate(top.get("datasets") or []):
        try:
            datasets.append(DatasetSpec.from_mapping(raw, f"{where}: datasets[{i}]", base))
        except SuiteError as err:
            problems.append(str(err))
    dnames = [d.name for d in datasets]
    for dup in sorted({n for n in dnames if dnames.count(n) > 1}):
        problems.append(f"{where}: datasets: name {dup!r} used more than once")
    if isinstance(top.get("datasets"), list) and not top["datasets"]:
        problems.append(f"{where}.datasets: at least one data set is needed")
    return datasets


def _load(lraw: LoadBlock, datasets: list[DatasetSpec], base: Path, where: str, problems: list[str]) -> LoadSpec:
    """The checked ``load:`` block as a ``LoadSpec`` (a tiktoken file relative to the suite's folder ``base``)."""
    load_kwargs: dict[str, Any] = {k: v for k, v in lraw.items() if k not in ("concurrency", "request_rate", "slo",
                                                                                "max_rate_at_slo", "grade", "arrival", "workload")}
    if "concurrency" in lraw:
        conc = positive_list(lraw["concurrency"], int, f"{where}: load.concurrency", problems, 1, MAX_CONCURRENCY)
        if conc:
            load_kwargs["concurrency"] = conc
    if "request_rate" in lraw:
        rate = positive_list(lraw["request_rate"], float, f"{where}: load.request_rate", problems, MIN_REQUEST_RATE, MAX_REQUEST_RATE)
        if rate:
            load_kwargs["request_rate"] = rate
    if "arrival" in lraw:
        load_kwargs.update(_arrival(lraw, base, where, problems))
    for key in ("max_tokens", "repeats"):
        if key in lraw and lraw[key] < 1:
            problems.append(f"{where}: load.{key}: expected a positive integer, got {lraw[key]}")
    for key, high in (("max_tokens", MAX_TOKENS), ("repeats", MAX_REPEATS), ("max_repeats", MAX_REPEATS),
                      ("temperature", MAX_TEMPERATURE), ("timeout_s", MAX_TIMEOUT_S),
                      ("client_processes", MAX_CLIENT_PROCESSES)):
        at_most(lraw.get(key), high, f"{where}: load.{key}", problems)
    if "top_p" in lraw and not 0 < lraw["top_p"] <= 1:
        problems.append(f"{where}: load.top_p: expected a number above 0 and at most 1, got {lraw['top_p']}")
    if "warmup" in lraw:
        check_warmup(lraw["warmup"], f"{where}: load.warmup", problems)
    if "warmup_max_passes" in lraw and not 1 <= lraw["warmup_max_passes"] <= MAX_WARMUP_PASSES:
        problems.append(f"{where}: load.warmup_max_passes: expected 1-{MAX_WARMUP_PASSES}, got {lraw['warmup_max_passes']}")
    cp = lraw.get("client_processes")
    if cp is not None and (cp != "auto" if isinstance(cp, str) else cp < 1):
        problems.append(f"{where}: load.client_processes: expected a positive integer or \"auto\", got {cp!r}")
    if "client" in lraw and lraw["client"] not in CLIENTS:
        problems.append(f"{where}: load.client: expected one of {', '.join(CLIENTS)}, got {lraw['client']!r}")
    if lraw.get("prefix_cache", "keep") not in PREFIX_CACHE_MODES:
        problems.append(f"{where}: load.prefix_cache: expected one of {', '.join(PREFIX_CACHE_MODES)}, got "
                        f"{lraw.get('prefix_cache')!r}")
    if "workload" in lraw:
        load_kwargs.update(parse_workload(lraw["workload"], f"{where}: load.workload", problems))
    if "temperature" in lraw and lraw["temperature"] < 0:
        problems.append(f"{where}: load.temperature: expected 0 or more, got {lraw['temperature']}")
    if "timeout_s" in lraw and lraw["timeout_s"] <= 0:
        problems.append(f"{where}: load.timeout_s: expected a positive number, got {lraw['timeout_s']}")
    for key in ("temperature", "top_p", "timeout_s"):
        if key in load_kwargs and load_kwargs[key] is not None:
            load_kwargs[key] = float(load_kwargs[key])
    if "slo" in lraw:
        load_kwargs["slo"] = parse_slo(lraw["slo"], f"{where}: load.slo", problems)
    if "max_rate_at_slo" in lraw:
        load_kwargs["rate_search"] = parse_search(lraw["max_rate_at_slo"], f"{where}: load.max_rate_at_slo", problems)
        if "slo" not in lraw:
            problems.append(f"{where}: load.max_rate_at_slo: needs load.slo (the bounds the rate must meet)")
    if "grade" in lraw:
        load_kwargs["grade"] = parse_grade(lraw["grade"], datasets, f"{where}: load.grade", problems)
    target_ci = _repeat_keys(lraw, where, problems)
    if target_ci is not None:
        load_kwargs["target_ci"] = target_ci
    if "tiktoken_file" in lraw:
        load_kwargs["tiktoken_file"] = str((base / os.path.expanduser(lraw["tiktoken_file"])).resolve())
        if not os.path.isfile(load_kwargs["tiktoken_file"]):
            problems.append(f"{where}: load.tiktoken_file: file not found: {load_kwargs['tiktoken_file']}")
    return LoadSpec(**load_kwargs)


def _arrival(lraw: LoadBlock, base: Path, where: str, problems: list[str]) -> dict[str, Any]:
    """``load.arrival`` and, for a ramp or a trace, the one rate it gives its cell (``load.request_rate`` is then
    not the user's to give); gamma needs the mean rate from ``load.request_rate``."""
    arrival = parse_arrival(lraw["arrival"], base, where, problems)
    out: dict[str, Any] = {"arrival": arrival}
    if arrival.kind in ("ramp", "trace"):
        if "request_rate" in lraw:
            problems.append(f"{where}: load.request_rate: not with load.arrival {arrival.kind}: the "
                            f"{'ramp' if arrival.kind == 'ramp' else 'trace'}'s own rate is the cell's load point")
        if arrival.own_rate is not None:
            out["request_rate"] = (arrival.own_rate,)
    elif arrival.kind == "gamma" and "request_rate" not in lraw:
        problems.append(f"{where}: load.arrival: gamma arrivals need load.request_rate (their mean rate)")
    return out


def _repeat_keys(lraw: LoadBlock, where: str, problems: list[str]) -> float | None:
    """``restart``, ``target_ci`` (3% or 0.03) and ``max_repeats``: adaptive repeats run in rounds of
    fresh servers (docs/measurement.md), so a target needs ``restart`` and a cap at or above the first stage.
    The target, when it is one."""
    target_ci = None
    if "target_ci" in lraw:
        raw = lraw["target_ci"]
        text = raw.strip() if isinstance(raw, str) else None
        try:
            value = float(text[:-1]) / 100 if text is not None and text.endswith("%") else float(raw)
        except ValueError:
            value = math.nan
        if not 0 < value < 1:
            problems.append(f"{where}: load.target_ci: expected a relative half-width such as 3% or 0.03, got {raw!r}")
        elif not MIN_TARGET_CI <= value <= MAX_TARGET_CI:  # 1e-320 underflows Stein's plan; 90 % is no target
            problems.append(f"{where}: load.target_ci: expected from {MIN_TARGET_CI:.1%} to {MAX_TARGET_CI:.0%}, got {raw!r}")
        else:
            target_ci = value
        if not lraw.get("restart"):
            problems.append(f"{where}: load.target_ci: needs load.restart: true (adaptive repeats run in rounds of fresh servers)")
        if "max_repeats" not in lraw:
            problems.append(f"{where}: load.target_ci: needs load.max_repeats (the most repeats it may add)")
    if "max_repeats" in lraw:
        first = max(lraw.get("repeats", 1), MIN_ADAPTIVE_REPEATS)
        if "target_ci" not in lraw:
            problems.append(f"{where}: load.max_repeats: only with load.target_ci (the cap of adaptive repeats)")
        elif lraw["max_repeats"] < first:
            problems.append(f"{where}: load.max_repeats: expected at least {first} (the first stage: load.repeats, "
                            f"and never fewer than {MIN_ADAPTIVE_REPEATS}), got {lraw['max_repeats']}")
    return target_ci


def _server(top: TopBlock, where: str, problems: list[str]) -> LaunchSettings:
    sraw = cast(ServerBlock, check_keys(top.get("server", {}), SERVER_KEYS, f"{where}: server", problems))
    if "gpus_per_server" in sraw and sraw["gpus_per_server"] < 0:
        problems.append(f"{where}: server.gpus_per_server: expected 0 or more, got {sraw['gpus_per_server']}")
    at_most(sraw.get("gpus_per_server"), MAX_GPUS_PER_SERVER, f"{where}: server.gpus_per_server", problems)
    if "startup_timeout_s" in sraw and sraw["startup_timeout_s"] <= 0:
        problems.append(f"{where}: server.startup_timeout_s: expected a positive number, got {sraw['startup_timeout_s']}")
    at_most(sraw.get("startup_timeout_s"), MAX_TIMEOUT_S, f"{where}: server.startup_timeout_s", problems)
    if "load_format" in sraw:
        check_load_format(sraw["load_format"], f"{where}: server.load_format", problems)
    if "steplog" in sraw:
        check_steplog(sraw["steplog"], f"{where}: server.steplog", problems)
    return LaunchSettings(
        model_path=sraw.get("model_path"), python=sraw.get("python"),
        args=tuple(str(a) for a in sraw.get("args", [])),
        env={str(k): str(v) for k, v in sraw.get("env", {}).items()},
        startup_timeout_s=float(sraw.get("startup_timeout_s", 900.0)), host=sraw.get("host", "127.0.0.1"),
        gpus_per_server=sraw.get("gpus_per_server", 1), load_format=sraw.get("load_format", "auto"),
        steplog=sraw.get("steplog", "off"),
    )


def _urls_against_settings(top: TopBlock, lraw: LoadBlock, configs: list[ServerConfig], where: str,
                           problems: list[str]) -> None:
    """Config URLs that contradict suite-wide settings (credentials twice, https over the socket client)."""
    if top.get("api_key_env"):
        for i, cfg in enumerate(configs):
            if cfg.url and urlparse(cfg.url).netloc.rpartition("@")[0]:
                problems.append(f"{where}: configs[{i}].url: has credentials (user@) and api_key_env is set; both would be "
                                "the Authorization header: use one")
    if lraw.get("restart"):
        for i, cfg in enumerate(configs):
            if cfg.url:
                problems.append(f"{where}: configs[{i}].url: load.restart starts a fresh server per repeat; "
                                f"config {cfg.name!r} is reached by URL, not launched")
                break
    for i, cfg in enumerate(configs):
        if (cfg.warmup if cfg.warmup is not None else lraw.get("warmup")) == "steady" and cfg.steplog == "off":
            problems.append(f"{where}: configs[{i}]: warmup steady needs the step log, which sees the one-time events "
                            f"(server.steplog or this config's steplog: steps or timing; config {cfg.name!r} has none)")
    if lraw.get("restart") and "max_rate_at_slo" in lraw:
        problems.append(f"{where}: load.restart: cannot be combined with load.max_rate_at_slo (its search runs on one server)")
    if lraw.get("client") == "socket":
        for cfg in configs:
            if cfg.url and not cfg.url.startswith("http://"):
                problems.append(f"{where}: load.client: socket speaks plain http:// only; "
                                f"config {cfg.name!r} has url {redact_url(cfg.url)!r} (use auto or aiohttp)")


def read_suite(path: str | Path) -> Suite:
    """Read and validate a suite file."""
    path = Path(path)
    return parse_suite(read_yaml(path), path)


#: the flags that cap a launched server's context: vLLM's, SGLang's
CONTEXT_FLAGS = ("--max-model-len", "--context-length")


def context_flag(args: tuple[str, ...]) -> tuple[str, int] | None:
    """(flag, tokens) of the last context cap in a server's argv (``--flag N`` or ``--flag=N``), if any."""
    found = None
    for i, arg in enumerate(args):
        flag, _, value = arg.partition("=")
        if flag in CONTEXT_FLAGS:
            value = value if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            found = (flag, int(value)) if value.isdigit() else found
    return found


def _contexts_hold_datasets(top: TopBlock, configs: list[ServerConfig], server: LaunchSettings,
                            datasets: list[DatasetSpec], max_tokens: int, where: str, problems: list[str]) -> None:
    """What can be known before any server starts: a data set whose key makes every prompt longer (in
    o200k_base tokens, with ``load.max_tokens``) than a launched config's context cap. A server's own
    limit (its model's, or one it reports) is the server's to enforce: such a request fails with its message."""
    entries = top.get("datasets")
    raw = [r if isinstance(r, dict) else {"name": r} for r in entries] if isinstance(entries, list) else []
    for c in configs:
        cap = context_flag((*server.args, *c.args)) if c.launched else None
        for d in datasets:
            least = d.least_tokens
            if cap is None or least is None or not c.runs_on(d.name) or least[1] + max_tokens <= cap[1]:
                continue
            i = next((n for n, r in enumerate(raw) if r.get("name") == d.name), 0)
            problems.append(f"{where}: datasets[{i}].{least[0]}: {least[1]} tokens + load.max_tokens {max_tokens} "
                            f"exceed config {c.name!r}'s context ({cap[0]} {cap[1]})")

