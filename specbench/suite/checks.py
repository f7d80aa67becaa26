"""Suite validation pieces: the allowed keys and types of each block, and the checks every block
shares. Each appends one line per problem (naming the file and key) instead of raising, so a suite
reports all its problems at once."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypedDict
from urllib.parse import urlparse

from ..hooks import STEPLOG_LEVELS  # the engine step log a launched server writes (docs/steplog.md)
from ..schemas.profile_file import MAX_K
from ..util.redact import redact_url

NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
ENDPOINTS = ("chat", "completions")

TOP_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str, "model": str, "endpoint": str, "engine": str, "configs": list, "datasets": list,
    "load": dict, "server": dict, "data_dir": str, "api_key_env": str, "gate": dict, "description": str,
    "cost": dict,
}
CONFIG_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str, "url": str, "method": str, "num_speculative_tokens": int, "drafter": str,
    "speculative": dict, "baseline": bool, "engine": str, "args": list, "env": dict, "port": int,
    "gpus": (str, int), "load_format": str, "datasets": list, "steplog": str, "warmup": (int, str),
}
LOAD_KEYS: dict[str, type | tuple[type, ...]] = {
    "concurrency": (int, list), "request_rate": (int, float, list), "max_tokens": int,
    "temperature": (int, float), "top_p": (int, float), "ignore_eos": bool, "warmup": (int, str),
    "repeats": int, "timeout_s": (int, float), "seed": int, "extra_body": dict, "workload": (str, dict),
    "client_processes": (int, str), "client": str, "slo": dict, "max_rate_at_slo": (str, int, float, dict),
    "grade": (bool, list), "tiktoken_file": str, "restart": bool, "target_ci": (int, float, str), "max_repeats": int,
    "warmup_max_passes": int, "arrival": (str, dict), "prefix_cache": str,
}

class TopBlock(TypedDict, total=False):
    """A suite file's top level once ``check_keys`` kept the keys of ``TOP_KEYS`` of their types."""

    name: str
    model: str
    endpoint: str
    engine: str
    configs: list[Any]
    datasets: list[Any]
    load: dict[Any, Any]
    server: dict[Any, Any]
    data_dir: str
    api_key_env: str
    gate: dict[Any, Any]
    description: str
    cost: dict[Any, Any]


class ConfigBlock(TypedDict, total=False):
    """One ``configs:`` entry, checked against ``CONFIG_KEYS``."""

    name: str
    url: str
    method: str
    num_speculative_tokens: int
    drafter: str
    speculative: dict[Any, Any]
    baseline: bool
    engine: str
    args: list[Any]
    env: dict[Any, Any]
    port: int
    gpus: str | int
    load_format: str
    datasets: list[Any]
    steplog: str
    warmup: int | str


class LoadBlock(TypedDict, total=False):
    """The ``load:`` block, checked against ``LOAD_KEYS``."""

    concurrency: int | list[Any]
    request_rate: float | list[Any]
    max_tokens: int
    temperature: float
    top_p: float
    ignore_eos: bool
    warmup: int | str
    repeats: int
    timeout_s: float
    seed: int
    extra_body: dict[Any, Any]
    workload: str | dict[Any, Any]
    client_processes: int | str
    client: str
    slo: dict[Any, Any]
    max_rate_at_slo: str | float | dict[Any, Any]
    grade: bool | list[Any]
    tiktoken_file: str
    restart: bool
    target_ci: float | str
    max_repeats: int
    warmup_max_passes: int
    arrival: str | dict[Any, Any]
    prefix_cache: str


class ServerBlock(TypedDict, total=False):
    """The ``server:`` block, checked against ``SERVER_KEYS``."""

    model_path: str
    python: str
    args: list[Any]
    env: dict[Any, Any]
    startup_timeout_s: float
    host: str
    gpus_per_server: int
    load_format: str
    steplog: str

