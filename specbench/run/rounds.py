"""The order of a sequential run's servers, as a generator of visits the run consumes (``sequential``): one
server per config, baseline first, its repeats back to back; or, with ``load.restart``, every repeat of every
config on a fresh server start, repeat-major and interleaved (round 0: baseline, A, B; round 1: baseline, A,
B …), so drift over the run hits every config alike; with ``load.target_ci`` the rounds after the first stage
are planned from it (``measure.repeat_spread.planned_counts``). --resume skips each (cell, repeat) measured
already."""

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


def visits(suite: Suite, only_configs: list[str] | None, failed: Mapping[str, str],
           rows: Callable[[], list[ResultRow]]) -> Iterator[Visit]:
    """The server visits of the run, in order; taken one at a time, so what the run learns meanwhile counts: a
    config in ``failed`` is not visited again in later rounds, and the rounds after the first stage are planned
    from the ``rows`` measured by then."""
    order, load = run_order(suite, only_configs), suite.load
    if not load.restart:
        yield from ((config, None) for config in order)
        return
    planned: dict[Cell, int] | None = None
    for rep in range(load.most_repeats):
        if rep == load.first_stage and load.target_ci is not None and suite.baseline is not None:
            planned = planned_counts(rows(), suite.baseline.name, load.target_ci, load.first_stage, load.most_repeats)
        for config in order:
            if config.name in failed:
                continue
            only = round_cells(suite, config.name, rep, planned)
            if only:
                yield config, only
