"""Suite files: YAML → validated, typed ``Suite``.

Every problem is reported before anything runs, one line each, naming the file and the key.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from .datasets import DatasetSpec
from .errors import SuiteError
from .secrets import redact_mapping, redact_url

ENDPOINTS = ("chat", "completions")


@dataclass(frozen=True)
class ServerConfig:
    """One column of the comparison: a server at a URL, or one specbench launches."""

    name: str
    url: str | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    drafter: str | None = None
    speculative: dict[str, Any] = field(default_factory=dict)
    baseline: bool = False
    engine: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    gpus: str | None = None

    @property
    def launched(self) -> bool:
        return self.url is None

    @property
    def label_method(self) -> str:
        return self.method or "baseline"


@dataclass(frozen=True)
class LoadSpec:
    """How hard and how long each config × data set cell is driven."""

    concurrency: tuple[int, ...] = (1,)
    request_rate: tuple[float, ...] | None = None
    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float | None = None
    ignore_eos: bool = False
    warmup: int | str = 2  # requests before each timed pass, or "pass": a full matching warm pass
    repeats: int = 1
    timeout_s: float = 600.0
    seed: int = 0
    extra_body: dict[str, Any] = field(default_factory=dict)
    workload: str = "fixed"
    client_processes: int | str = 1  # load-generator processes; "auto": one per 256 streams, up to the cores
    client: str = "auto"  # "socket": kernel-stamped reads (http:// only); "aiohttp"; "auto": socket unless https
    slo: Any = None  # slo.Slo: latency bounds → slo_attainment, goodput_rps
    rate_search: Any = None  # slo.RateSearch: --max-rate-at-slo
    grade: tuple[str, ...] = ()  # data sets whose answers are graded (grade/)

    def processes_at(self, concurrency: int) -> int:
        if self.client_processes == "auto":
            import os

            return max(1, min(os.cpu_count() or 1, -(-concurrency // 256)))
        return int(self.client_processes)

    def prompts_at(self, concurrency: int, available: int) -> int:
        """Prompts per load point: all of the data set's (fixed), or the profilings sizes
        (22/88/128/220/440/880 at C=1/8/32/64/128/256, else 4 per stream and at least 22)."""
        if self.workload != "profilings":
            return available
        sizes = {1: 22, 8: 88, 32: 128, 64: 220, 128: 440, 256: 880}
        return min(available, sizes.get(concurrency, max(22, 4 * concurrency)))


@dataclass(frozen=True)
class ServerSpec:
    """Settings shared by every launched server of a suite."""

    model_path: str | None = None
    python: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout_s: float = 900.0
    host: str = "127.0.0.1"
    gpus_per_server: int = 1


@dataclass(frozen=True)
class Suite:
    name: str
    model: str
    endpoint: str
    configs: tuple[ServerConfig, ...]
    datasets: tuple[DatasetSpec, ...]
    load: LoadSpec
    path: Path
    engine: str = "vllm"
    server: ServerSpec = field(default_factory=ServerSpec)
    data_dir: Path | None = None
    api_key_env: str | None = None
    gate: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    cost: Any = None  # telemetry.Cost: gpu_hour_usd → usd_per_million_output_tokens

    @property
    def baseline(self) -> ServerConfig | None:
        name = find_baseline([c.name for c in self.configs], [c.name for c in self.configs if c.baseline])
        return next((c for c in self.configs if c.name == name), None)

    def comparability(self) -> dict[str, Any]:
        """What must match between two runs for their numbers to be compared (resume, gate)."""
        return {
            "suite": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "max_tokens": self.load.max_tokens,
            "temperature": self.load.temperature,
            "top_p": self.load.top_p,
            "ignore_eos": self.load.ignore_eos,
            "warmup": self.load.warmup,
            "extra_body": redact_mapping(self.load.extra_body),
            "engine": self.engine,
            "model_path": self.server.model_path,
            "datasets": {d.name: _fingerprint(self.raw_dataset(d.name)) for d in self.datasets},
            "configs": {c.name: _fingerprint(redact_mapping(self.raw_config(c.name))) for c in self.configs},
        }

    def raw_dataset(self, name: str) -> dict[str, Any]:
        entries = [d if isinstance(d, dict) else {"name": d} for d in self.raw.get("datasets", [])]
        return next((d for d in entries if d.get("name") == name), {})

    def raw_config(self, name: str) -> dict[str, Any]:
        return next((c for c in self.raw.get("configs", []) if c.get("name") == name), {})


def find_baseline(names: list[str], marked: list[str]) -> str | None:
    """The baseline among configs ``names``: the one marked ``baseline: true``, else the one named "baseline".

    The one rule for the suite, the report (from meta.json) and everything that divides by the baseline."""
    marked = [m for m in marked if m in names]
    if marked:
        return marked[0]
    return "baseline" if "baseline" in names else None


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


# --- validation -------------------------------------------------------------------------------

_TOP = {
    "name": str, "model": str, "endpoint": str, "engine": str, "configs": list, "datasets": list,
    "load": dict, "server": dict, "data_dir": str, "api_key_env": str, "gate": dict, "description": str,
    "cost": dict,
}
_CONFIG = {
    "name": str, "url": str, "method": str, "num_speculative_tokens": int, "drafter": str,
    "speculative": dict, "baseline": bool, "engine": str, "args": list, "env": dict, "port": int,
    "gpus": (str, int),
}
_LOAD = {
    "concurrency": (int, list), "request_rate": (int, float, list), "max_tokens": int,
    "temperature": (int, float), "top_p": (int, float), "ignore_eos": bool, "warmup": (int, str),
    "repeats": int, "timeout_s": (int, float), "seed": int, "extra_body": dict, "workload": str,
    "client_processes": (int, str), "client": str, "slo": dict, "max_rate_at_slo": (str, int, float, dict),
    "grade": (bool, list),
}
WORKLOADS = ("fixed", "profilings")
CLIENTS = ("auto", "socket", "aiohttp")
_SERVER = {
    "model_path": str, "python": str, "args": list, "env": dict, "startup_timeout_s": (int, float),
    "host": str, "gpus_per_server": int,
}


def _type_name(t: type | tuple[type, ...]) -> str:
    names = [x.__name__ for x in (t if isinstance(t, tuple) else (t,))]
    return {"str": "a string", "int": "an integer", "float": "a number", "bool": "true/false",
            "list": "a list", "dict": "a mapping"}.get(names[0], names[0]) if len(names) == 1 else " or ".join(names)


def _check_keys(data: Any, schema: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
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


def _positive_list(value: Any, kind: type, where: str, problems: list[str]) -> tuple | None:
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int) or v <= 0 for v in items):
        problems.append(f"{where}: expected a positive {'number' if kind is float else 'integer'} or a list of them, got {value!r}")
        return None
    return tuple(kind(v) for v in items)


def _check_url(url: str, where: str, problems: list[str]) -> None:
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


def _check_name(value: Any, where: str, problems: list[str]) -> None:
    """Names become file and directory names (logs/<config>.log, results/<suite>-<time>/): keep them plain."""
    if isinstance(value, str) and not NAME_RE.fullmatch(value):
        problems.append(f"{where}: {value!r} is not a usable name: use 1-64 letters, digits, '.', '_' or '-', "
                        "not starting with '.'")


def _non_finite(data: Any, where: str, problems: list[str]) -> None:
    """NaN and ±inf are never a meaningful setting (YAML spells them .nan / .inf)."""
    if isinstance(data, float) and not math.isfinite(data):
        problems.append(f"{where}: expected a finite number, got {data!r}")
    elif isinstance(data, dict):
        for k, v in data.items():
            _non_finite(v, f"{where}.{k}" if where else str(k), problems)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _non_finite(v, f"{where}[{i}]", problems)


def parse_suite(data: Any, path: Path) -> Suite:
    """Validate a suite mapping; raise one ``SuiteError`` listing every problem, one per line."""
    problems: list[str] = []
    where = str(path)
    non_finite: list[str] = []
    _non_finite(data, "", non_finite)
    if non_finite:
        raise SuiteError("\n".join(f"{where}: {p}" for p in non_finite))
    top = _check_keys(data, _TOP, where, problems)
    if "name" in top:
        _check_name(top["name"], f"{where}.name", problems)
    for key in ("name", "model", "configs", "datasets"):
        if key not in top and isinstance(data, dict) and key not in data:
            problems.append(f"{where}.{key}: required key missing")
    endpoint = top.get("endpoint", "chat")
    if endpoint not in ENDPOINTS:
        problems.append(f"{where}.endpoint: expected one of {', '.join(ENDPOINTS)}, got {endpoint!r}")

    base = path.parent
    configs: list[ServerConfig] = []
    for i, raw in enumerate(top.get("configs") or []):
        cwhere = f"{where}: configs[{i}]"
        c = _check_keys(raw, _CONFIG, cwhere, problems)
        if "name" not in c:
            problems.append(f"{cwhere}.name: required key missing")
            continue
        _check_name(c["name"], f"{cwhere}.name", problems)
        if "url" in c:
            _check_url(c["url"], f"{cwhere}.url", problems)
        if "port" in c and not 0 < c["port"] < 65536:
            problems.append(f"{cwhere}.port: expected 1-65535, got {c['port']}")
        k = c.get("num_speculative_tokens")
        if k is not None and k < 1:
            problems.append(f"{cwhere}.num_speculative_tokens: expected a positive integer, got {k}")
        if k is not None and not c.get("method"):
            problems.append(f"{cwhere}.method: required when num_speculative_tokens is given")
        configs.append(ServerConfig(
            name=c["name"], url=c.get("url", "").rstrip("/") or None, method=c.get("method"),
            num_speculative_tokens=k, drafter=c.get("drafter"), speculative=dict(c.get("speculative", {})),
            baseline=c.get("baseline", False), engine=c.get("engine"),
            args=tuple(str(a) for a in c.get("args", [])), env={str(k2): str(v) for k2, v in c.get("env", {}).items()},
            port=c.get("port"), gpus=str(c["gpus"]) if "gpus" in c else None,
        ))
    names = [c.name for c in configs]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{where}: configs: name {dup!r} used more than once")
    marked = [c.name for c in configs if c.baseline]
    if len(marked) > 1:
        problems.append(f"{where}: configs: baseline: true on more than one config ({', '.join(marked)})")
    if isinstance(top.get("configs"), list) and not top["configs"]:
        problems.append(f"{where}.configs: at least one config is needed")

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

    lraw = _check_keys(top.get("load", {}), _LOAD, f"{where}: load", problems)
    load_kwargs: dict[str, Any] = {k: v for k, v in lraw.items() if k not in ("concurrency", "request_rate", "slo",
                                                                                "max_rate_at_slo", "grade")}
    if "concurrency" in lraw:
        conc = _positive_list(lraw["concurrency"], int, f"{where}: load.concurrency", problems)
        if conc:
            load_kwargs["concurrency"] = conc
    if "request_rate" in lraw:
        rate = _positive_list(lraw["request_rate"], float, f"{where}: load.request_rate", problems)
        if rate:
            load_kwargs["request_rate"] = rate
    for key in ("max_tokens", "repeats"):
        if key in lraw and lraw[key] < 1:
            problems.append(f"{where}: load.{key}: expected a positive integer, got {lraw[key]}")
    if "warmup" in lraw and (lraw["warmup"] != "pass" if isinstance(lraw["warmup"], str) else lraw["warmup"] < 0):
        problems.append(f"{where}: load.warmup: expected 0 or more requests, or \"pass\", got {lraw['warmup']!r}")
    cp = lraw.get("client_processes")
    if cp is not None and (cp != "auto" if isinstance(cp, str) else cp < 1):
        problems.append(f"{where}: load.client_processes: expected a positive integer or \"auto\", got {cp!r}")
    if "client" in lraw and lraw["client"] not in CLIENTS:
        problems.append(f"{where}: load.client: expected one of {', '.join(CLIENTS)}, got {lraw['client']!r}")
    if "workload" in lraw and lraw["workload"] not in WORKLOADS:
        problems.append(f"{where}: load.workload: expected one of {', '.join(WORKLOADS)}, got {lraw['workload']!r}")
    if "temperature" in lraw and lraw["temperature"] < 0:
        problems.append(f"{where}: load.temperature: expected 0 or more, got {lraw['temperature']}")
    if "timeout_s" in lraw and lraw["timeout_s"] <= 0:
        problems.append(f"{where}: load.timeout_s: expected a positive number, got {lraw['timeout_s']}")
    for key in ("temperature", "top_p", "timeout_s"):
        if key in load_kwargs and load_kwargs[key] is not None:
            load_kwargs[key] = float(load_kwargs[key])
    from .grade import parse_grade
    from .slo import parse_search, parse_slo

    if "slo" in lraw:
        load_kwargs["slo"] = parse_slo(lraw["slo"], f"{where}: load.slo", problems)
    if "max_rate_at_slo" in lraw:
        load_kwargs["rate_search"] = parse_search(lraw["max_rate_at_slo"], f"{where}: load.max_rate_at_slo", problems)
        if "slo" not in lraw:
            problems.append(f"{where}: load.max_rate_at_slo: needs load.slo (the bounds the rate must meet)")
    if "grade" in lraw:
        load_kwargs["grade"] = parse_grade(lraw["grade"], datasets, f"{where}: load.grade", problems)

    sraw = _check_keys(top.get("server", {}), _SERVER, f"{where}: server", problems)
    if "gpus_per_server" in sraw and sraw["gpus_per_server"] < 0:
        problems.append(f"{where}: server.gpus_per_server: expected 0 or more, got {sraw['gpus_per_server']}")
    server = ServerSpec(
        model_path=sraw.get("model_path"), python=sraw.get("python"),
        args=tuple(str(a) for a in sraw.get("args", [])),
        env={str(k): str(v) for k, v in sraw.get("env", {}).items()},
        startup_timeout_s=float(sraw.get("startup_timeout_s", 900.0)), host=sraw.get("host", "127.0.0.1"),
        gpus_per_server=sraw.get("gpus_per_server", 1),
    )

    data_dir = None
    if "data_dir" in top:
        data_dir = (base / os.path.expanduser(top["data_dir"])).resolve()
        if not data_dir.is_dir():
            problems.append(f"{where}.data_dir: directory not found: {data_dir}")

    if top.get("api_key_env"):
        for i, cfg in enumerate(configs):
            if cfg.url and urlparse(cfg.url).netloc.rpartition("@")[0]:
                problems.append(f"{where}: configs[{i}].url: has credentials (user@) and api_key_env is set; both would be "
                                "the Authorization header: use one")
    if lraw.get("client") == "socket":
        for cfg in configs:
            if cfg.url and not cfg.url.startswith("http://"):
                problems.append(f"{where}: load.client: socket speaks plain http:// only; "
                                f"config {cfg.name!r} has url {redact_url(cfg.url)!r} (use auto or aiohttp)")

    gate = top.get("gate")
    if gate is not None:
        try:
            from .gate import GateSpec

            GateSpec.from_mapping(gate, f"{where}: gate")
        except SuiteError as err:
            problems.append(str(err))

    cost = None
    if "cost" in top:
        from .telemetry import parse_cost

        cost = parse_cost(top["cost"], f"{where}: cost", problems)

    if problems:
        raise SuiteError("\n".join(problems))
    return Suite(
        name=top["name"], model=top["model"], endpoint=endpoint, configs=tuple(configs),
        datasets=tuple(datasets), load=LoadSpec(**load_kwargs), path=path,
        engine=top.get("engine", "vllm"), server=server, data_dir=data_dir,
        api_key_env=top.get("api_key_env"), gate=gate, raw=data, cost=cost,
    )


#: the most YAML nodes a suite may expand to through aliases (a few hundred is typical; an alias bomb is billions)
MAX_NODES = 100_000
NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _yaml_problem(err: yaml.YAMLError) -> tuple[str, str]:
    """(":LINE" or "", one-line reason) of a PyYAML error."""
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.reader.ReaderError):
        code = ord(err.character) if isinstance(err.character, str) else err.character
        return "", f"character #x{code:04x} at position {err.position} is not allowed in YAML (a binary file?)"
    line = f":{mark.line + 1}" if mark is not None else ""
    reason = getattr(err, "problem", None) or str(err).splitlines()[0]
    return line, str(reason).strip()


def _check_nodes(root: yaml.Node, path: Path) -> None:
    """Duplicate keys (any depth) and alias expansion, checked on the node graph before anything is
    built from it: an alias is a reference, so the expanded size is counted once per node."""
    size: dict[int, int] = {}
    active: set[int] = set()

    def walk(node: yaml.Node, where: str) -> int:
        key = id(node)
        if key in size:
            return size[key]
        if key in active:
            raise SuiteError(f"{path}:{node.start_mark.line + 1}: {where or 'document'}: an alias refers to itself (recursive YAML)")
        active.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE_TAG:
                    ident = (k.tag, k.value)
                    if ident in seen:
                        raise SuiteError(f"{path}:{k.start_mark.line + 1}: {_join(where, k.value)}: duplicate key "
                                         f"{k.value!r} (first on line {seen[ident]}); each key may appear once")
                    seen[ident] = k.start_mark.line + 1
                name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                total += walk(k, where) + walk(v, _join(where, name))
        elif isinstance(node, yaml.SequenceNode):
            total += sum(walk(v, f"{where}[{i}]") for i, v in enumerate(node.value))
        active.discard(key)
        size[key] = total
        if total > MAX_NODES:
            raise SuiteError(f"{path}: {where or 'document'}: expands to more than {MAX_NODES} YAML nodes "
                             "(through &anchor/*alias references); write the values out or use fewer aliases")
        return total

    walk(root, "")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else str(key)


def read_yaml(path: str | Path, what: str = "suite file") -> Any:
    """A YAML file as data, bounded: UTF-8 text only, no duplicate keys, no alias bomb, no
    recursion; every problem is one ``SuiteError`` line naming the file (and line)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: {what} not found") from None
    except OSError as err:
        raise SuiteError(f"{path}: cannot read {what}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SuiteError(f"{path}: not a UTF-8 text file (byte 0x{raw[err.start]:02x} at offset {err.start})") from None
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, path)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        line, reason = _yaml_problem(err)
        raise SuiteError(f"{path}{line}: not valid YAML: {reason}") from None
    except RecursionError:
        raise SuiteError(f"{path}: nested too deeply to be a suite") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file."""
    path = Path(path)
    return parse_suite(read_yaml(path), path)
