"""The bundle keeps the host working (issue 38, item 4): what the host's own packages require of the
wheels that would shadow theirs is honoured, and ``unpack.py`` imports the engine's model path before it
says ready.

The index mirrors the H200 failure: the host's transformers 1.0 asks ``hub>=1.5,<2.0``, the index's
newest transformers (1.1) and the engine allow hub 2.4, and the newest ``ds`` (the role of datasets,
which specbench brings) needs hub>=2.0; pip alone picks ds 2.0 + hub 2.4, which shadows the host's hub
1.33 and breaks the host's transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.bundle import build_bundle
from tests.support.wheels import make_wheel, offline_pip

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def hub_index(folder: Path, host_transformers: bool = True, engine_requires: tuple[str, ...] = ()) -> Path:
    folder.mkdir()
    make_wheel(folder, "eng", "1.0", ["transformers>=0.5", "ds", *engine_requires])
    make_wheel(folder, "transformers", "1.1", ["hub>=1.5"])
    if host_transformers:  # the host's version, as the index has it
        make_wheel(folder, "transformers", "1.0", ["hub>=1.5,<2.0"])
    make_wheel(folder, "ds", "1.0", ["hub>=1.0"])
    make_wheel(folder, "ds", "2.0", ["hub>=2.0"])
    make_wheel(folder, "hub", "1.33")
    make_wheel(folder, "hub", "2.4")
    return folder


def pack(index: Path, host_list: Path, out: Path) -> tuple[dict, list[str]]:
    said: list[str] = []
    manifest = build_bundle("eng==1.0", host_list, out, python_version=PY, platform="manylinux_2_28_x86_64",
                            part_size=1 << 20, index_args=["--no-index", "--find-links", str(index)],
                            resolver_python=sys.executable, log=said.append)
    return manifest, said


def host_site(folder: Path, hub: str = "1.33") -> Path:
    """The host's own transformers 1.0 and hub: transformers refuses to import next to a hub 2.x, as the
    real one does (its dependency check at import)."""
    auto = folder / "transformers" / "models" / "auto"
    auto.mkdir(parents=True)
    (folder / "transformers" / "__init__.py").write_text(
        "import hub\n__version__ = '1.0'\n"
        "if not hub.VERSION.startswith('1.'):\n"
        "    raise ImportError('hub>=1.5.0,<2.0 is required for a normal functioning of this module, but found hub==' + hub.VERSION + '.')\n")
    for init in (folder / "transformers" / "models", auto):
        (init / "__init__.py").write_text("")
    (auto / "modeling_auto.py").write_text("AutoModelForCausalLM = object\n")
    (auto / "tokenization_auto.py").write_text("AutoTokenizer = object\n")
    (folder / "hub").mkdir()
    (folder / "hub" / "__init__.py").write_text(f"VERSION = {hub!r}\n")
    return folder


def unpack(out: Path, site: Path, host: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(out / "unpack.py"), "--site", str(site)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(host)}, cwd=out)


def test_a_freeze_list_gets_the_host_requirements_from_the_index_and_the_host_keeps_working(tmp_path: Path, monkeypatch) -> None:
    offline_pip(monkeypatch)
    index = hub_index(tmp_path / "index")
    host_list = tmp_path / "pip-freeze.txt"
    host_list.write_text("transformers==1.0\nhub==1.33\n")
    manifest, said = pack(index, host_list, tmp_path / "out")
    names = sorted(w["name"] for w in manifest["wheels"])
    # pip alone packs ds 2.0 + hub 2.4; honouring the host's transformers 1.0 (hub<2.0) keeps its hub
    assert names == ["ds", "eng"], said
    assert {w["name"]: w["version"] for w in manifest["wheels"]}["ds"] == "1.0"
    host = manifest["host_packages"]
    assert host["used"]["hub"]["host_version"] == "1.33" and host["used"]["transformers"]["host_version"] == "1.0"
    assert host["requirements_from"] == "index" and host["requirements_unknown"] == {}
    assert host["honoured"] == {"hub": {"required": "<2.0,>=1.5", "by": ["transformers"]}}
    assert any(line.startswith("host: hub<2.0,>=1.5 (the host's transformers 1.0); packing hub 2.4") for line in said), said
    # on the host: the engine, and transformers' model path, import from the site folder before "ready"
    assert manifest["imports"] == ["eng", "transformers", "transformers.models.auto.modeling_auto",
                                   "transformers.models.auto.tokenization_auto"]
    done = unpack(tmp_path / "out", tmp_path / "site", host_site(tmp_path / "host"))
    assert done.returncode == 0, done.stderr
    assert "unpack: ready: 4 modules import" in done.stderr and done.stdout.startswith("export PYTHONPATH=")


def test_a_pip_inspect_list_carries_the_host_requirements(tmp_path: Path, monkeypatch) -> None:
    offline_pip(monkeypatch)
    index = hub_index(tmp_path / "index", host_transformers=False)  # the index cannot tell what the host's 1.0 needs
    report = {"version": "1", "installed": [
        {"metadata": {"name": "transformers", "version": "1.0", "requires_dist": ["hub<2.0,>=1.5", 'extra-only; extra == "x"']}},
        {"metadata": {"name": "hub", "version": "1.33"}},
    ]}
    host_list = tmp_path / "pip-inspect.json"
    host_list.write_text(json.dumps(report))
    manifest, said = pack(index, host_list, tmp_path / "out")
    assert sorted(w["name"] for w in manifest["wheels"]) == ["ds", "eng"], said
    assert manifest["host_packages"]["requirements_from"] == "pip inspect"
    assert manifest["host_packages"]["honoured"] == {"hub": {"required": "<2.0,>=1.5", "by": ["transformers"]}}
    assert not any("reading the requirements" in line for line in said)


def test_host_requirements_the_engine_rules_out_pack_the_engines_version_instead(tmp_path: Path, monkeypatch) -> None:
    offline_pip(monkeypatch)
    index = hub_index(tmp_path / "index", engine_requires=("hub>=2.0",))
    host_list = tmp_path / "pip-freeze.txt"
    host_list.write_text("transformers==1.0\nhub==1.33\n")
    manifest, said = pack(index, host_list, tmp_path / "out")
    versions = {w["name"]: w["version"] for w in manifest["wheels"]}
    # the host's transformers 1.0 cannot live next to the hub 2.x the engine needs: transformers 1.1 is packed too
    assert versions == {"eng": "1.0", "transformers": "1.1", "ds": "2.0", "hub": "2.4"}, said
    assert "transformers" not in manifest["host_packages"]["used"] and manifest["host_packages"]["honoured"] == {}
    assert any(c.startswith("transformers: the host's 1.0 needs hub<2.0,>=1.5, which the engine's requirements rule out")
               for c in manifest["conflicts"]), manifest["conflicts"]


def test_unpack_is_not_ready_while_a_bundled_wheel_breaks_a_host_package(tmp_path: Path, monkeypatch) -> None:
    """The host's transformers 0.9 is on no index: its requirements are unknown (said), hub 2.4 is packed,
    and unpack.py's import check is what catches it, one line naming the module and its error."""
    offline_pip(monkeypatch)
    index = hub_index(tmp_path / "index")
    host_list = tmp_path / "pip-freeze.txt"
    host_list.write_text("transformers==0.9\nhub==1.33\n")
    manifest, said = pack(index, host_list, tmp_path / "out")
    assert {w["name"]: w["version"] for w in manifest["wheels"]}["hub"] == "2.4"
    assert manifest["host_packages"]["requirements_unknown"] == {"transformers": "transformers==0.9: not on the index for this target"}
    assert any(line.startswith("warning: requirements of the host's transformers==0.9") for line in said), said
    done = unpack(tmp_path / "out", tmp_path / "site", host_site(tmp_path / "host"))
    assert done.returncode == 1 and "export PYTHONPATH" not in done.stdout
    assert "unpack: not ready, 1 of 4 imports failed with the site folder on PYTHONPATH" in done.stderr, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.strip().startswith("import transformers:"))
    assert "ImportError: hub>=1.5.0,<2.0 is required for a normal functioning of this module, but found hub==2.4." in line
    assert str(tmp_path / "host" / "transformers") in line
    again = unpack(tmp_path / "out", tmp_path / "site", host_site(tmp_path / "host2"))
    assert again.returncode == 1 and "already holds this bundle" in again.stderr  # the check runs every time


@pytest.mark.parametrize("text", ['{"installed": [{"metadata": {"version": "1"}}]}', "{not json"])
def test_a_broken_pip_inspect_report_is_one_line(tmp_path: Path, text: str) -> None:
    from specbench.errors import SpecbenchError

    host_list = tmp_path / "inspect.json"
    host_list.write_text(text)
    with pytest.raises(SpecbenchError, match=rf"^{host_list}: not a `pip inspect` report \("):
        build_bundle("eng==1.0", host_list, tmp_path / "o", python_version=PY, resolver_python=sys.executable)
