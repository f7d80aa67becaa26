"""Running a suite: the run directory, whose one owner this package is (``rundir``: writing it and
reading it to resume; ``readback``: reading it for the report, gate, history and export; ``history``: the
runs under a directory found, read and classified; ``files_read``: meta.json and JSONL lines as every reader
reads them;
``session``: meta.json's life; the names in ``schemas/run_files.py``), one
phase of a cell (``phases``), server lifecycle (``servers``), and the two ways to go through the
cells: ``sequential`` (one config after another) and ``parallel`` (configs side by side). The I/O the
measure stage leaves to it: GPU energy and samples over a phase (``telemetry``), the o200k_base
encoding file (``o200k_file``), the step log's files (``steplog``).

Every write to a run directory goes through ``RunSession`` → ``RunDir``.
"""

from .history import RunEntry, SuiteHistory, history, read_named_run
from .preflight import default_output, load_points, preflight
from .readback import RunResults, read_requests, read_results, read_run
from .rundir import RunDir
from .sequential import RunOutcome, SequentialRun, run_suite
from .session import RunSession

__all__ = ["RunDir", "RunEntry", "RunOutcome", "RunResults", "RunSession", "SequentialRun", "SuiteHistory",
           "default_output", "history", "load_points", "preflight", "read_named_run", "read_requests", "read_results",
           "read_run", "run_suite"]
