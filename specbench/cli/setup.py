"""``specbench setup bundle``: its options and the call."""

from __future__ import annotations

import sys
from pathlib import Path

from ..bundle.build import build_bundle
from ..bundle.plan import DEFAULT_EXCLUDE, DEFAULT_KEEP_HOST, parse_size
from ..errors import SpecbenchError


def bundle_cli(args) -> int:
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


def add_arguments(p) -> None:
    """The ``setup bundle`` options (on the ``setup`` subparser)."""
    p.add_argument("--engine", help="bundle: the engine requirement, e.g. vllm==0.26.0")
    p.add_argument("--host-packages", metavar="FILE", help="bundle: the host's `pip list` / `pip freeze` output; "
                   "what it has (compatible) is left out")
    p.add_argument("--python-version", default="3.12", help="bundle: the host's Python (default 3.12)")
    p.add_argument("--platform", default="manylinux_2_28_x86_64", help="bundle: the host's wheel platform (default manylinux_2_28_x86_64)")
    p.add_argument("--part-size", default="60M", help="bundle: size of each archive part (default 60M)")
    p.add_argument("--with", dest="with_", action="append", metavar="REQ|WHEEL|DIR",
                   help="bundle: also pack this (and its deps the host lacks); `specbench` = this harness")
    p.add_argument("--with-only", action="append", metavar="REQ|WHEEL",
                   help="bundle: also pack this one wheel without its deps (e.g. a model shipped as a wheel)")
    p.add_argument("--exclude", action="append", metavar="NAME", help="bundle: never pack NAME (glob; adds to the defaults)")
    p.add_argument("--no-default-excludes", action="store_true", help="bundle: drop the default excludes (" + ", ".join(DEFAULT_EXCLUDE) + ")")
    p.add_argument("--keep-host", action="append", metavar="NAME", help="bundle: use the host's NAME even against a pin (default: numba, numpy)")
    p.add_argument("--find-links", action="append", metavar="DIR", help="bundle: extra wheel folder for pip")
    p.add_argument("--no-index", action="store_true", help="bundle: only --find-links, no index")
    p.add_argument("--resolver-python", metavar="PATH", help="bundle: a Python of the target version to run pip with (default: found)")
    p.add_argument("--output", "-o", help="bundle: output folder")
