"""Engine descriptions: data in ``launchers/<engine>.yaml``, plus one small adapter per engine.

The YAML holds argv templates, probes and metric names; an adapter holds only what cannot be
data: how a config's speculative settings become flags (reading acceptance back is measure's:
``measure.engine_counters``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from ..errors import LaunchError, SuiteError
from ..util.redact import redact_argv
from .launcher import Launcher, PrefixCacheReset
from .setup_cpu import cache_dir

BUILTIN_LAUNCHERS = Path(__file__).resolve().parents[1] / "launchers"


def launcher_dirs() -> list[Path]:
    """``$SPECBENCH_LAUNCHERS`` (os.pathsep-separated), then ``./launchers`` of the working directory,
    then the launchers shipped in the package (the repo's top-level ``launchers/``, so a wheel has them too).

    User folders come first so a YAML there overrides a built-in engine of the same name.
    """
    extra = [Path(p) for p in os.environ.get("SPECBENCH_LAUNCHERS", "").split(os.pathsep) if p]
    dirs: list[Path] = []
    for d in [*extra, Path.cwd() / "launchers", BUILTIN_LAUNCHERS]:
        if d.is_dir() and all(d.resolve() != seen.resolve() for seen in dirs):
            dirs.append(d)
    return dirs


def launcher_path(name: str) -> Path | None:
    return next((d / f"{name}.yaml" for d in launcher_dirs() if (d / f"{name}.yaml").exists()), None)


def known_engines() -> list[str]:
    return sorted({p.stem for d in launcher_dirs() for p in d.glob("*.yaml")})


def _merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """``over`` on ``base``, mapping by mapping (``env`` is replaced whole)."""
    out = dict(base)
    for k, v in over.items():
        old = out.get(k)
        out[k] = _merge(old, v) if isinstance(v, dict) and isinstance(old, dict) and k != "env" else v
    return out


def _read(name: str, seen: tuple[str, ...] = ()) -> dict[str, object]:
    """Launcher ``name``'s YAML, merged over the launchers it ``extends`` (checked by ``Launcher.of``)."""
    path = launcher_path(name)
    if path is None:
        searched = ", ".join(str(d) for d in launcher_dirs())
        raise SuiteError(f"engine {name!r}: no {name}.yaml in {searched} (known: {', '.join(known_engines())})")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: expected a mapping, got {type(data).__name__}")
    parent = data.pop("extends", None)
    if parent:
        if parent in seen:
            raise SuiteError(f"{path}: extends loop through {parent!r}")
        data = _merge(_read(parent, seen + (name,)), data)
    return data


T = TypeVar("T")


@dataclass(frozen=True)
class Engine:
    """An engine: its launcher, read and checked, and the adapter that turns a config into its flags."""

    name: str
    adapter: str
    launcher: Launcher = field(repr=False)
    path: Path | None = None  # the launcher YAML it was read from

    def need(self, value: T | None, key: str) -> T:
        """A launcher key this use of the engine needs (to launch, to probe); absent is one line naming it."""
        if value is None:
            raise LaunchError(f"{self.path}: {key}: required by engine {self.name}, and its launcher (with what it "
                              "extends) has none")
        return value

    @property
    def default_port(self) -> int:
        return self.launcher.default_port

    def python(self, override: str | None = None) -> str:
        chosen = override or os.environ.get("SPECBENCH_ENGINE_PYTHON") or self.launcher.python
        return _expand(chosen)

    def model_path(self, override: str | None, model: str) -> str:
        return _expand(override or self.launcher.model_path or model)

    @property
    def prepare(self) -> str | None:
        """The preparation (``launch.prepare.PREPARATIONS``) that makes this engine's Python and model."""
        return self.launcher.prepare

    @property
    def health_path(self) -> str:
        return self.need(self.launcher.health_path, "ready.health")

    @property
    def models_path(self) -> str:
        return self.need(self.launcher.models_path, "ready.models")

    @property
    def version_path(self) -> tuple[str, str]:
        return self.launcher.version_path

    @property
    def gpu_env(self) -> str | None:
        return self.launcher.gpu_env

    @property
    def env(self) -> dict[str, str]:
        return dict(self.launcher.env)

    @property
    def prefix_cache_reset(self) -> PrefixCacheReset:
        """The endpoint ``load.prefix_cache: reset`` POSTs before each timed pass, and the env it needs."""
        return self.launcher.prefix_cache_reset

    @property
    def secret_flags(self) -> list[str]:
        return list(self.launcher.secret_flags)

    @property
    def acceptance_reads_server_info(self) -> bool:
        """Whether acceptance needs the version endpoint's JSON (SGLang's cumulative average)."""
        return self.launcher.metrics.server_info_key is not None

    @property
    def generation_counter(self) -> str | None:
        """The /metrics sample counting every token the server generated (``keepup.py`` checks the client's count against it)."""
        return self.launcher.metrics.counters.get("generation_tokens")

    @property
    def acceptance_source(self) -> str:
        return self.launcher.metrics.acceptance_source

    def argv(self, *, config, model: str, model_path: str | None, host: str, port: int,
             python: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
        """The full argv of one config's server (a list, never a shell string)."""
        values = {"python": self.python(python), "model_path": self.model_path(model_path, model),
                  "model": model, "host": host, "port": str(port)}
        base = [x.format(**values) for x in self.need(self.launcher.command, "command") + self.launcher.args]
        base += self.measure_flags(extra, config.args) + self.load_format_args(config) + self.steplog_flags(config)
        if not config.method:
            return base + list(extra) + list(config.args)
        _needs_drafter(self, config)
        return base + list(extra) + list(config.args) + ADAPTERS[self.adapter].spec_args(self, config)

    def measure_flags(self, *suite_args: tuple[str, ...]) -> list[str]:
        """The launcher's ``measure_flags`` (SGLang's ``--enable-cache-report``: else no ``cached_tokens``) not passed yet."""
        return [f for f in self.launcher.measure_flags if all(f not in args for args in suite_args)]

    def load_format_args(self, config) -> list[str]:
        """``[flag, format]`` for a config whose weights are not the model folder's (``load_format: dummy``),
        the flag spelled by the launcher's ``load_format_flag``; an engine without one refuses the key.

        The drafter follows the target's format on both engines (vLLM's V2 runner, SGLang's
        --speculative-draft-load-format default), so a dummy target has a dummy drafter."""
        fmt = getattr(config, "load_format", "auto")
        if fmt == "auto":
            return []
        flag = self.launcher.load_format_flag
        if not flag:
            raise LaunchError(f"config {config.name!r}: load_format {fmt!r}: engine {self.name} cannot load other weights "
                              f"(its launcher {self.path} has no load_format_flag)")
        return [str(flag), fmt]

    def steplog_flags(self, config) -> list[str]:
        """The launcher's ``steplog_flags`` for a config with the step log on (vLLM: ``--cudagraph-metrics``,
        the step's graph mode and padding); an adapter without a per-step hook refuses the key."""
        level = getattr(config, "steplog", "off")
        if level == "off":
            return []
        if self.adapter not in STEPLOG_ADAPTERS:
            raise SuiteError(f"config {config.name!r}: steplog {level!r}: engine {self.name} ({self.adapter}) has no "
                             "per-step hook specbench can use (docs/steplog.md); set steplog: off for this config")
        return list(self.launcher.steplog_flags)

    def redact(self, argv: list[str]) -> list[str]:
        """argv with the values of secret flags (this launcher's and any secret-looking) replaced, for logs and metadata."""
        return redact_argv(argv, self.secret_flags)



def _expand(path: str) -> str:
    """``~`` and ``{cache}`` (specbench's cache, ``$SPECBENCH_CACHE``: where ``specbench setup`` puts engines) expanded."""
    return os.path.expanduser(path.replace("{cache}", str(cache_dir())))


def read_engine(name: str) -> Engine:
    data = _read(name)
    adapter = data.get("adapter", name)
    if not isinstance(adapter, str) or adapter not in ADAPTERS:
        raise SuiteError(f"{launcher_path(name)}: adapter {adapter!r} unknown (known: {', '.join(ADAPTERS)})")
    path = launcher_path(name)
    launcher = Launcher.of(data, name, adapter, path)
    return Engine(name=launcher.name, adapter=adapter, launcher=launcher, path=path)


def _needs_drafter(engine: Engine, config) -> None:
    method = (config.method or "").lower()
    if method in engine.launcher.speculative.needs_drafter and not (config.drafter or config.speculative.get("model")):
        raise LaunchError(f"config {config.name!r}: method {config.method!r} on {engine.name} needs `drafter:` (the draft model path)")


def _check_dspark_block(config, drafter, k) -> None:
    """vLLM (0.26 seen) refuses DSpark k below a local checkpoint's ``dspark_block_size`` only once
    the server is starting; say so before launching, naming the file and key."""
    if (config.method or "").lower() != "dspark" or not drafter or k is None:
        return
    path = Path(str(drafter)) / "config.json"
    try:
        block = json.loads(path.read_text()).get("dspark_block_size")
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(block, int) and k < block:
        raise LaunchError(f"config {config.name!r}: num_speculative_tokens {k} < dspark_block_size {block} in {path}; "
                          f"vLLM refuses this DSpark layout (smaller values produce incorrect output): use k >= {block}")


class Adapter(Protocol):
    """An engine family's speculative flags (a class of static methods); its acceptance reading is
    ``measure.engine_counters.READERS[adapter]``."""

    def spec_args(self, engine: Engine, config: Any) -> list[str]: ...


class VllmAdapter:
    """vLLM: one ``--speculative-config`` JSON."""

    @staticmethod
    def spec_args(engine: Engine, config) -> list[str]:
        spec = engine.launcher.speculative
        drafter_key = engine.need(spec.drafter_key, "speculative.drafter_key")
        k_key = engine.need(spec.k_key, "speculative.k_key")
        body: dict[str, Any] = {"method": config.method}
        if config.drafter:
            body[drafter_key] = os.path.expanduser(config.drafter)
        if config.num_speculative_tokens is not None:
            body[k_key] = config.num_speculative_tokens
        body.update(config.speculative)
        _check_dspark_block(config, body.get(drafter_key), body.get(k_key))
        return [engine.need(spec.flag, "speculative.flag"), json.dumps(body, separators=(",", ":")), *spec.extra_flags]


class SglangAdapter:
    """SGLang: separate flags, K spelled per algorithm."""

    @staticmethod
    def spec_args(engine: Engine, config) -> list[str]:
        spec = engine.launcher.speculative
        method = config.method.lower()
        extras = dict(config.speculative)
        drafter = config.drafter or extras.pop("model", None)
        out = [engine.need(spec.algorithm_flag, "speculative.algorithm_flag"), method.upper()]
        if drafter:
            out += [engine.need(spec.drafter_flag, "speculative.drafter_flag"), os.path.expanduser(drafter)]
        flags: dict[str, str | None] = {}  # flag → value (None: a bare store_true flag); extras override K's
        if config.num_speculative_tokens is not None:
            k = config.num_speculative_tokens
            k_flags = spec.k_flags[method] if method in spec.k_flags else \
                engine.need(spec.k_flags.get("default"), "speculative.k_flags.default")
            template = [x.format(k=k, k1=k + 1) for x in k_flags]
            flags.update(zip(template[::2], template[1::2]))
        for key, value in extras.items():
            flag = f"--speculative-{key.replace('_', '-')}"
            if value is True:
                flags[flag] = None
            elif value is False or value is None:
                flags.pop(flag, None)
            else:
                flags[flag] = str(value)
        for flag, value in flags.items():
            out += [flag] if value is None else [flag, value]
        return out


ADAPTERS: dict[str, Adapter] = {"vllm": VllmAdapter, "sglang": SglangAdapter}
#: adapters whose servers load specbench's step recorder (SGLang 0.5.16 has no per-step hook a package can use)
STEPLOG_ADAPTERS = ("vllm",)