#: The bounds of a suite's numbers beyond their meaning (a count ≥ 1, a rate > 0 …, checked in parse.py): past
#: them a value is a typo or a hostile file, and would make a run unbounded (millions of repeats or streams), a
#: pass that never ends (one request per 10¹⁰ s) or a number that overflows a timer. docs/suites.md lists them.
MAX_SPECULATIVE_TOKENS = MAX_K  # the profile file's own bound on k
MAX_CONCURRENCY = 65_536  # streams in flight: the TCP ports one client host has towards one server
MIN_REQUEST_RATE, MAX_REQUEST_RATE = 0.001, 100_000.0  # req/s: one request per 1000 s … 10⁵ per second
MAX_TOKENS = 10_000_000
MAX_TEMPERATURE = 100.0
MAX_WARMUP = 100_000  # warm-up requests before a pass
MAX_REPEATS = 1_000  # timed passes per cell, adaptive cap included
MIN_TARGET_CI, MAX_TARGET_CI = 0.001, 0.5  # the speedup CI's relative half-width: 0.1 % … 50 %
MAX_TIMEOUT_S = 86_400.0  # a request's, a server start's: one day
MAX_CLIENT_PROCESSES = 1_024
MAX_GPUS_PER_SERVER = 1_024
MAX_SLO_MS = 86_400_000.0  # one day
MAX_GPU_HOUR_USD = 10_000.0

WORKLOADS = ("fixed", "profilings")
#: the keys of the mapping form of ``load.workload``: per_stream × C prompts per load point, at least at_least
PER_STREAM_KEYS = ("per_stream", "at_least")
MAX_PER_STREAM = 10_000
CLIENTS = ("auto", "socket", "aiohttp", "openai")
SERVER_KEYS: dict[str, type | tuple[type, ...]] = {
    "model_path": str, "python": str, "args": list, "env": dict, "startup_timeout_s": (int, float),
    "host": str, "gpus_per_server": int, "load_format": str, "steplog": str,
}
#: how a launched server fills the target's weights: ``auto`` (the engine's default: from the model folder)
#: or ``dummy`` (at random from config.json alone; the engines spell both ``--load-format``)
LOAD_FORMATS = ("auto", "dummy")


def _type_name(t: type | tuple[type, ...]) -> str:
    names = [x.__name__ for x in (t if isinstance(t, tuple) else (t,))]
    return {"str": "a string", "int": "an integer", "float": "a number", "bool": "true/false",
            "list": "a list", "dict": "a mapping"}.get(names[0], names[0]) if len(names) == 1 else " or ".join(names)


def check_keys(data: Any, schema: Mapping[str, type | tuple[type, ...]], where: str, problems: list[str]) -> dict[str, Any]:
    """The keys of the block ``data`` that ``schema`` allows, each of its type (a YAML block as read: its
    values are the schema's types, per key); one line per other key."""
    if not isinstance(data, dict):
        problems.append(f"{where}: expected a mapping, got {type(data).__name__}")
        return {}
    clean: dict[str, Any] = {}
    for key, value in data.items():
        if key not in schema:
            problems.append(f"{where}.{key}: unknown key (allowed: {', '.join(sorted(schema))})")
            continue
        expected = schema[key]
        types = expected if isinstance(expected, tuple) else (expected,)
        if isinstance(value, bool) and bool not in types:
            problems.append(f"{where}.{key}: expected {_type_name(expected)}, got {value!r}")
            continue
        if not isinstance(value, types):
            problems.append(f"{where}.{key}: expected {_type_name(expected)}, got {value!r}")
            continue
        clean[key] = value
    return clean


def positive_list(value: Any, kind: type, where: str, problems: list[str], low: float = 0, high: float = math.inf) -> tuple | None:
    """A positive number (``kind`` int or float) or a list of them, each in [``low``, ``high``] too."""
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int) or v <= 0 for v in items):
        problems.append(f"{where}: expected a positive {'number' if kind is float else 'integer'} or a list of them, got {value!r}")
        return None
    outside = [v for v in items if not low <= v <= high]
    if outside:
        problems.append(f"{where}: expected each from {shown(low)} to {shown(high)}, got {outside[0]!r}")
        return None
    return tuple(kind(v) for v in items)


def shown(number: float) -> str:
    """A bound as an error line writes it: 100000, 0.001, never 1e+05."""
    return f"{int(number)}" if float(number).is_integer() else f"{number:g}"


