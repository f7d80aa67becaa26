"""Suite files for the end-to-end tests: one writer; each test module passes its own defaults."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support.fake_engine import batch_args


def write_suite(path: Path, configs: list[dict], *, name: str, load: dict, prompts: Path | None = None,
                requests: int | None = None, datasets: list[dict] | None = None, engine: str | None = None,
                **top) -> Path:
    """Write a suite YAML to ``path`` (a path without .yaml names a folder: ``suite.yaml`` in it): ``configs`` on one prompts file
    (``requests`` of it) or on ``datasets``; ``top`` holds further top-level keys (endpoint, server, …)."""
    if datasets is None:
        datasets = [{"name": "prompts", "path": str(prompts), **({"requests": requests} if requests is not None else {})}]
    suite = {"name": name, "model": "smol", "configs": configs, "datasets": datasets, "load": load, **top}
    if engine:
        suite["engine"] = engine
    if path.suffix not in (".yaml", ".yml"):
        path = path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def baseline_and_spec(base_url: str, spec_url: str, name: str = "spec", k: int = 3) -> list[dict]:
    """A baseline config and an n-gram config ``name`` (k drafts), each on its own server."""
    return [{"name": "baseline", "url": base_url},
            {"name": name, "url": spec_url, "method": "ngram", "num_speculative_tokens": k}]


def write_prompts(path: Path) -> Path:
    """Six prompts in two categories: the ``prompts_file`` fixture, and module-scoped fixtures' prompts."""
    rows = [f'{{"prompt": "question number {i} about topic {i % 3}", "category": "cat{i % 2}"}}' for i in range(6)]
    path.write_text("\n".join(rows) + "\n")
    return path


def write_fault_suite(path: Path, prompts_file: Path, configs: list[dict], *, requests: int = 6, engine: str | None = None,
                      extra: dict | None = None, **load) -> Path:
    """The fault-injection suite: short requests (8 tokens, 30 s timeout), no warm-up, chat endpoint."""
    return write_suite(path, configs, name="faults", prompts=prompts_file, requests=requests, engine=engine,
                       endpoint="chat", **(extra or {}),
                       load={"concurrency": 2, "max_tokens": 8, "temperature": 0, "warmup": 0, "timeout_s": 30, **load})


def write_e2e_suite(tmp_path: Path, prompts_file: Path, urls: dict[str, str], **load) -> Path:
    """The known-answer suite: a baseline and n-gram k=3 (``ngram_k3``), 6 requests of 22 tokens at concurrency 2."""
    return write_suite(tmp_path, baseline_and_spec(urls["baseline"], urls["spec"], "ngram_k3"), name="e2e", endpoint="chat",
                       prompts=prompts_file, requests=6,
                       load={"concurrency": 2, "max_tokens": 1 + 7 * 3, "temperature": 0, "warmup": 1, **load})


def known_cost_suite(tmp_path: Path, spec: dict, concurrency: list[int], server_args: list[str] | None = None,
                     max_tokens: int = 25, prompts: int = 4) -> str:
    """whatif's and tune's suite on the ``fake`` engine (tests/support/fake_engine.py): a baseline and ``spec``,
    ``prompts`` prompts at each load of ``concurrency`` (one warm-up request first), ``server_args`` for every server; the spec
    config's steps cost what its args say, with the batch of each pass counted (``batch_args``), never read off the
    clock. Keep the baseline's requests per second low (a few): a starved client caps how many it can send, and a
    capped baseline would pull every speedup towards 1."""
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(prompts)))
    spec = {**spec, "args": [*spec.get("args", []), *batch_args(concurrency, 1 + prompts)]}
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "s", "model": "smol", "engine": "fake", "configs": [{"name": "baseline"}, spec],
        "datasets": [{"name": "p", "path": str(path)}],
        "load": {"concurrency": concurrency, "max_tokens": max_tokens, "warmup": 1},
        "server": {"startup_timeout_s": 600, "args": server_args or []}}))  # the timeout: a guard
    return str(suite)
