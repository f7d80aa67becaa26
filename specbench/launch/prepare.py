"""Engines that specbench can prepare itself: a launcher's ``prepare: NAME`` names one here.

``specbench run`` calls ``prepare_engines`` before anything else, so the first run of the CPU demo
on a fresh machine installs its engine and model (with a live display) instead of failing; with
``--no-setup`` a missing product is the one-line error naming the command that makes it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from rich.console import Console

from ..errors import LaunchError
from ..suite import Suite
from .engines import read_engine
from .setup_cpu import CpuSetup


class Preparation(Protocol):
    command: str  # what a user runs to do the same by hand, named in errors

    def products(self) -> dict[str, Path]:
        """What it makes, by name (e.g. engine → its Python, model → its folder)."""
        ...

    def missing(self) -> list[str]:
        """The names of the products not there yet (a cheap check: nothing is imported or run)."""
        ...

    def run(self, console: Console) -> None: ...


PREPARATIONS: dict[str, Preparation] = {"cpu": CpuSetup()}


def needed(suite: Suite) -> dict[str, list[str]]:
    """Per preparation, its missing products that this suite's launched servers would use.

    A product the suite does not use (``server.python``, ``SPECBENCH_ENGINE_PYTHON`` or
    ``server.model_path`` point elsewhere) is never a reason to install anything."""
    out: dict[str, list[str]] = {}
    for config in suite.configs:
        if not config.launched:
            continue
        engine = read_engine(config.engine or suite.engine)
        name = engine.prepare
        if name is None:
            continue
        if name not in PREPARATIONS:
            raise LaunchError(f"engine {engine.name!r}: prepare: {name!r} unknown (known: {', '.join(sorted(PREPARATIONS))})")
        prep = PREPARATIONS[name]
        used = {os.path.realpath(engine.python(suite.server.python)), os.path.realpath(engine.model_path(suite.server.model_path, suite.model))}
        products = prep.products()
        missing = [m for m in prep.missing() if os.path.realpath(products[m]) in used]
        if missing:
            out.setdefault(name, [])
            out[name] += [m for m in missing if m not in out[name]]
    return out


def prepare_engines(suite: Suite, console: Console, allowed: bool = True) -> list[str]:
    """Run each needed preparation once; the names of those run. Not ``allowed``: raise instead."""
    todo = needed(suite)
    for name, missing in todo.items():
        prep = PREPARATIONS[name]
        where = ", ".join(f"{m} ({prep.products()[m]})" for m in missing)
        if not allowed:
            raise LaunchError(f"{suite.path}: missing {where}: prepare {'them' if len(missing) > 1 else 'it'} with `{prep.command}` "
                              "(or run without --no-setup)")
        console.print(f"{suite.path}: missing {where}: preparing it now (`{prep.command}`; --no-setup skips this)",
                      highlight=False, soft_wrap=True)
        prep.run(console)
    return list(todo)
