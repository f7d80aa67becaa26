"""The ``specbench`` command: one module per command, each with ``register(subparsers)`` and a
handler; a ``SpecbenchError`` reaches the user as one line with the exit code it carries.

Command modules import what their handler needs inside it: ``import specbench.cli`` loads no stage package,
and building the parser (``specbench --help``, and every command before it runs) only the two lists its help
shows, the report formats (``report.formats``, which imports no format) and the bundle's default excludes
(``tests/unit/test_architecture.py`` checks both).
"""

from __future__ import annotations

import argparse
import signal
import sys

from ..errors import SpecbenchError
from . import compare, export, gate, profile, report, run, setup, trace, tune, whatif

COMMANDS = (run, report, compare, gate, trace, whatif, tune, profile, export, setup)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specbench", description="Benchmark speculative decoding against plain decoding on real servers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = None
    try:  # SIGTERM is Ctrl-C: exit 130 with one line (a run forwards both to its own handler meanwhile)
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread (tests): the caller owns signals
        pass
    try:
        return args.func(args)
    except SpecbenchError as err:
        print(f"specbench: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