def at_most(value: Any, high: float, where: str, problems: list[str]) -> None:
    """A number above its bound (``high``) is one line; anything else is checked with its meaning."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > high:
        problems.append(f"{where}: expected at most {shown(high)}, got {value!r}")


def check_url(url: str, where: str, problems: list[str]) -> None:
    shown = redact_url(url)
    try:
        parsed = urlparse(url)
        host = parsed.hostname
    except ValueError as err:
        problems.append(f"{where}: not a valid URL ({err}): {shown!r}")
        return
    if parsed.scheme not in ("http", "https") or not host:
        problems.append(f"{where}: not an http(s) URL: {shown!r}")
        return
    try:
        _ = parsed.port  # urllib checks the port only when asked
    except ValueError:
        problems.append(f"{where}: bad port in URL {shown!r}")


def check_load_format(value: Any, where: str, problems: list[str]) -> None:
    if value not in LOAD_FORMATS:
        problems.append(f"{where}: expected one of {', '.join(LOAD_FORMATS)}, got {value!r}")


#: ``load.prefix_cache``: ``keep`` the server's prefix cache across passes, or ``reset`` it after each warm-up,
#: right before each timed pass (run/prefix_reset.py)
PREFIX_CACHE_MODES = ("keep", "reset")
WARMUP_MODES = ("pass", "steady")
MAX_WARMUP_PASSES = 50


def check_warmup(value: int | str, where: str, problems: list[str]) -> None:
    """``warmup``: a count of requests, ``pass`` (one full matching pass) or ``steady`` (passes until the step log
    sees no one-time event in a whole one; docs/suites.md)."""
    if value not in WARMUP_MODES if isinstance(value, str) else not 0 <= value <= MAX_WARMUP:
        problems.append(f"{where}: expected 0-{MAX_WARMUP} requests, \"pass\" or \"steady\", got {value!r}")


def check_steplog(value: Any, where: str, problems: list[str]) -> None:
    if value not in STEPLOG_LEVELS:
        problems.append(f"{where}: expected one of {', '.join(STEPLOG_LEVELS)}, got {value!r}")


def check_name(value: Any, where: str, problems: list[str]) -> None:
    """Names become file and directory names (logs/<config>.log, results/<suite>-<time>/): keep them plain."""
    if isinstance(value, str) and not NAME_RE.fullmatch(value):
        problems.append(f"{where}: {value!r} is not a usable name: use 1-64 letters, digits, '.', '_' or '-', "
                        "not starting with '.'")


def non_finite(data: Any, where: str, problems: list[str]) -> None:
    """NaN and ±inf are never a meaningful setting (YAML spells them .nan / .inf)."""
    if isinstance(data, float) and not math.isfinite(data):
        problems.append(f"{where}: expected a finite number, got {data!r}")
    elif isinstance(data, dict):
        for k, v in data.items():
            non_finite(v, f"{where}.{k}" if where else str(k), problems)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            non_finite(v, f"{where}[{i}]", problems)


def parse_workload(raw: object, where: str, problems: list[str]) -> dict[str, object]:
    """``load.workload``: ``fixed``, ``profilings``, or ``{per_stream: K, at_least: M}`` (K × C prompts per load
    point, at least M, at most the set's): a sweep where every load point runs a set number of waves, so a long
    prompt at C=1 is not sent as often as at C=64."""
    if isinstance(raw, str):
        if raw not in WORKLOADS:
            problems.append(f"{where}: expected one of {', '.join(WORKLOADS)} or {{per_stream: K, at_least: M}}, got {raw!r}")
            return {}
        return {"workload": raw}
    assert isinstance(raw, dict)
    unknown = [k for k in raw if k not in PER_STREAM_KEYS]
    if unknown:
        problems.append(f"{where}.{unknown[0]}: unknown key (expected {', '.join(PER_STREAM_KEYS)})")
        return {}
    out: dict[str, object] = {"workload": "per_stream"}
    for key, default in (("per_stream", None), ("at_least", 1)):
        value = raw.get(key, default)
        if value is None:
            problems.append(f"{where}.{key}: required (prompts per stream at each load point)")
        elif isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PER_STREAM:
            problems.append(f"{where}.{key}: expected an integer 1-{MAX_PER_STREAM}, got {value!r}")
        else:
            out[key] = value
    return out if len(out) == 3 else {}
