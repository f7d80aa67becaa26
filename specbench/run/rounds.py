"""The order of a sequential run's servers. ``load.restart``: every repeat of every config on a fresh server start, repeat-major and
interleaved (round 0: baseline, A, B; round 1: baseline, A, B …), so drift over the run hits every
config alike; with ``load.target_ci`` the rounds after the first stage are planned from it
(``measure.repeat_spread.planned_counts``). --resume skips each (cell, repeat) measured already."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..measure.repeat_spread import planned_counts
from ..schemas.cell import Cell
from ..schemas.request import Prompt
from ..suite import Suite
from .phases import Phases
from .preflight import config_order, load_points

if TYPE_CHECKING:
    from .sequential import SequentialRun


def round_cells(suite: Suite, config: str, rep: int, planned: dict[Cell, int] | None) -> set[tuple[Cell, int]]:
    """The (cell, repeat) of ``config`` that round ``rep`` measures: all of them in the first stage,
    then those whose (data set, load point) planned more than ``rep`` repeats."""
    cfg = next(c for c in suite.configs if c.name == config)
    baseline = suite.baseline.name if suite.baseline else config
    out = set()
    for spec in suite.datasets:
        if not cfg.runs_on(spec.name):
            continue
        for point in load_points(suite):
            cell = Cell.at(config, spec.name, point)
            if rep < suite.load.first_stage or (planned is not None and planned.get(cell.with_config(baseline), 0) > rep):
                out.add((cell, rep))
    return out


async def config_by_config(run: SequentialRun, phases: Phases, prompts: dict[str, list[Prompt]],
                           failed: dict[str, str]) -> None:
    """Without ``restart``: one server per config, baseline first, its repeats back to back."""
    for config in config_order(run.suite):
        if run.only_configs is not None and config.name not in run.only_configs:
            continue
        if run.stop.is_set():
            break
        error = await run.attempt_config(phases, config, prompts)
        if error is None:
            run.recorder.config_succeeded(config.name)
        else:
            failed[config.name] = error


async def restart_rounds(run: SequentialRun, phases: Phases, prompts: dict[str, list[Prompt]],
                         failed: dict[str, str]) -> None:
    """The rounds; a config that fails is not started again in later rounds (``failed`` says why)."""
    suite, load = run.suite, run.suite.load
    order = [c for c in config_order(suite) if run.only_configs is None or c.name in run.only_configs]
    planned: dict[Cell, int] | None = None
    for rep in range(load.most_repeats):
        if rep == load.first_stage and load.target_ci is not None and suite.baseline is not None:
            planned = planned_counts(run.recorder.rows(), suite.baseline.name, load.target_ci, load.first_stage,
                                     load.most_repeats)
        for config in order:
            if run.stop.is_set():
                return
            if config.name in failed:
                continue
            only = round_cells(suite, config.name, rep, planned)
            if not only:
                continue
            error = await run.attempt_config(phases, config, prompts, only)
            if error is not None:
                failed[config.name] = error
    for config in order:
        if config.name not in failed and not run.stop.is_set():
            run.recorder.config_succeeded(config.name)
