"""The step recorder's plugin folder (hooks/site.plugin_site): built once per specbench version and hook content in
the cache, named by its sha256, reused while intact, rebuilt when damaged, in a temporary folder where the cache
cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.hooks.site import DIST_INFO, folder_sha256, plugin_files, plugin_site, tree_sha256


def test_the_folder_is_named_by_its_sha256_and_its_version_is_part_of_it(tmp_path: Path) -> None:
    site = plugin_site(tmp_path, "1.0")
    assert site.path == tmp_path / "plugin" / site.sha256[:16] and folder_sha256(site.path) == site.sha256
    assert 'version__ = \'1.0\'' in (site.path / "specbench" / "__init__.py").read_text()
    assert (site.path / DIST_INFO / "entry_points.txt").read_text().startswith("[vllm.general_plugins]\n")
    other = plugin_site(tmp_path, "1.1")
    assert other.sha256 != site.sha256 and other.path != site.path and folder_sha256(site.path) == site.sha256


def test_an_intact_folder_is_reused_and_bytecode_does_not_count(tmp_path: Path) -> None:
    site = plugin_site(tmp_path, "1.0")
    (site.path / "specbench" / "hooks" / "__pycache__").mkdir()
    (site.path / "specbench" / "hooks" / "__pycache__" / "site.cpython-311.pyc").write_bytes(b"\0")  # a server imported it
    stamp = (site.path / DIST_INFO / "METADATA").stat().st_mtime_ns
    assert plugin_site(tmp_path, "1.0") == site
    assert (site.path / DIST_INFO / "METADATA").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "plugin").iterdir()] == [site.path.name]  # nothing left beside it


@pytest.mark.parametrize("damage", ["edited", "removed", "added"])
def test_a_damaged_folder_is_rebuilt(tmp_path: Path, damage: str) -> None:
    site = plugin_site(tmp_path, "1.0")
    hook = site.path / "specbench" / "hooks" / "vllm_steplog.py"
    if damage == "edited":
        hook.write_text("raise SystemExit\n")
    elif damage == "removed":
        hook.unlink()
    else:  # a second dist-info would declare other entry points
        (site.path / "evil-0.dist-info").mkdir()
        (site.path / "evil-0.dist-info" / "entry_points.txt").write_text("[vllm.general_plugins]\nx = os:system\n")
    assert folder_sha256(site.path) != site.sha256
    again = plugin_site(tmp_path, "1.0")
    assert again == site and folder_sha256(site.path) == site.sha256 and not (site.path / "evil-0.dist-info").exists()
    assert [p.name for p in (tmp_path / "plugin").iterdir()] == [site.path.name]


def test_a_cache_that_cannot_be_written_gives_a_temporary_folder_reused_by_the_process(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")  # a cache path under a file: no folder can be made there (root included)
    site = plugin_site(tmp_path / "file", "2.0")
    assert not site.path.is_relative_to(tmp_path) and folder_sha256(site.path) == site.sha256
    assert site.sha256 == tree_sha256(plugin_files("2.0"))
    assert plugin_site(tmp_path / "file", "2.0") == site  # the next launch of this process: the same folder
