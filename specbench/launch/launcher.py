"""A launcher (``launchers/<engine>.yaml`` with its ``extends`` chain merged) as typed records: what
``engines.Engine`` reads of it, checked once, where the YAML enters.

A key a launcher may leave out reads as its default (None: absent); a key only launching needs
(``command``, ``ready``, the adapter's ``speculative`` flags) is asked for when it is used, so a
launcher that only reads servers at a URL may leave it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SuiteError


class _Block:
    """One mapping of a launcher file, and where it is, for one-line errors naming the key."""

    def __init__(self, data: object, where: str, key: str = "") -> None:
        self.where, self.prefix = where, f"{key}." if key else ""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise SuiteError(f"{where}: {key}: expected a mapping, got {data!r:.60}")
        self.data: Mapping[str, object] = data

    def wrong(self, key: str, expected: str) -> SuiteError:
        return SuiteError(f"{self.where}: {self.prefix}{key}: expected {expected}, got {self.data[key]!r:.60}")

    def block(self, key: str) -> _Block:
        return _Block(self.data.get(key), self.where, self.prefix + key)

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.data.get(key, default)
        if value is not None and not isinstance(value, str):
            raise self.wrong(key, "a string")
        return value

    def string(self, key: str, default: str) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise self.wrong(key, "a string")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        """A list, each item as text (argv pieces and names)."""
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.wrong(key, "a list")
        return tuple(str(x) for x in value)

    def mapping(self, key: str) -> Mapping[str, object]:
        return self.block(key).data


@dataclass(frozen=True)
class Speculative:
    """``speculative:``: how a config's method, drafter and k become flags (vLLM: one JSON flag; SGLang:
    separate flags, k spelled per method)."""

    needs_drafter: tuple[str, ...] = ()  # methods that need ``drafter:``
    flag: str | None = None  # vLLM's --speculative-config
    drafter_key: str | None = None
    k_key: str | None = None
    extra_flags: tuple[str, ...] = ()
    algorithm_flag: str | None = None  # SGLang's
    drafter_flag: str | None = None
    k_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # method (or "default") → argv templates
    synthetic_acceptance: bool | str | None = None  # declared: true, or why not (run.replay, run.whatif)


@dataclass(frozen=True)
class Metrics:
    """``metrics:``: the /metrics counters acceptance is read from (``measure.engine_counters``)."""

    counters: Mapping[str, str] = field(default_factory=dict)  # role ("drafts", "generation_tokens" …) → sample name
    acceptance_source: str = ""
    server_info_key: str | None = None  # SGLang's cumulative average in the version endpoint's JSON


#: how a prefix-cache reset's answer says it worked: ``success`` (vLLM: HTTP 200 with {"success": true|false}, false
#: while blocks are held) or ``status`` (SGLang: HTTP 200 flushed, 400 while requests run or wait)
RESET_ANSWERS = ("success", "status")


@dataclass(frozen=True)
class PrefixCacheReset:
    """``prefix_cache_reset:``: the endpoint ``load.prefix_cache: reset`` POSTs before each timed pass
    (``run/prefix_reset.py``), how its answer reads, and the env a launched server needs to have it."""

    path: str | None = None  # None: the engine has none (the suite's reset is refused when a server is reached)
    answer: str = "success"
    env: Mapping[str, str] = field(default_factory=dict)  # vLLM mounts it only with VLLM_SERVER_DEV_MODE=1

    @classmethod
    def of(cls, block: _Block) -> PrefixCacheReset:
        answer = block.string("answer", "success")
        if answer not in RESET_ANSWERS:
            raise block.wrong("answer", " or ".join(RESET_ANSWERS))
        return cls(block.text("path"), answer, {str(k): str(v) for k, v in block.mapping("env").items()})


@dataclass(frozen=True)
class Launcher:
    """One engine's launcher, merged and checked."""

    name: str
    adapter: str
    command: tuple[str, ...] | None = None  # argv templates: {python} {model_path} {model} {host} {port}
    args: tuple[str, ...] = ()
    default_port: int = 8000
    python: str = "python3"
    model_path: str | None = None
    prepare: str | None = None  # launch.prepare.PREPARATIONS
    env: Mapping[str, str] = field(default_factory=dict)
    gpu_env: str | None = None
    secret_flags: tuple[str, ...] = ()
    load_format_flag: str | None = None
    steplog_flags: tuple[str, ...] = ()
    measure_flags: tuple[str, ...] = ()  # bare flags the measurements need; added unless the suite passes them
    health_path: str | None = None
    models_path: str | None = None
    version_path: tuple[str, str] = ("/version", "version")
    speculative: Speculative = field(default_factory=Speculative)
    metrics: Metrics = field(default_factory=Metrics)
    request_extra: Mapping[str, object] = field(default_factory=dict)  # JSON merged into every request body
    prefix_cache_reset: PrefixCacheReset = field(default_factory=PrefixCacheReset)

    @classmethod
    def of(cls, data: Mapping[str, object], name: str, adapter: str, path: Path | None) -> Launcher:
        """The merged YAML ``data`` of launcher ``name`` (read from ``path``); a value of the wrong type is one line."""
        top = _Block(data, str(path))
        port = data.get("default_port", 8000)
        try:
            if isinstance(port, bool) or not isinstance(port, (int, float, str)):
                raise ValueError
            default_port = int(port)
        except ValueError:
            raise top.wrong("default_port", "a port number") from None
        ready, version, spec, metrics = top.block("ready"), top.block("version"), top.block("speculative"), top.block("metrics")
        synthetic = spec.data.get("synthetic_acceptance")
        counters, k_flags = metrics.block("counters"), spec.block("k_flags")
        return cls(
            name=top.string("name", name), adapter=adapter,
            command=top.texts("command") if "command" in data else None, args=top.texts("args"),
            default_port=default_port, python=top.string("python", "python3"),
            model_path=top.text("model_path"), prepare=top.text("prepare"),
            env={str(k): str(v) for k, v in top.mapping("env").items()}, gpu_env=top.text("gpu_env"),
            secret_flags=top.texts("secret_flags"), load_format_flag=top.text("load_format_flag"),
            steplog_flags=top.texts("steplog_flags"), measure_flags=top.texts("measure_flags"),
            health_path=ready.text("health"), models_path=ready.text("models"),
            version_path=(version.string("path", "/version"), version.string("key", "version")),
            speculative=Speculative(
                needs_drafter=spec.texts("needs_drafter"), flag=spec.text("flag"), drafter_key=spec.text("drafter_key"),
                k_key=spec.text("k_key"), extra_flags=spec.texts("extra_flags"), algorithm_flag=spec.text("algorithm_flag"),
                drafter_flag=spec.text("drafter_flag"),
                k_flags={str(k): k_flags.texts(str(k)) for k in k_flags.data},
                synthetic_acceptance=synthetic if isinstance(synthetic, (bool, str)) else None),
            metrics=Metrics(counters={str(k): counters.string(str(k), "") for k in counters.data},
                            acceptance_source=metrics.string("acceptance_source", ""),
                            server_info_key=metrics.block("server_info").text("key") if "server_info" in metrics.data else None),
            request_extra=top.mapping("request_extra"),
            prefix_cache_reset=PrefixCacheReset.of(top.block("prefix_cache_reset")),
        )
