"""One meaning per name: a public class (or a type alias spelled like one) is defined in one module
of specbench only, so an import never picks the wrong ``Server`` or ``Plan`` (docs/developing.md: words)."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.support.paths import ROOT


def _class_like_names(tree: ast.Module) -> list[str]:
    names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id[:1].isupper() and not t.id.isupper()]
    return [n for n in names if not n.startswith("_")]


def test_no_public_class_name_is_defined_in_two_modules() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / "specbench").rglob("*.py")):
        for name in _class_like_names(ast.parse(path.read_text())):
            where[name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
