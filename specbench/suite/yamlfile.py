"""Bounded YAML reading for suites (and gate files): UTF-8 only, no duplicate keys, no alias bomb."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import SuiteError

#: the most YAML nodes a suite may expand to through aliases (a few hundred is typical; an alias bomb is billions)
MAX_NODES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _yaml_problem(err: yaml.YAMLError) -> tuple[str, str]:
    """(":LINE" or "", one-line reason) of a PyYAML error."""
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.reader.ReaderError):
        code = ord(err.character) if isinstance(err.character, str) else err.character
        return "", f"character #x{code:04x} at position {err.position} is not allowed in YAML (a binary file?)"
    line = f":{mark.line + 1}" if mark is not None else ""
    reason = getattr(err, "problem", None) or str(err).splitlines()[0]
    return line, str(reason).strip()


def _check_nodes(root: yaml.Node, path: Path) -> None:
    """Duplicate keys (any depth) and alias expansion, checked on the node graph before anything is
    built from it: an alias is a reference, so the expanded size is counted once per node."""
    size: dict[int, int] = {}
    active: set[int] = set()

    def walk(node: yaml.Node, where: str) -> int:
        key = id(node)
        if key in size:
            return size[key]
        if key in active:
            raise SuiteError(f"{path}:{node.start_mark.line + 1}: {where or 'document'}: an alias refers to itself (recursive YAML)")
        active.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE_TAG:
                    ident = (k.tag, k.value)
                    if ident in seen:
                        raise SuiteError(f"{path}:{k.start_mark.line + 1}: {_join(where, k.value)}: duplicate key "
                                         f"{k.value!r} (first on line {seen[ident]}); each key may appear once")
                    seen[ident] = k.start_mark.line + 1
                name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                total += walk(k, where) + walk(v, _join(where, name))
        elif isinstance(node, yaml.SequenceNode):
            total += sum(walk(v, f"{where}[{i}]") for i, v in enumerate(node.value))
        active.discard(key)
        size[key] = total
        if total > MAX_NODES:
            raise SuiteError(f"{path}: {where or 'document'}: expands to more than {MAX_NODES} YAML nodes "
                             "(through &anchor/*alias references); write the values out or use fewer aliases")
        return total

    walk(root, "")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else str(key)


def read_yaml(path: str | Path, what: str = "suite file") -> Any:
    """A YAML file as data, bounded: UTF-8 text only, no duplicate keys, no alias bomb, no
    recursion; every problem is one ``SuiteError`` line naming the file (and line)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SuiteError(f"{path}: {what} not found") from None
    except OSError as err:
        raise SuiteError(f"{path}: cannot read {what}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SuiteError(f"{path}: not a UTF-8 text file (byte 0x{raw[err.start]:02x} at offset {err.start})") from None
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, path)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        line, reason = _yaml_problem(err)
        raise SuiteError(f"{path}{line}: not valid YAML: {reason}") from None
    except RecursionError:
        raise SuiteError(f"{path}: nested too deeply to be a suite") from None
    finally:
        if loader is not None:
            loader.dispose()
