"""Errors that reach the user as one line: each names the file, key or URL at fault."""


class SpecbenchError(Exception):
    """Base class; ``str(err)`` is the whole message the CLI prints."""

    exit_code = 2


class SuiteError(SpecbenchError):
    """A suite file is malformed: wrong key, wrong type, missing file."""


class DatasetError(SpecbenchError):
    """A prompt set cannot be loaded (missing, malformed row, unknown recipe)."""


class LaunchError(SpecbenchError):
    """A server could not be started, or died while starting."""


class ServerError(SpecbenchError):
    """A server at a URL is unreachable or does not serve the model."""


class ResultsError(SpecbenchError):
    """A results file or directory is missing or unreadable."""


class RunDirError(SpecbenchError):
    """A run directory cannot be used as asked: it holds a run (without --resume), or holds none to resume."""


class ProfileError(SpecbenchError):
    """An acceptance profile cannot be made from a results file, or a profile file cannot be replayed."""


class RunDirWriteError(RunDirError):
    """A file of the run directory cannot be written once the run is under way (disk full, a file
    system gone read-only): the run stops; what was written before stays whole."""

    exit_code = 1


class OutputPathError(SpecbenchError):
    """A file or directory named with ``-o`` cannot be written there: a missing parent, a directory where
    a file is wanted (or the reverse), a path under a file, a read-only place. Bad input: exit 2."""


class OutputWriteError(OutputPathError):
    """The disk failed while an output was written (full, quota, I/O error): exit 1, as a run's failed
    write; no file is left under the output's name."""

    exit_code = 1


class RequestsRefused(SpecbenchError):
    """Every warm-up request of a config got the same client error (HTTP 4xx): measuring it cannot
    give another answer, so its remaining cells are skipped (the run goes on with the next config)."""

    exit_code = 1
