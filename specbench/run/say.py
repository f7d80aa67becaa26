"""Damage found reading a run directory back, said on stderr once per process: the same files are read again
after every cell and by every later stage, and one line per damage is what a reader can act on."""

from __future__ import annotations

import sys

#: the lines said so far in this process
SAID: set[str] = set()


def say_once(line: str) -> None:
    """``line`` on stderr as a warning, unless this process said it already."""
    if line not in SAID:
        SAID.add(line)
        print(f"specbench: warning: {line}", file=sys.stderr)
