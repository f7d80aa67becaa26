"""``specbench setup bundle`` offline: tiny wheels in a --find-links folder, a fake host ``pip list``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.bundle import build_bundle, parse_host_packages, parse_size, platform_tags
from specbench.cli import main
from specbench.errors import SpecbenchError
from tests.support.wheels import make_wheel, offline_pip

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture
def index(tmp_path: Path, monkeypatch) -> Path:
    """A wheel folder standing in for PyPI, and a pip that reads no config and no index."""
    offline_pip(monkeypatch)
    folder = tmp_path / "index"
    folder.mkdir()
    make_wheel(folder, "eng", "1.0", ["dep-a>=1.0", "dep-b", "torchlike==2.0", "hostpkg>=2.0", "hostold>=3.0",
                                       "extrapkg[fancy]", 'never; python_version < "3.0"', 'gpuonly; extra == "gpu"'])
    make_wheel(folder, "dep-a", "1.0", ["dep-c", "torchlike>=1"], script=True)
    make_wheel(folder, "dep-b", "1.0")
    make_wheel(folder, "dep-c", "1.0")
    make_wheel(folder, "torchlike", "2.0", ["only-via-torch"])
    make_wheel(folder, "torchlike", "3.0", ["only-via-torch"])
    make_wheel(folder, "only-via-torch", "1.0")
    make_wheel(folder, "hostpkg", "2.5")
    make_wheel(folder, "hostold", "3.1")
    make_wheel(folder, "extrapkg", "1.0", ['fancydep; extra == "fancy"'], extras=["fancy"])
    make_wheel(folder, "fancydep", "1.0")
    make_wheel(folder, "modelpkg", "0.1", ["heavy-runtime"])
    return folder


HOST = "# pip freeze of the host\nhostpkg==2.5\nhostold==2.0\ndep-b\ntorchlike==2.0+cu130\n"


def bundle(index: Path, tmp_path: Path, out: str = "out", **kw) -> tuple[dict, Path]:
    host = tmp_path / "pip-list.txt"
    host.write_text(HOST)
    dest = tmp_path / out
    kw.setdefault("exclude", ("torchlike",))
    manifest = build_bundle("eng==1.0", host, dest, python_version=PY, platform="manylinux_2_28_x86_64",
                            part_size=kw.pop("part_size", 1500), index_args=["--no-index", "--find-links", str(index)],
                            resolver_python=sys.executable, log=lambda s: None, **kw)
    return manifest, dest


def test_host_lists_in_every_pip_format() -> None:
    columns = "Package    Version   Editable project location\n---------- --------- ---\nTorch      2.11.0+cu130\nmy_pkg     1.0   /src\n"
    assert parse_host_packages(columns) == {"torch": "2.11.0+cu130", "my-pkg": "1.0"}
    freeze = "numpy==2.5.2\nfoo @ file:///x/foo.whl\n-e git+https://x#egg=bar\nBaz[extra]==3\n"
    assert parse_host_packages(freeze) == {"numpy": "2.5.2", "foo": None, "baz": "3"}
    assert parse_host_packages('[{"name": "Pydantic_Core", "version": "2.1"}]') == {"pydantic-core": "2.1"}
    assert parse_host_packages("tqdm\n") == {"tqdm": None}
    with pytest.raises(SpecbenchError, match=r"^hosts.txt:2: not a `pip list`"):
        parse_host_packages("ok==1\n!!! what\n", "hosts.txt")


def test_sizes_and_platform_tags() -> None:
    assert parse_size("60M") == 60 << 20 and parse_size("1G") == 1 << 30 and parse_size("512") == 512
    with pytest.raises(SpecbenchError, match="--part-size"):
        parse_size("big")
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in tags and "manylinux2014_x86_64" in tags
    assert "manylinux_2_31_x86_64" not in tags


def test_resolution_leaves_out_host_and_excluded(index: Path, tmp_path: Path) -> None:
    manifest, out = bundle(index, tmp_path)
    names = [w["name"] for w in manifest["wheels"]]
    assert names[0] == "eng"
    # hostold: the host's 2.0 misses >=3.0, so 3.1 is packed; dep-b: host version unknown, assumed fine;
    # fancydep: only through the [fancy] extra; only-via-torch: reached only through the excluded torchlike.
    assert sorted(names) == ["dep-a", "dep-c", "eng", "extrapkg", "fancydep", "hostold"]
    assert manifest["host_packages"]["used"]["hostpkg"] == {"host_version": "2.5", "required": ">=2.0"}
    assert manifest["host_packages"]["used"]["dep-b"]["host_version"] is None
    assert "torchlike" in manifest["excluded"]["left_out"]
    by = {w["name"]: w for w in manifest["wheels"]}
    assert by["dep-c"]["required_by"] == ["dep-a"] and by["eng"]["reason"] == "engine"


def test_parts_split_and_join_to_the_archive(index: Path, tmp_path: Path) -> None:
    manifest, out = bundle(index, tmp_path)
    parts = manifest["parts"]
    assert len(parts) > 3 and all(p["size"] == 1500 for p in parts[:-1]) and 0 < parts[-1]["size"] <= 1500
    import hashlib
    joined = b"".join((out / p["name"]).read_bytes() for p in parts)
    assert hashlib.sha256(joined).hexdigest() == manifest["archive"]["sha256"]
    for p in parts:
        assert hashlib.sha256((out / p["name"]).read_bytes()).hexdigest() == p["sha256"]
    again, _ = bundle(index, tmp_path, out="again")
    assert [p["sha256"] for p in again["parts"]] == [p["sha256"] for p in parts], "the archive is not deterministic"


def test_unpack_round_trip_imports_from_the_site_folder(index: Path, tmp_path: Path) -> None:
    manifest, out = bundle(index, tmp_path)
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, str(out / "unpack.py"), "--site", str(site), "--import", "dep_a"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"export PYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}}")
    assert (site / "dep_a_extra.py").exists() and os.access(site / "bin" / "dep_a-tool", os.X_OK)
    code = "import dep_a, dep_c, eng, hostold; print(hostold.VERSION)"
    probe = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(site)},
                           capture_output=True, text=True, cwd=tmp_path)
    assert probe.stdout.strip() == "3.1", probe.stderr
    again = subprocess.run([sys.executable, str(out / "unpack.py"), "--site", str(site)], capture_output=True, text=True)
    assert again.returncode == 0 and "already holds this bundle" in again.stderr


def test_unpack_names_missing_and_corrupt_parts(index: Path, tmp_path: Path) -> None:
    manifest, out = bundle(index, tmp_path)
    (out / manifest["parts"][1]["name"]).unlink()
    bad = out / manifest["parts"][2]["name"]
    data = bytearray(bad.read_bytes())
    data[10] ^= 0xFF
    bad.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, str(out / "unpack.py"), "--site", str(tmp_path / "site")],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{manifest['parts'][1]['name']}: missing" in done.stderr
    assert f"{manifest['parts'][2]['name']}: sha256 differs from the manifest" in done.stderr
    assert not (tmp_path / "site").exists()


def test_with_only_packs_one_wheel_without_its_deps_and_cli(index: Path, tmp_path: Path) -> None:
    manifest, _ = bundle(index, tmp_path, only=["modelpkg==0.1"])
    names = [w["name"] for w in manifest["wheels"]]
    assert names[:2] == ["eng", "modelpkg"] and "heavy-runtime" not in names
    host = tmp_path / "pip-list.txt"
    code = main(["setup", "bundle", "--engine", "eng==1.0", "--host-packages", str(host), "--python-version", PY,
                 "--part-size", "2K", "--no-index", "--find-links", str(index), "--exclude", "torchlike",
                 "--resolver-python", sys.executable, "-o", str(tmp_path / "cli")])
    assert code == 0
    m = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert m["part_size"] == 2048 and (tmp_path / "cli" / "unpack.py").exists()


def test_bad_input_is_one_line(index: Path, tmp_path: Path) -> None:
    with pytest.raises(SpecbenchError, match=r"^--host-packages: .*nope.txt: no such file$"):
        build_bundle("eng==1.0", tmp_path / "nope.txt", tmp_path / "o", python_version=PY,
                     resolver_python=sys.executable)
    with pytest.raises(SpecbenchError, match=r"^--engine: not a requirement"):
        build_bundle("eng===", None, tmp_path / "o", python_version=PY, resolver_python=sys.executable)
