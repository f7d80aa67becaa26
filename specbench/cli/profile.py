"""`specbench profile RUN_OR_RESULTS... -o profile.json`: a drafter's acceptance profile per config × data set ×
load (measure/profile extracts it), for `specbench whatif SUITE --profile profile.json` to replay."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any


def profile_cli(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..errors import ProfileError
    from ..measure.profile import FILL_RULE, POSITIONS, profiles_from
    from ..report.explain_tables import profile_markdown
    from ..run.preflight import now
    from ..run.readback import read_run
    from ..schemas.profile_file import FORMAT, ProfileEntry, ProfileFile, ProfileSource
    from ..util.diskio import check_output_file, write_output
    from ..util.jsonio import dumps

    def say(line: str) -> None:
        print(f"specbench profile: {line}", file=sys.stderr)

    out = check_output_file(Path(args.output))
    profiles: list[ProfileEntry] = []
    refused: list[str] = []
    sources = []
    for src in args.results:
        run = read_run(src)
        assert run.path is not None
        got, bad = profiles_from(run.rows, run.meta, src, say)
        profiles += got
        refused += bad
        sources.append(ProfileSource(src, str(run.path), hashlib.sha256(run.path.read_bytes()).hexdigest(),
                                     run.meta is not None, len(got), len(bad)))
    if not profiles and len(refused) == 1:
        raise ProfileError(refused[0])
    for line in refused:
        say(line)
    if not profiles:
        raise ProfileError(f"{', '.join(args.results)}: no profile: no speculative config with acceptance counters"
                           + (f" ({len(refused)} records refused)" if refused else ""))
    written = ProfileFile(FORMAT, POSITIONS, FILL_RULE, now(), __version__, sources, profiles)
    write_output(out, dumps(written.to_dict(), indent=2, default=str) + "\n")
    print(profile_markdown(profiles))
    print(f"profile: {out} ({len(profiles)} profiles" + (f", {len(refused)} refused)" if refused else ")"), file=sys.stderr)
    return 1 if refused else 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "profile", help="a drafter's per-position acceptance per data set and load, for whatif --profile",
        description="Read the acceptance counters of runs (run directories or results.json files, also in the "
                    "reference format with acceptance_pos_1..3) and write each speculative config × data set × load "
                    "point's per-position acceptance, mean acceptance length, conditional rates, per-category "
                    "acceptance and provenance as one profile file. Positions a file does not give are filled by a "
                    "stated rule and listed as estimated. Exit 1 when some record was refused (the file is still "
                    "written), 2 when no profile could be made.")
    p.add_argument("results", nargs="+", metavar="RUN_OR_RESULTS", help="run directory or results.json (several: all)")
    p.add_argument("--output", "-o", required=True, help="the profile file to write (JSON)")
    p.set_defaults(func=profile_cli)
