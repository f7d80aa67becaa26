"""Where a run's suite came from: the suite file's content hash and the git commit it was run at.

Recorded in ``meta.json`` at run start, so that ``specbench report results/`` can say which version
of the suite each table measured, and two runs of "the same" suite can be told apart when the file
changed. Nothing here may fail a run: without git, or outside a repository, the git part is null.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ..schemas.meta import GitState, SuiteFile

GIT_TIMEOUT_S = 5.0


def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_state(path: Path) -> GitState | None:
    """The commit checked out in the repository holding ``path``, and whether ``path`` differs from it.

    ``dirty`` is true when the file has uncommitted changes or is not tracked at all (then the
    commit does not contain what was run); None outside a git work tree.
    """
    path = Path(path).resolve()
    where = path.parent
    commit = _git(where, "rev-parse", "HEAD")
    if commit is None:
        return None
    tracked = _git(where, "ls-files", "--error-unmatch", "--", path.name) is not None
    status = _git(where, "status", "--porcelain", "--", path.name)
    return GitState(commit, (not tracked) or bool(status), tracked)


def suite_file_provenance(path: Path) -> SuiteFile:
    """The suite file's sha256 and its git state (``git`` written as null outside a work tree, as
    ``sha256`` when the file cannot be read)."""
    git = git_state(path)
    return SuiteFile.from_dict({"sha256": file_sha256(path), "git": git.to_dict() if git else None}, path)
