"""The `specbench tune` command: expand, run, choose K per load, write schedule.json (the analysis
is ``specbench.measure.best_k``); ``--verify schedule.json`` re-measures a schedule against the baseline."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import SuiteError
from ..measure.best_k import K_KEYS, tune_analysis
from ..measure.tune_result import Schedule, TuneResult
from ..run.explain import derived_suite, raw_config
from ..run.tune import expand_tune, families
from ..schemas.meta import RunMeta
from ..schemas.request import RequestRecord
from ..schemas.row import ResultRow
from ..schemas.run_files import SCHEDULE
from ..suite import Suite
from ..util.jsonio import write_json
from .common import parse_numbers, run_with_plan


def _write_schedule(out: Path, suite: Suite, result: TuneResult) -> Path:
    path = out / SCHEDULE
    write_json(path, {"suite": str(suite.path), "run": str(out), "method": result.method,
                      "schedules": [s.to_dict() for s in result.schedules], "verify": f"specbench tune --verify {path}"})
    return path


def verify_suite(schedule: dict[str, Any], where: str) -> Suite:
    """Baseline + one config per family serving its schedule, from the suite the schedule was tuned on."""
    from ..suite import load_suite

    if not isinstance(schedule, dict) or not isinstance(schedule.get("schedules"), list) or "suite" not in schedule:
        raise SuiteError(f"{where}: not a schedule written by specbench tune (needs 'suite' and 'schedules')")
    schedules = [Schedule.from_dict(s, f"{where}: schedules[{i}]") for i, s in enumerate(schedule["schedules"])]
    suite = load_suite(schedule["suite"])
    configs = [raw_config(suite, suite.baseline)] if suite.baseline else []
    if not configs:
        raise SuiteError(f"{schedule['suite']}: no baseline config to verify the schedule against")
    by_family = families([c for c in suite.configs if c is not suite.baseline and c.method and c.launched])
    for s in schedules:
        spec = s.speculative_config
        if not spec:
            continue
        members = by_family.get(s.family)
        if not members:
            raise SuiteError(f"{where}: family {s.family!r} no longer matches a config of {schedule['suite']}")
        raw = raw_config(suite, members[0])
        raw["name"] = f"{s.family}_schedule"
        raw["num_speculative_tokens"] = spec["num_speculative_tokens"]
        raw.pop("port", None)
        raw["speculative"] = {**{k: v for k, v in (raw.get("speculative") or {}).items() if k not in K_KEYS},
                              "num_speculative_tokens_per_batch_size": spec["num_speculative_tokens_per_batch_size"]}
        configs.append(raw)
    if len(configs) == 1:
        raise SuiteError(f"{where}: no schedule with an engine flag to verify (speculation off everywhere, or an "
                         "engine without a per-batch-size K)")
    return derived_suite(suite, "schedule", configs)


def tune_cli(args: argparse.Namespace) -> int:
    from ..run import default_output
    from ..suite import load_suite

    if args.verify:
        path = Path(args.verify)
        try:
            schedule = json.loads(path.read_text())
        except FileNotFoundError:
            raise SuiteError(f"{path}: schedule file not found") from None
        except json.JSONDecodeError as err:
            raise SuiteError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None
        suite = verify_suite(schedule, str(path))
        out = Path(args.resume or args.output or default_output(suite))
        outcome, _ = run_with_plan(suite, out, "schedule", {"from": str(path)}, resume=bool(args.resume), quiet=args.quiet)
        return outcome.exit_code
    if not args.suite or not args.k:
        raise SuiteError("tune: give SUITE and --k 1,2,3 (or --verify schedule.json)")
    suite = load_suite(args.suite)
    derived, plan = expand_tune(suite, parse_numbers(args.k, "--k", int), args.config or None)
    plan["suite"] = str(suite.path)
    out = Path(args.resume or args.output or default_output(derived))

    chosen: list[TuneResult] = []

    def choose_k(rows: list[ResultRow], requests: list[RequestRecord], meta: RunMeta) -> None:
        chosen.append(tune_analysis(rows, requests, meta))
        assert meta.tune is not None  # the plan, set when the run began
        meta.tune["result"] = chosen[-1].to_dict()

    outcome, _ = run_with_plan(derived, out, "tune", plan, resume=bool(args.resume), quiet=args.quiet,
                               on_finish=choose_k)
    if chosen:  # the analysis runs at the final write, which an interrupted run still makes
        path = _write_schedule(out, suite, chosen[-1])
        print(f"schedule: {path} (re-measure it with: specbench tune --verify {path})")
    return outcome.exit_code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tune", help="best number of draft tokens K per load, and the schedule that serves it",
        description="Expand the suite's speculative configs over K values (one server per K, baseline included, paired "
                    "prompts), report the best K per load with the Ks not told apart from it, and write schedule.json "
                    "with the engine flag. --verify schedule.json re-measures that schedule.")
    p.add_argument("suite", nargs="?", help="suite YAML file")
    p.add_argument("--k", help="K values, e.g. 1,2,3,5,7")
    p.add_argument("--config", action="append", metavar="NAME", help="only the family of this config (repeatable)")
    p.add_argument("--verify", metavar="SCHEDULE", help="re-measure a schedule.json written by tune against the baseline")
    p.add_argument("--output", "-o", help="run directory (default results/<suite>-tune-<timestamp>/)")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR")
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress")
    p.set_defaults(func=tune_cli)
