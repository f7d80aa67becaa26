"""Each stage package's face decides what is public (httpx's tests/test_exported_members.py is the
model): its ``__all__`` names exactly what the face imports, every name resolves, and no face
re-exports a name it did not choose."""

from __future__ import annotations

import ast
import importlib

import pytest

from tests.support.paths import ROOT

FACES = sorted(p for p in (ROOT / "specbench").rglob("__init__.py") if p.parent.name not in ("specbench", "cli"))


def _name(path) -> str:
    return ".".join(path.parent.relative_to(ROOT).parts)


@pytest.mark.parametrize("face", FACES, ids=_name)
def test_the_face_exports_exactly_what_it_names(face) -> None:
    tree = ast.parse(face.read_text())
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module != "__future__"
                for a in n.names}
    declared = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)), None)
    assert declared is not None, f"{_name(face)}: no __all__"
    assert sorted(declared) == sorted(imported), f"{_name(face)}: __all__ and the face's imports differ"
    module = importlib.import_module(_name(face))
    assert [n for n in declared if not hasattr(module, n)] == []


def test_the_top_level_face_is_the_version_only() -> None:
    """``import specbench`` runs nothing but its version (every command starts from it): no import."""
    tree = ast.parse((ROOT / "specbench" / "__init__.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets] == ["__version__"]
