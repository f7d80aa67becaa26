"""Docstrings and comments under specbench/ name modules that exist: every ``name.py`` / ``pkg/name.py``
and every dotted ``specbench.x.y`` resolves, so a module that moved cannot leave its old name behind
in the words that explain the code."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
from pathlib import Path

from tests.support.paths import ROOT

PACKAGE = ROOT / "specbench"
FILE_REF = re.compile(r"(?<![\w./-])((?:[\w-]+/)*\w+\.py)\b")
DOTTED_REF = re.compile(r"(?<![\w.])specbench(?:\.\w+)+")

#: files of other projects that docstrings cite for a behaviour specbench follows (not ours to resolve)
EXTERNAL = {
    "config/speculative.py": "run/whatif.py: the file of an installed vLLM that says which speculative options it has",
}


def texts(path: Path) -> list[tuple[int, str]]:
    """The docstrings (any string standing as a statement) and comments of a module, with their line numbers."""
    source = path.read_text(encoding="utf-8")
    found = [(node.lineno, node.value.value) for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]
    found += [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return sorted(found)


def file_resolves(ref: str, where: Path) -> bool:
    """``ref`` is a file beside ``where``, under specbench/ or a stage package, or in the repository."""
    if ref in EXTERNAL:
        return True
    bases = [where.parent, PACKAGE, ROOT, *(p for p in PACKAGE.iterdir() if p.is_dir())]
    return any((base / ref).is_file() for base in bases)


def dotted_resolves(ref: str) -> bool:
    """``specbench.a.b.c``: the longest importable module prefix, then attributes for the rest."""
    parts = ref.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except ModuleNotFoundError:
            continue
        obj = importlib.import_module(name)
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def unresolved() -> list[str]:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in texts(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            bad += [f"{where}: {ref}" for ref in FILE_REF.findall(text) if not file_resolves(ref, path)]
            bad += [f"{where}: {ref}" for ref in DOTTED_REF.findall(text) if not dotted_resolves(ref)]
    return bad


def test_every_module_named_in_a_docstring_or_comment_exists():
    assert unresolved() == []


def test_the_check_sees_a_moved_module(tmp_path, monkeypatch):
    """The check itself: a docstring naming a file or a dotted module that is not there is caught."""
    assert not file_resolves("row_check.py", PACKAGE / "schemas" / "row.py")
    assert not file_resolves("measure.py", PACKAGE / "report" / "markdown.py")
    assert file_resolves("keepup.py", PACKAGE / "launch" / "engines.py")  # measure/keepup.py, a stage package's module
    assert not dotted_resolves("specbench.gate.checks") and dotted_resolves("specbench.suite.checks")
    assert dotted_resolves("specbench.util.diskio.write_output") and not dotted_resolves("specbench.util.diskio.nothing")
    source = '"""See plots.py."""\nx = f(\n    "not prose.py")  # and row_check.py\n'
    assert texts_of(source, tmp_path) == [(1, "See plots.py."), (3, "# and row_check.py")]


def texts_of(source: str, tmp_path: Path) -> list[tuple[int, str]]:
    path = tmp_path / "m.py"
    path.write_text(source)
    return texts(path)
