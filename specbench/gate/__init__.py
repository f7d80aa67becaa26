"""`specbench gate`: turn a results run into a CI verdict (0 pass, 1 regression, 2 unusable input).

``suite/gate.py`` parses thresholds (a suite's ``gate:`` and ``--threshold`` alike), ``judge`` (pure) turns one check and the cells of two runs into
``Verdict`` rows, ``render`` prints them; ``report/gate_run.py`` reads the runs and the suite (through
the report's loader) and judges, the command writes the step summary.
See docs/gate.md for the threshold syntax and the noise rule.
"""

from ..suite.gate import Check, GateError, GateSpec, Selector, cli_spec, lower_is_better, parse_cli_threshold
from ..util.numbers import is_number
from .judge import Measure, Run, Verdict, evaluate, index_cells, judge_drop, judge_floor, read_ci
from .render import render_markdown

__all__ = ["Check", "GateError", "GateSpec", "Measure", "Run", "Selector", "Verdict", "cli_spec", "evaluate",
           "index_cells", "is_number", "judge_drop", "judge_floor", "lower_is_better",
           "parse_cli_threshold", "read_ci", "render_markdown"]
