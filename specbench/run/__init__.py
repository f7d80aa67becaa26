"""Running a suite: the run directory (``rundir``: its files; ``session``: meta.json's life), one
phase of a cell (``phases``), server lifecycle (``servers``), and the two ways to go through the
cells: ``sequential`` (one config after another) and ``parallel`` (configs side by side). The I/O the
measure stage leaves to it: GPU energy and samples over a phase (``telemetry``), the o200k_base
encoding file (``o200k_file``), the step log's files (``steplog``).

Every write to a run directory goes through ``RunSession`` → ``RunDir``.
"""

from .preflight import default_output, load_points, preflight
from .rundir import RunDir
from .sequential import RunOutcome, SequentialRun, run_suite
from .session import RunSession

__all__ = ["RunDir", "RunOutcome", "RunSession", "SequentialRun", "default_output", "load_points", "preflight",
           "run_suite"]
