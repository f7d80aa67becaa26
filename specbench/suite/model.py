"""The typed suite: what a validated suite file says (``parse.py`` builds it, ``checks.py`` validates)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..datasets import DatasetSpec
from ..schemas.cell import find_baseline
from ..schemas.meta import Comparability
from ..util.redact import redact_mapping
from .arrival import Arrival


@dataclass(frozen=True)
class ServerConfig:
    """One ``configs:`` entry, one column of the comparison: a server at a URL, or the flags of one
    specbench launches (with the suite's ``LaunchSettings``)."""

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
    load_format: str = "auto"  # "dummy": the target's weights at random (checks.LOAD_FORMATS)
    datasets: tuple[str, ...] | None = None  # None: every data set of the suite
    steplog: str = "off"  # the engine's step log for a launched server: off | steps | timing (docs/steplog.md)
    warmup: int | str | None = None  # this config's own load.warmup (None: the suite's)

    @property
    def launched(self) -> bool:
        return self.url is None

    @property
    def dummy_weights(self) -> bool:
        """Served with random weights: its speed is the model's, its tokens and acceptance are not."""
        return self.load_format == "dummy"

    @property
    def synthetic_acceptance(self) -> bool:
        """Acceptance fixed by the engine (vLLM's synthetic sampler, SGLang's simulated length): drafts are
        committed whether or not they match the target's, so the output is not the target's."""
        return self.speculative.get("rejection_sample_method") == "synthetic" or "SGLANG_SIMULATE_ACC_LEN" in self.env

    def runs_on(self, dataset: str) -> bool:
        """Whether this config measures ``dataset`` (a config's ``datasets:`` restricts it to those)."""
        return self.datasets is None or dataset in self.datasets

    @property
    def label_method(self) -> str:
        return self.method or "baseline"


#: adaptive repeats plan their count from at least this many first repeats (docs/measurement.md):
#: with fewer, the planned count rests on a spread from two values
MIN_ADAPTIVE_REPEATS = 3


@dataclass(frozen=True)
class LoadSpec:
    """How hard and how long each config × data set cell is driven."""

    concurrency: tuple[int, ...] = (1,)
    request_rate: tuple[float, ...] | None = None
    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float | None = None
    ignore_eos: bool = False
    warmup: int | str = 2  # requests before each timed pass, "pass": a full matching warm pass, or "steady": passes
    #: until the step log sees no one-time event (compile, capture, autotune, allocator growth) in a whole one
    warmup_max_passes: int = 5  # "steady": the cap
    repeats: int = 1
    restart: bool = False  # each repeat of every config on a fresh server start, rounds interleaved
    target_ci: float | None = None  # adaptive repeats: the speedup CI's relative half-width to reach
    max_repeats: int | None = None  # adaptive repeats: the cap (``repeats`` is then the first stage)
    timeout_s: float = 600.0
    seed: int = 0
    extra_body: dict[str, Any] = field(default_factory=dict)
    workload: str = "fixed"  # fixed | profilings | per_stream (``per_stream`` × C prompts, at least ``at_least``)
    per_stream: int = 1
    at_least: int = 1
    client_processes: int | str = 1  # load-generator processes; "auto": one per 256 streams, up to the cores
    #: "socket": kernel receive stamps (http:// only); "aiohttp": the loop's read time; "openai": the official
    #: SDK, each chunk stamped when the SDK yields it (what an SDK user sees); "auto": socket unless https
    client: str = "auto"
    slo: Any = None  # slo.Slo: latency bounds → slo_attainment, goodput_rps
    rate_search: Any = None  # slo.RateSearch: --max-rate-at-slo
    grade: tuple[str, ...] = ()  # data sets whose answers are graded (grade/)
    tiktoken_file: str | None = None  # o200k_base.tiktoken for the tokenizer-independent lengths (measure/o200k.py)
    arrival: Arrival = Arrival()  # open loop: when requests are due (suite/arrival.py)
    #: "keep": the server's prefix cache as the passes leave it; "reset": emptied after each warm-up, right before
    #: each timed pass, so no prompt an earlier pass (or the warm-up) sent is served from it (run/prefix_reset.py)
    prefix_cache: str = "keep"

    @property
    def first_stage(self) -> int:
        """Repeats every cell runs: ``repeats``, raised to ``MIN_ADAPTIVE_REPEATS`` under a target."""
        return self.repeats if self.target_ci is None else max(self.repeats, MIN_ADAPTIVE_REPEATS)

    @property
    def most_repeats(self) -> int:
        return self.first_stage if self.target_ci is None or self.max_repeats is None else self.max_repeats

    def processes_at(self, concurrency: int) -> int:
        if self.client_processes == "auto":
            return max(1, min(os.cpu_count() or 1, -(-concurrency // 256)))
        return int(self.client_processes)

    def prompts_at(self, concurrency: int, available: int) -> int:
        """Prompts per load point: all of the data set's (fixed), or the profilings sizes
        (22/88/128/220/440/880 at C=1/8/32/64/128/256, else 4 per stream and at least 22), or
        ``per_stream`` × C and at least ``at_least``."""
        if self.workload == "per_stream":
            return min(available, max(self.at_least, self.per_stream * concurrency))
        if self.workload != "profilings":
            return available
        sizes = {1: 22, 8: 88, 32: 128, 64: 220, 128: 440, 256: 880}
        return min(available, sizes.get(concurrency, max(22, 4 * concurrency)))


@dataclass(frozen=True)
class LaunchSettings:
    """The suite's ``server:`` block: settings shared by every server specbench launches (not one
    config's: that is a ``ServerConfig``; a running server is ``runner.Server``)."""

    model_path: str | None = None
    python: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout_s: float = 900.0
    host: str = "127.0.0.1"
    gpus_per_server: int = 1
    load_format: str = "auto"
    steplog: str = "off"  # every launched config's default (a config's ``steplog:`` overrides it)


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
    server: LaunchSettings = field(default_factory=LaunchSettings)
    data_dir: Path | None = None
    api_key_env: str | None = None
    gate: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    cost: Any = None  # telemetry.Cost: gpu_hour_usd → usd_per_million_output_tokens

    @property
    def dummy_configs(self) -> list[str]:
        """The configs served with random weights (``load_format: dummy``)."""
        return [c.name for c in self.configs if c.dummy_weights]

    @property
    def baseline(self) -> ServerConfig | None:
        name = find_baseline([c.name for c in self.configs], [c.name for c in self.configs if c.baseline])
        return next((c for c in self.configs if c.name == name), None)

    def comparability(self) -> Comparability:
        """What must match between two runs for their numbers to be compared (resume, gate)."""
        return Comparability.from_dict({
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
            # only when set: runs from before the key stay comparable with real-weight runs
            **({"load_format": self.server.load_format} if self.server.load_format != "auto" else {}),
            # only when not Poisson: runs from before the key stay comparable with Poisson runs
            **({"arrival": self.load.arrival.fingerprint()} if self.load.arrival.kind != "poisson" else {}),
            # only when reset: runs from before the key kept the cache, as keep does
            **({"prefix_cache": self.load.prefix_cache} if self.load.prefix_cache != "keep" else {}),
            "datasets": {d.name: _fingerprint(self.raw_dataset(d.name)) for d in self.datasets},
            "configs": {c.name: _fingerprint(redact_mapping(self.raw_config(c.name))) for c in self.configs},
        }, f"{self.path}: comparability")

    def raw_dataset(self, name: str) -> Mapping[str, object]:
        """The ``datasets:`` entry ``name`` as the suite file has it ({} when there is none)."""
        entries = [d if isinstance(d, dict) else {"name": d} for d in self.raw.get("datasets", [])]
        return next((d for d in entries if d.get("name") == name), {})

    def raw_config(self, name: str) -> Mapping[str, object]:
        """The ``configs:`` entry ``name`` as the suite file has it ({} when there is none)."""
        return next((c for c in self.raw.get("configs", []) if c.get("name") == name), {})


def _fingerprint(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]
