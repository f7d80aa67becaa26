"""`specbench trace SUITE --prompt TEXT`: one prompt through a baseline and a speculative config,
annotated token by token (written as markdown, shown in colour)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any


def trace_cli(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..run.trace import render_terminal, run_trace
    from ..suite import read_suite
    from ..util.diskio import check_output_file, write_output

    output = check_output_file(Path(args.output))
    md, spec, kinds = asyncio.run(run_trace(read_suite(args.suite), args.prompt, args.baseline, args.config,
                                            output.parent / (output.stem + "-logs")))
    write_output(output, md + "\n")
    console = Console()
    render_terminal(console, spec, kinds)
    console.print(f"trace written to {output}")
    return 0


def register(sub: Any) -> None:
    trace = sub.add_parser("trace", help="one prompt, baseline vs a speculative config, annotated token by token")
    trace.add_argument("suite", help="suite YAML (its servers and model)")
    trace.add_argument("--prompt", required=True)
    trace.add_argument("--baseline", help="baseline config name (default: the suite's baseline)")
    trace.add_argument("--config", help="speculative config name (default: the first with a method)")
    trace.add_argument("--output", "-o", default="trace.md")
    trace.set_defaults(func=trace_cli)
