"""`specbench gate`: turn a results run into a CI verdict (0 pass, 1 regression, 2 unusable input).

``suite/gate.py`` parses thresholds (a suite's ``gate:`` and ``--threshold`` alike), ``judge`` (pure) turns one check and the cells of two runs into
``Verdict`` rows, ``render`` prints them; ``workflow`` is the gate's one door: it reads the runs (``run.readback``
in the gate's mode; a directory of runs searched for the reference) and the suite, and judges; the command
prints and writes the step summary.
See docs/gate.md for the threshold syntax and the noise rule.
"""

from ..suite.gate import Check, GateError, GateSpec, Selector, cli_spec, lower_is_better, parse_cli_threshold
from ..util.numbers import is_number
from .judge import Measure, Run, Verdict, evaluate, index_cells, judge_drop, judge_floor, read_ci
from .render import render_markdown
from .workflow import GateInputs, GateOutcome, gate_runs, reference_for

__all__ = ["Check", "GateError", "GateInputs", "GateOutcome", "GateSpec", "Measure", "Run", "Selector", "Verdict",
           "cli_spec", "evaluate", "gate_runs", "index_cells", "is_number", "judge_drop", "judge_floor",
           "lower_is_better", "parse_cli_threshold", "read_ci", "reference_for", "render_markdown"]
