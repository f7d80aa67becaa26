"""The run directory's own files: what ``--overwrite`` removes, and where their names are spelled."""

from __future__ import annotations

import ast
import re

from specbench.run.rundir import RunDir
from tests.support.paths import ROOT


def test_overwrite_removes_the_old_runs_slo_probes_and_schedule(tmp_path):
    """--overwrite used to leave slo_probes.jsonl (and a tune run's schedule.json) behind: the new run's
    probes were appended to the old run's."""
    run = RunDir(tmp_path)
    run.create()
    for name in ("meta.json", "requests.jsonl", "phases.jsonl", "results.json", "results.md", "slo_probes.jsonl",
                 "schedule.json", "requests.quarantine.jsonl"):
        (tmp_path / name).write_text("old\n")
    (tmp_path / "logs" / "old.log").write_text("old server\n")
    (tmp_path / "keep.txt").write_text("not ours")
    run.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_a_dir_holding_only_slo_probes_holds_a_run(tmp_path):
    (tmp_path / "slo_probes.jsonl").write_text("{}\n")
    assert RunDir(tmp_path).holds_run()


NAMES = ("requests.jsonl", "requests.jsonl.gz", "phases.jsonl", "results.json", "results.md", "meta.json",
         "launched.json", "slo_probes.jsonl", "schedule.json", ".specbench.lock")
OWNER = ROOT / "specbench" / "schemas" / "run_files.py"


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_the_run_directorys_file_names_are_spelled_in_one_module():
    """No string in specbench/ or benchmarks/ but schemas/run_files.py is a run directory file's name (or
    ``logs``), alone or as an f-string's path part (``f"{out}/results.json"``, ``f"{path}: meta.json"``).
    Prose that mentions a file (help texts, captions, notes) is documentation, as are docstrings and docs/."""
    pattern = re.compile(r"^[\s/:,]*(" + "|".join(re.escape(n) for n in NAMES) + r"|[\w.-]*quarantine\.jsonl|logs)[\s:,]*$")
    found = []
    for path in sorted((ROOT / "specbench").rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py")):
        if path == OWNER:
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if pattern.match(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r:.60}")
    assert found == []



def test_launched_json_keeps_each_entrys_keys_nulls_and_unknown_keys(tmp_path):
    """launched.json is read as typed identities and written back as it was: a null start time stays
    null, a key of another version stays in its place, a wrong value matches no process."""
    import json

    from specbench.launch.owned import stop_leftover
    from specbench.schemas.launched import ProcessIdentity

    run = RunDir(tmp_path)
    old = {"a": {"pid": 7, "start_ticks": None, "port": 8001, "boot_id": "b", "host": "h"},
           "b": {"pid": "seven", "start_ticks": 3}}
    (tmp_path / "launched.json").write_text(json.dumps(old))
    run.record_server("c", ProcessIdentity.from_dict({"pid": 9, "start_ticks": None, "boot_id": None, "host": "h"}))
    written = json.loads((tmp_path / "launched.json").read_text())
    assert written == {"a": old["a"], "b": {"start_ticks": 3},
                       "c": {"pid": 9, "start_ticks": None, "boot_id": None, "host": "h"}}
    assert list(written["a"]) == list(old["a"])
    assert not any(stop_leftover(identity) for identity in run.launched().values())
    run.forget_server("a")
    assert set(json.loads((tmp_path / "launched.json").read_text())) == {"b", "c"}
