"""`specbench export RUN -o DIR`: a run as the public spec-decode profiling tables (parquet)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def export_cli(args: argparse.Namespace) -> int:
    from ..report.export import export_run
    from ..util.diskio import check_output_dir

    check_output_dir(Path(args.output))
    done = export_run(Path(args.run), Path(args.output), gpu=args.gpu)
    for note in done.notes:
        print(f"specbench: note: {note}", file=sys.stderr)
    print(f"wrote {len(done.files)} parquet files under {args.output}")
    return 0


def register(sub: Any) -> None:
    export = sub.add_parser("export", help="write a run as profiling tables (runs/, requests/, steps/, outputs/ parquet)")
    export.add_argument("run", help="run directory")
    export.add_argument("--output", "-o", required=True, help="root of TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/RUN-rSTART.parquet (runs stack)")
    export.add_argument("--gpu", default=None,
                        help="GPU label for the path and the gpu column (default: each config's accelerator as the run "
                             "recorded it, h200, cpu when none: docs/run-directory.md)")
    export.set_defaults(func=export_cli)
