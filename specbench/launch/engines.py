"""Engine descriptions: data in ``launchers/<engine>.yaml``, plus one small adapter per engine.

The YAML holds argv templates, probes and metric names; an adapter holds only what cannot be
data: how a config's speculative settings become flags, and how acceptance is read back.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from ..acceptance import CounterNames, counter_acceptance, counter_deltas, empty_acceptance, verify_step_acceptance
from ..errors import LaunchError, SuiteError
from ..scrape import MetricsSnapshot

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


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "env" else v
    return out


def _read(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = launcher_path(name)
    if path is None:
        searched = ", ".join(str(d) for d in launcher_dirs())
        raise SuiteError(f"engine {name!r}: no {name}.yaml in {searched} (known: {', '.join(known_engines())})")
    data = yaml.safe_load(path.read_text()) or {}
    parent = data.pop("extends", None)
    if parent:
        if parent in seen:
            raise SuiteError(f"{path}: extends loop through {parent!r}")
        data = _merge(_read(parent, seen + (name,)), data)
    return data


@dataclass(frozen=True)
class Engine:
    name: str
    adapter: str
    data: dict[str, Any] = field(repr=False)

    @property
    def default_port(self) -> int:
        return int(self.data.get("default_port", 8000))

    def python(self, override: str | None = None) -> str:
        chosen = override or os.environ.get("SPECBENCH_ENGINE_PYTHON") or self.data.get("python", "python3")
        return _expand(chosen)

    def model_path(self, override: str | None, model: str) -> str:
        return _expand(override or self.data.get("model_path") or model)

    @property
    def prepare(self) -> str | None:
        """The preparation (``launch.prepare.PREPARATIONS``) that makes this engine's Python and model."""
        return self.data.get("prepare")

    @property
    def health_path(self) -> str:
        return self.data["ready"]["health"]

    @property
    def models_path(self) -> str:
        return self.data["ready"]["models"]

    @property
    def version_path(self) -> tuple[str, str]:
        v = self.data.get("version", {})
        return v.get("path", "/version"), v.get("key", "version")

    @property
    def gpu_env(self) -> str | None:
        return self.data.get("gpu_env")

    @property
    def env(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.data.get("env") or {}).items()}

    @property
    def secret_flags(self) -> list[str]:
        return list(self.data.get("secret_flags", []))

    @property
    def acceptance_reads_server_info(self) -> bool:
        """Whether acceptance needs the version endpoint's JSON (SGLang's cumulative average)."""
        return "server_info" in self.data.get("metrics", {})

    @property
    def generation_counter(self) -> str | None:
        """The /metrics sample counting every token the server generated (``keepup.py`` checks the client's count against it)."""
        return (self.data.get("metrics", {}).get("counters") or {}).get("generation_tokens")

    @property
    def acceptance_source(self) -> str:
        return self.data.get("metrics", {}).get("acceptance_source", "")

    def argv(self, *, config, model: str, model_path: str | None, host: str, port: int,
             python: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
        """The full argv of one config's server (a list, never a shell string)."""
        values = {"python": self.python(python), "model_path": self.model_path(model_path, model),
                  "model": model, "host": host, "port": str(port)}
        base = [str(x).format(**values) for x in self.data["command"] + self.data.get("args", [])]
        if not config.method:
            return base + list(extra) + list(config.args)
        _needs_drafter(self, config)
        return base + list(extra) + list(config.args) + ADAPTERS[self.adapter].spec_args(self, config)

    def redact(self, argv: list[str]) -> list[str]:
        """argv with the values of secret flags (this launcher's and any secret-looking) replaced, for logs and metadata."""
        from ..redact import redact_argv

        return redact_argv(argv, self.secret_flags)

    def acceptance(self, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                   server_info: dict[str, Any] | None = None) -> dict[str, Any]:
        return ADAPTERS[self.adapter].acceptance(self, before, after, k, server_info)


def _expand(path: str) -> str:
    """``~`` and ``{cache}`` (specbench's cache, ``$SPECBENCH_CACHE``: where ``specbench setup`` puts engines) expanded."""
    from ..setup_cpu import cache_dir

    return os.path.expanduser(path.replace("{cache}", str(cache_dir())))


def load_engine(name: str) -> Engine:
    data = _read(name)
    adapter = data.get("adapter", name)
    if adapter not in ADAPTERS:
        raise SuiteError(f"{launcher_path(name)}: adapter {adapter!r} unknown (known: {', '.join(ADAPTERS)})")
    return Engine(name=data.get("name", name), adapter=adapter, data=data)


def _needs_drafter(engine: Engine, config) -> None:
    method = (config.method or "").lower()
    if method in engine.data["speculative"].get("needs_drafter", []) and not (config.drafter or config.speculative.get("model")):
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
    """An engine family's speculative flags and acceptance reading (a class of static methods)."""

    def spec_args(self, engine: Engine, config: Any) -> list[str]: ...

    def acceptance(self, engine: Engine, before: MetricsSnapshot, after: MetricsSnapshot, k: int | None,
                   server_info: dict[str, Any] | None) -> dict[str, Any]: ...


class VllmAdapter:
    """vLLM: one ``--speculative-config`` JSON; acceptance from the four spec_decode counters."""

    @staticmethod
    def spec_args(engine: Engine, config) -> list[str]:
        spec = engine.data["speculative"]
        body: dict[str, Any] = {"method": config.method}
        if config.drafter:
            body[spec["drafter_key"]] = os.path.expanduser(config.drafter)
        if config.num_speculative_tokens is not None:
            body[spec["k_key"]] = config.num_speculative_tokens
        body.update(config.speculative)
        _check_dspark_block(config, body.get(spec["drafter_key"]), body.get(spec["k_key"]))
        return [spec["flag"], json.dumps(body, separators=(",", ":")), *spec.get("extra_flags", [])]

    @staticmethod
    def acceptance(engine: Engine, before, after, k, server_info) -> dict[str, Any]:
        c = engine.data["metrics"]["counters"]
        names = CounterNames(c["drafts"], c["draft_tokens"], c["accepted"], c.get("accepted_per_pos"))
        out = counter_acceptance(before, after, names, k)
        out["acceptance_source"] = engine.acceptance_source if out["mean_acceptance_length"] is not None else None
        return out


class SglangAdapter:
    """SGLang: separate flags; acceptance length from counters, or the cumulative server-info average."""

    @staticmethod
    def spec_args(engine: Engine, config) -> list[str]:
        spec = engine.data["speculative"]
        method = config.method.lower()
        extras = dict(config.speculative)
        drafter = config.drafter or extras.pop("model", None)
        out = [spec["algorithm_flag"], method.upper()]
        if drafter:
            out += [spec["drafter_flag"], os.path.expanduser(drafter)]
        flags: dict[str, str | None] = {}  # flag → value (None: a bare store_true flag); extras override K's
        if config.num_speculative_tokens is not None:
            k = config.num_speculative_tokens
            template = [str(x).format(k=k, k1=k + 1) for x in spec["k_flags"].get(method, spec["k_flags"]["default"])]
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

    @staticmethod
    def acceptance(engine: Engine, before, after, k, server_info) -> dict[str, Any]:
        """Counter windows keep their raw deltas (``sglang_*``) so repeats pool exactly; without
        ``num_requests_total`` the length is finished at summary time from the phase's completed requests."""
        out = empty_acceptance(k)
        m = engine.data["metrics"]
        c = m["counters"]
        out.update(acceptance_source=None, acceptance_error=None, sglang_generation_tokens=None,
                   sglang_verify_calls=None, sglang_finished_requests=None)
        d, error = counter_deltas(before, after, {"tokens": c["generation_tokens"], "steps": c["verify_calls"],
                                                  "requests": c.get("finished_requests")})
        if error:
            out["acceptance_error"] = error
            return out
        if d["tokens"] is not None and d["steps"]:
            requests = d["requests"]
            if requests is not None and requests > d["tokens"]:
                out["acceptance_error"] = (f"/metrics counters contradict each other: {requests:g} finished requests "
                                           f"but {d['tokens']:g} generated tokens")
                return out
            out.update(sglang_generation_tokens=int(d["tokens"]), sglang_verify_calls=int(d["steps"]),
                       sglang_finished_requests=None if requests is None else int(requests))
            if requests is not None:
                out.update(verify_step_acceptance(d["tokens"], d["steps"], requests, k))
                out["acceptance_source"] = SGLANG_COUNTERS
            return out
        if server_info is not None:
            value, why = _server_info_length(server_info, m["server_info"]["key"])
            if why:
                out["acceptance_error"] = f"/get_server_info: {why}"
            elif value is not None:
                out["mean_acceptance_length"] = value
                out["acceptance_rate"] = (value - 1) / k if k else None
                out["acceptance_source"] = "/get_server_info avg_spec_accept_length: cumulative since server start (warm-up included), DP rank 0"
        return out


SGLANG_COUNTERS = ("(Δsglang:generation_tokens_total − Δsglang:num_requests_total) ÷ Δsglang:spec_verify_calls_total "
                   "over the measured phase: one prefill token per finished request is not a verify step")


def _server_info_length(info: Any, key: str) -> tuple[float | None, str | None]:
    """SGLang's cumulative average acceptance length from /get_server_info, or why it cannot be used."""
    if not isinstance(info, dict):
        return None, f"answered {type(info).__name__}, not a JSON object"
    decode = info.get("decode")
    if decode:  # PD disaggregation: the decode side
        if not isinstance(decode, list) or not isinstance(decode[0], dict):
            return None, "decode is not a list of objects"
        info = decode[0]
    states = info.get("internal_states") or [info]
    if not isinstance(states, list) or not isinstance(states[0], dict):
        return None, "internal_states is not a list of objects"
    value = states[0].get(key)
    if value is None or value == 0:  # 0: a server that does not speculate
        return None, None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 1:
        return None, f"{key} = {value!r:.40} is not a number ≥ 1"
    return float(value), None


ADAPTERS: dict[str, Adapter] = {"vllm": VllmAdapter, "sglang": SglangAdapter}
