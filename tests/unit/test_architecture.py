"""The house rules, read from the source: stage packages in pipeline order, imports that flow down
only, no cycle, small modules and classes, no private name crossing a module boundary.

The stages, earliest first; a module may import its own stage or an earlier one. Type-only imports
(under ``TYPE_CHECKING``) count like any other: a circle they hide is a circle of meaning, and the stage
order holds for what a module names as much as for what it runs.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from specbench.hooks import plugin_site
from tests.support.paths import ROOT

PKG = ROOT / "specbench"

STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("specbench", "specbench.errors")),
    ("hooks", ("specbench.hooks",)),  # runs inside the engine's processes: standard library only
    ("util", ("specbench.util",)),
    ("schemas", ("specbench.schemas",)),
    ("config", ("specbench.suite", "specbench.datasets")),
    ("engines", ("specbench.launch", "specbench.bundle")),
    ("client", ("specbench.client",)),
    ("load", ("specbench.load",)),
    ("grade", ("specbench.grade",)),  # answers and programs graded: measure's quality reads the grades
    ("measure", ("specbench.measure",)),
    ("run", ("specbench.run",)),
    ("gate", ("specbench.gate",)),
    ("report", ("specbench.report",)),
    ("cli", ("specbench.cli", "specbench.__main__")),
]
TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py"}
#: third-party packages a function may import lazily: optional extras, or heavy ones a command needs alone
LAZY_OK = {"ray", "pynvml", "pyarrow", "datasets", "huggingface_hub", "tiktoken", "openai", "torch", "gguf",
           "safetensors", "transformers", "uvloop", "numpy", "multiprocessing", "resource", "webbrowser"}
MAX_MODULE_LINES, MAX_CLASS_LINES = 400, 120


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    imports: list[tuple[str, tuple[str, ...], int, bool]] = field(default_factory=list)  # target, names, line, in a function


def _walk(node: ast.AST, in_function: bool = False):
    for child in ast.iter_child_nodes(node):
        yield child, in_function
        yield from _walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))


def read_modules() -> dict[str, Module]:
    mods = {}
    for path in sorted(PKG.rglob("*.py")):
        mods[module_name(path)] = Module(module_name(path), path, ast.parse(path.read_text(), str(path)))
    for mod in mods.values():
        is_pkg = mod.path.name == "__init__.py"
        for node, in_function in _walk(mod.tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.name.split(".") if is_pkg else mod.name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                mod.imports.append((target, tuple(a.name for a in node.names), node.lineno, in_function))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    mod.imports.append((a.name, (), node.lineno, in_function))
    return mods


MODULES = read_modules()


def resolve(target: str, names: tuple[str, ...]) -> list[str]:
    """The specbench modules an import statement loads (a ``from pkg import submodule`` names the submodule)."""
    if not target.startswith("specbench"):
        return []
    out = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return out or [target]


def stage_of(name: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(STAGES):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{name}: in no stage of STAGES"
    return rank


def edges() -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for mod in MODULES.values():
        for target, names, _, _ in mod.imports:
            for dep in resolve(target, names):
                if dep != mod.name:
                    out[mod.name].add(dep)
    return out


def cycles(graph: dict[str, set[str]], nodes: list[str] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in MODULES if nodes is None else nodes:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert cycles(edges()) == []


def package_of(name: str) -> str:
    """``specbench.run.parallel.worker`` → ``specbench.run``: the stage package a module is in."""
    return ".".join(name.split(".")[:2])


def test_no_circle_between_packages() -> None:
    """Two packages of one stage may import each other's modules without a module circle (grade and measure
    once did); their packages still may not."""
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, deps in edges().items():
        graph[package_of(mod)] |= {package_of(d) for d in deps if package_of(d) != package_of(mod)}
    assert cycles(graph, list(graph)) == []


def test_imports_flow_down_the_pipeline() -> None:
    up = []
    for mod in MODULES.values():
        for target, names, line, _ in mod.imports:
            for dep in resolve(target, names):
                if stage_of(dep) > stage_of(mod.name):
                    up.append(f"{mod.path.relative_to(ROOT)}:{line}: {STAGES[stage_of(mod.name)][0]} imports "
                              f"{dep} ({STAGES[stage_of(dep)][0]})")
    assert up == []


def test_every_module_is_in_a_stage_and_few_stay_at_the_top() -> None:
    for name in MODULES:
        stage_of(name)
    assert {p.name for p in PKG.glob("*.py")} <= TOP_LEVEL


def test_package_faces_export_their_library_never_their_command() -> None:
    bad = []
    for mod in MODULES.values():
        if mod.path.name != "__init__.py" or mod.name.startswith("specbench.cli"):
            continue
        for target, names, line, _ in mod.imports:
            deps = resolve(target, names)
            if any(d.startswith("specbench.cli") or d.endswith(".cli") for d in deps) or \
                    any(n == "register" or n.endswith("_cli") for n in names):
                bad.append(f"{mod.path.relative_to(ROOT)}:{line}")
    assert bad == []


def test_imports_inside_functions_only_where_start_up_time_needs_them() -> None:
    """Imports sit at the top of a module; the commands (cli/) defer theirs for start-up time, and
    any module may defer an optional or heavy third-party package."""
    bad = []
    for mod in MODULES.values():
        for target, _, line, in_function in mod.imports:
            if not in_function or target == "__future__":
                continue
            if mod.name.startswith("specbench.cli"):
                continue
            if target.startswith("specbench") or target.split(".")[0] not in LAZY_OK:
                bad.append(f"{mod.path.relative_to(ROOT)}:{line}: {target}")
    assert bad == []


@pytest.mark.parametrize("mod", sorted(MODULES.values(), key=lambda m: m.name), ids=lambda m: m.name)
def test_modules_and_classes_stay_small(mod: Module) -> None:
    lines = len(mod.path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{mod.path.relative_to(ROOT)}: {lines} lines"
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.ClassDef):
            size = node.end_lineno - node.lineno + 1
            assert size <= MAX_CLASS_LINES, f"{mod.path.relative_to(ROOT)}:{node.lineno}: class {node.name} has {size} lines"


def test_no_private_name_is_imported_across_modules() -> None:
    bad = [f"{m.path.relative_to(ROOT)}:{line}: {n}" for m in MODULES.values() for target, names, line, _ in m.imports
           if target.startswith("specbench") for n in names if n.startswith("_") and n != "__version__"]
    assert bad == []


#: what building the parser may load beyond the commands: the lists its help shows (report formats, bundle excludes)
PARSER_NEEDS = ("specbench.report", "specbench.report.formats", "specbench.bundle", "specbench.util")


def test_the_command_line_starts_without_the_stages() -> None:
    """cli/__init__.py's promise: ``import specbench.cli`` loads no stage package, and building the parser (what
    ``specbench --help`` and every command do first) only what its help shows."""
    probe = ("import json, sys\nimport specbench.cli\nmine = lambda: sorted(m for m in sys.modules if m.startswith('specbench'))\n"
             "first = mine()\nspecbench.cli.build_parser()\nprint(json.dumps([first, mine()]))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    first, parser = json.loads(done.stdout)
    assert [m for m in first if STAGES[stage_of(m)][0] not in ("foundation", "cli")] == []
    assert [m for m in parser if STAGES[stage_of(m)][0] not in ("foundation", "cli")
            and not any(m == p or m.startswith(p + ".") for p in PARSER_NEEDS)] == []


def test_engine_hooks_import_only_the_standard_library_and_their_own_package() -> None:
    """specbench/hooks runs inside the engine's processes, whose Python has none of specbench's dependencies."""
    bad = [f"{m.path.relative_to(ROOT)}:{line}: {target}" for m in MODULES.values() if m.name.startswith("specbench.hooks")
           for target, _, line, _ in m.imports
           if target != "__future__" and not target.startswith("specbench.hooks")
           and target.split(".")[0] not in sys.stdlib_module_names]
    assert bad == []


def test_the_plugin_folder_alone_declares_and_loads_the_step_recorder(tmp_path: Path) -> None:
    """An engine Python without specbench (``-S``: no site-packages, so not the editable install either)
    finds the entry point in the folder ``plugin_site`` builds, and nothing of specbench but its hooks."""
    site = plugin_site(tmp_path / "cache", "0.0").path
    probe = (
        "import importlib, importlib.metadata as md, importlib.util as u\n"
        "eps = [e for e in md.entry_points(group='vllm.general_plugins') if e.name == 'specbench_steplog']\n"
        "assert len(eps) == 1, eps\n"
        "register = eps[0].load()\n"
        "assert callable(register) and register.__module__ == 'specbench.hooks.vllm_steplog'\n"
        "import specbench.hooks.vllm_steplog as m\n"
        f"assert m.__file__.startswith({str(site)!r}), m.__file__\n"
        "assert [p for p in ('specbench.util', 'specbench.cli', 'specbench.schemas') if u.find_spec(p)] == []\n"
        "print('ok')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(site)
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


# ---- the tests read their own data, never the committed evidence ----

#: where committed runs live (results/evidence/, docs/developing.md) and where they lived before
EVIDENCE_PLACES = ("results/evidence", "benchmarks/results")


def path_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string a test could open as a path, with its line: each string constant but docstrings, and each chain
    ``a / "b" / "c"`` as its constants joined by ``/`` (``ROOT / "results" / "evidence"`` → ``results/evidence``)."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}

    def parts(node: ast.expr) -> list[str]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return parts(node.left) + parts(node.right)
        return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []

    out = [(n.lineno, n.value) for n in ast.walk(tree)
           if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]
    return out + [(n.lineno, "/".join(parts(n))) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)]


def test_no_test_reads_the_committed_evidence() -> None:
    """Evidence is what was measured, kept for the docs; a test that read it would make every new run a test input.
    The runs tests need are trimmed copies under tests/data/runs/<what it tests>/."""
    here = Path(__file__).resolve()
    bad = sorted({f"{path.relative_to(ROOT)}:{line}: {text!r}"
                  for path in (ROOT / "tests").rglob("*.py") if path.resolve() != here
                  for line, text in path_literals(ast.parse(path.read_text(encoding="utf-8")))
                  if any(place in text for place in EVIDENCE_PLACES)})
    assert bad == []


def test_the_evidence_check_sees_a_path_built_with_slashes() -> None:
    tree = ast.parse('"""results/evidence in a docstring is prose"""\nA = ROOT / "results" / "evidence" / "h200"\n'
                     'B = Path("benchmarks/results/cpu")\n# results/evidence in a comment\n')
    found = [text for _, text in path_literals(tree) if any(place in text for place in EVIDENCE_PLACES)]
    assert sorted(set(found)) == ["benchmarks/results/cpu", "results/evidence", "results/evidence/h200"]
