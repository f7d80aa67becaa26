"""What `whatif` and `tune` share: deriving a suite from a suite, and running it with its plan in meta.json.

A derived suite is built as the YAML mapping a user could have written (so it is validated like
any suite file and its configs appear in ``meta.json`` and the comparability fingerprint), then
run by the normal runner into one run directory; the plan (which derived config is which
acceptance length or K) travels in ``meta.json`` under the command's key, where ``specbench
report`` finds it again.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SuiteError
from ..suite import ServerConfig, Suite, parse_suite

if TYPE_CHECKING:
    from ..schemas.request import RequestRecord
    from ..schemas.row import ResultRow

_NAME_OK = re.compile(r"^[A-Za-z0-9_.@+-]+$")


def spec_configs(suite: Suite, only: Sequence[str] | None, command: str) -> list[ServerConfig]:
    """The suite's speculative configs (or the ``--config`` ones), each launched by specbench."""
    base = suite.baseline
    if base is None:
        raise SuiteError(f"{suite.path}: {command} needs a baseline config (named 'baseline' or marked baseline: true)")
    by_name = {c.name: c for c in suite.configs}
    if only:
        unknown = [n for n in only if n not in by_name]
        if unknown:
            raise SuiteError(f"{suite.path}: --config {unknown[0]!r}: no such config (configs: {', '.join(by_name)})")
        chosen = [by_name[n] for n in only]
    else:
        chosen = [c for c in suite.configs if c is not base and c.method]
    if not chosen:
        raise SuiteError(f"{suite.path}: {command}: no speculative config (one with method:) to vary")
    for c in chosen:
        if c is base or not c.method:
            raise SuiteError(f"{suite.path}: config {c.name!r}: {command} varies speculative configs; this one has no method")
        if not c.launched:
            raise SuiteError(f"{suite.path}: config {c.name!r} runs at {c.url}: {command} starts one server per "
                             "variant, so the config needs launch settings (method, drafter, engine) instead of url:")
    return chosen


def derived_suite(suite: Suite, suffix: str, configs: list[dict[str, Any]]) -> Suite:
    """``suite`` renamed ``<name>-<suffix>`` with these raw configs, validated like a suite file."""
    raw = copy.deepcopy(suite.raw)
    raw["name"] = f"{suite.name}-{suffix}"
    raw["configs"] = configs
    for c in configs:
        if not _NAME_OK.match(c["name"]):
            raise SuiteError(f"{suite.path}: derived config name {c['name']!r} is not usable as a file name")
    return parse_suite(raw, suite.path)


def raw_config(suite: Suite, config: ServerConfig) -> dict[str, Any]:
    raw = suite.raw_config(config.name)
    return copy.deepcopy(raw) if raw else {"name": config.name}


def run_with_plan(suite: Suite, out: Path, key: str, plan: dict[str, Any], *, resume: bool, quiet: bool,
                  on_finish: Callable[[list[ResultRow], list[RequestRecord], dict[str, Any]], None] | None = None):
    """Run ``suite`` with the normal runner (live progress, Ctrl-C, resume); ``meta.json[key]`` = plan.

    ``on_finish`` sees the final rows, the requests they were built from and meta before the one final write. Returns the runner's outcome;
    prints the table as ``specbench run`` does.
    """
    from rich.console import Console

    from ..load.generate import run_loop
    from ..report.markdown import markdown
    from . import RunSession, SequentialRun
    from .progress import RunProgress

    console = Console(stderr=True)
    with RunProgress(console, quiet=quiet) as progress:
        session = RunSession(suite, out, resume=resume, progress=progress, extra_meta={key: plan}, on_finish=on_finish)
        outcome = run_loop(SequentialRun(suite, session, progress=progress).execute())
    Console().print(markdown(outcome.rows, session.meta), markup=False, highlight=False, soft_wrap=True)
    for name, err in outcome.failed_configs.items():
        console.print(f"[red]config {name} failed:[/] {err.splitlines()[0]}", highlight=False)
    console.print(f"results: {out}/results.json, {out}/results.md, {out}/requests.jsonl", highlight=False)
    if outcome.interrupted:
        console.print("[yellow]interrupted: what was measured is saved; finish with --resume[/]")
    return outcome, session.meta


def parse_numbers(text: str, flag: str, kind: type) -> list:
    """``1.5,2,2.5`` → numbers, one-line error naming the flag otherwise."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = kind(part)
        except ValueError:
            raise SuiteError(f"{flag}: {part!r} is not {'an integer' if kind is int else 'a number'} (expected e.g. {flag} "
                             f"{'1,2,3,5,7' if kind is int else '1.5,2,2.5,3'})") from None
        out.append(value)
    if not out:
        raise SuiteError(f"{flag}: no values given")
    return sorted(set(out))
