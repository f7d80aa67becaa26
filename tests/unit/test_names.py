"""One meaning per name (docs/developing.md: Words), where the rule is mechanical: a public class (or a type
alias spelled like one) is defined in one module of specbench only, so an import never picks the wrong
``Server`` or ``Plan``; *load* is the traffic, never reading a file (a reader is ``read_*``); a ``ResultRow``
is a row, a ``RequestRecord`` a record, whatever holds them."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import ROOT

SOURCES = sorted((ROOT / "specbench").rglob("*.py"))

#: the public functions and methods that say *load* in its one sense, the traffic: a load point (``load_of``,
#: ``load_point(s)``, a plan's ``load``), its label, a plot over load; and the engine's own flag ``--load-format``
LOAD_SENSE = {"load", "load_of", "load_label", "load_point", "load_points", "load_plot", "load_format_args"}
#: readers still named load_*, each with where its rename waits (kept short: a name here is a debt)
PENDING = {"load_prompts": "specbench/datasets/loader.py, renamed with the datasets work under way"}

#: the words for a result row and a request record, and the names each must never be given
WRONG_NAMES = {"ResultRow": {"record", "records", "rec", "recs"}, "RequestRecord": {"row", "rows"}}
#: modules still naming rows records, each with where its rename waits (kept short: a module here is a debt)
PENDING_ROWS = dict.fromkeys(("specbench/report/colspec.py", "specbench/report/columns.py",
                              "specbench/report/quality_columns.py", "specbench/report/steplog_columns.py"),
                             "Rows parameters named records: the column specs, rewritten by the metric declarations' work")


def _class_like_names(tree: ast.Module) -> list[str]:
    names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id[:1].isupper() and not t.id.isupper()]
    return [n for n in names if not n.startswith("_")]


def test_no_public_class_name_is_defined_in_two_modules() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in SOURCES:
        for name in _class_like_names(ast.parse(path.read_text())):
            where[name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def load_names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of every public function or method named ``load`` or ``load_*``."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.name == "load" or node.name.startswith("load_")):
            yield node.lineno, node.name


def test_load_is_the_traffic_and_a_reader_is_read() -> None:
    """Reading a file is *read*: a public ``load_*`` is a load point's, its label's or a plot's over load."""
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in SOURCES for line, name in load_names(ast.parse(path.read_text()))
           if name not in LOAD_SENSE | set(PENDING)]
    assert bad == []


def test_the_pending_readers_are_still_there() -> None:
    """A rename done leaves its debt behind here: the list shrinks with it."""
    found = {name for path in SOURCES for _, name in load_names(ast.parse(path.read_text()))}
    assert sorted(set(PENDING) - found) == []


def type_aliases(sources: list[Path]) -> dict[str, str]:
    """Module-level aliases of the two types (``Rows = Sequence[ResultRow]``), by name, as written."""
    out = {}
    for path in sources:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                text = ast.unparse(node.value)
                if node.targets[0].id[:1].isupper() and any(re.search(rf"\b{kind}\b", text) for kind in WRONG_NAMES):
                    out[node.targets[0].id] = text
    return out


ALIASES = type_aliases(SOURCES)


def expanded(annotation: str, aliases: dict[str, str]) -> str:
    return re.sub(r"\b[A-Z]\w*\b", lambda m: aliases.get(m.group(0), m.group(0)), annotation)


def typed_names(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, name, annotation) of every annotated parameter, variable, attribute and dataclass field."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if a.annotation is not None:
                    yield a.lineno, a.arg, ast.unparse(a.annotation)
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
            if name is not None:
                yield node.lineno, name, ast.unparse(node.annotation)


def wrong_names(path: Path, root: Path = ROOT, aliases: dict[str, str] = ALIASES) -> list[str]:
    return [f"{path.relative_to(root)}:{line}: {name}: {annotation}"
            for line, name, annotation in typed_names(ast.parse(path.read_text()))
            for kind, wrong in WRONG_NAMES.items() if re.search(rf"\b{kind}\b", expanded(annotation, aliases)) and name in wrong]


def test_a_result_row_is_a_row_and_a_request_record_a_record() -> None:
    assert [line for path in SOURCES if str(path.relative_to(ROOT)) not in PENDING_ROWS for line in wrong_names(path)] == []


def test_the_pending_row_names_are_still_there() -> None:
    assert sorted(f for f in PENDING_ROWS if not wrong_names(ROOT / f)) == []


def test_the_word_checks_see_what_they_guard(tmp_path: Path) -> None:
    """The checks find a reader named load_* and a row called a record, in every place a name is given."""
    (tmp_path / "m.py").write_text(
        "def load_run(path): ...\n"
        "class A:\n    records: list[ResultRow]\n    def load(self): ...\n"
        "def f(rec: ResultRow, *, rows: Sequence[RequestRecord]) -> None:\n    recs: list[ResultRow] = []\n"
        "Rows = Sequence[ResultRow]\ndef g(records: Rows, row: ResultRowish) -> None: ...\n")
    tree = ast.parse((tmp_path / "m.py").read_text())
    assert sorted(name for _, name in load_names(tree)) == ["load", "load_run"]
    aliases = type_aliases([tmp_path / "m.py"])
    assert aliases == {"Rows": "Sequence[ResultRow]"}
    assert [line.split(": ", 1)[1] for line in wrong_names(tmp_path / "m.py", tmp_path, aliases)] == [
        "rec: ResultRow", "rows: Sequence[RequestRecord]", "records: Rows", "records: list[ResultRow]", "recs: list[ResultRow]"]
