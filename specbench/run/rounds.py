"""The order of a sequential run's servers, as a generator of visits the run consumes (``sequential``): one
server per config, baseline first, its repeats back to back; or, with ``load.restart``, every repeat of every
config on a fresh server start, repeat-major and interleaved (round 0: baseline, A, B; round 1: baseline, A,
B …), so drift over the run hits every config alike; with ``load.target_ci`` the rounds after the first stage
are planned from it (``measure.repeat_spread.planned_counts``). A parallel run takes the same rounds, each
round's visits side by side (``parallel.restart_rounds``). --resume skips each (cell, repeat) measured already."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from ..measure.repeat_spread import planned_counts
from ..schemas.cell import Cell
from ..schemas.row import ResultRow
from ..suite import ServerConfig, Suite
from .preflight import config_order, load_points

#: one server visit: the config, and the (cell, repeat) it measures there (None: every one not measured yet)
Visit = tuple[ServerConfig, set[tuple[Cell, int]] | None]


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


def run_order(suite: Suite, only_configs: list[str] | None) -> list[ServerConfig]:
    """The configs the run measures (``only_configs``: a subset), baseline first."""
    return [c for c in config_order(suite) if only_configs is None or c.name in only_configs]


def restart_rounds(suite: Suite, only_configs: list[str] | None, failed: Mapping[str, str],
                   rows: Callable[[], list[ResultRow]]) -> Iterator[tuple[int, list[Visit]]]:
    """``load.restart``'s rounds in order, each as (its repeat, the visits of every config not in ``failed`` by
    then, baseline first); taken one round at a time, so what the run learns meanwhile counts: a config that failed
    is not visited in later rounds, and the rounds after the first stage are planned from the ``rows`` measured by
    then. A sequential run takes a round's visits one after another (``visits``), a parallel one side by side
    (``parallel.restart_rounds``)."""
    load, planned = suite.load, None
    for rep in range(load.most_repeats):
        if rep == load.first_stage and load.target_ci is not None and suite.baseline is not None:
            planned = planned_counts(rows(), suite.baseline.name, load.target_ci, load.first_stage, load.most_repeats)
        taken: list[Visit] = [(config, only) for config in run_order(suite, only_configs) if config.name not in failed
                              for only in [round_cells(suite, config.name, rep, planned)] if only]
        if taken:
            yield rep, taken


def visits(suite: Suite, only_configs: list[str] | None, failed: Mapping[str, str],
           rows: Callable[[], list[ResultRow]]) -> Iterator[Visit]:
    """The server visits of a sequential run, in order: one per config, or ``restart_rounds``' one after another
    (the generator is taken a visit at a time, so a round is made only once the one before has run)."""
    if not suite.load.restart:
        yield from ((config, None) for config in run_order(suite, only_configs))
        return
    for _, taken in restart_rounds(suite, only_configs, failed, rows):
        yield from taken
