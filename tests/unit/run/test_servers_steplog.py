"""A launch's step-log folder, plugin folder and env (run/servers.steplog_launch)."""

import os

from specbench import __version__
from specbench.hooks.site import folder_sha256, plugin_files, tree_sha256
from specbench.run.servers import steplog_launch
from specbench.schemas.meta import ServerMeta
from specbench.suite import ServerConfig


def test_off_adds_nothing_and_makes_no_folder(tmp_path):
    launch = steplog_launch(tmp_path / "logs", ServerConfig(name="b"), {})
    assert launch.env == {} and launch.meta == {}
    assert not (tmp_path / "logs").exists()


def test_each_start_gets_its_folder_the_plugin_is_built_once_in_the_cache_and_pythonpath_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/from/the/harness")
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    logs, cfg = tmp_path / "logs", ServerConfig(name="spec", steplog="timing")
    launch = steplog_launch(logs, cfg, {"PYTHONPATH": "/from/the/suite"})
    env, digest = launch.env, tree_sha256(plugin_files(__version__))
    site = tmp_path / "cache" / "plugin" / digest[:16]
    assert env["SPECBENCH_STEPLOG"] == "timing" and env["SPECBENCH_STEPLOG_DIR"] == str((logs / "steplog/spec-s0").resolve())
    assert env["PYTHONPATH"] == os.pathsep.join([str(site), "/from/the/suite"])
    assert (site / "specbench" / "hooks" / "vllm_steplog.py").is_file() and folder_sha256(site) == digest
    assert os.listdir(logs / "steplog") == ["spec-s0"]  # no copy of the plugin in the run
    meta = ServerMeta.from_dict({"engine": "vllm", **launch.meta}, "server")  # meta.json's server entry reads it strictly
    assert meta.steplog == "logs/steplog/spec-s0" and meta.steplog_level == "timing"
    assert meta.steplog_plugin is not None and (meta.steplog_plugin.path, meta.steplog_plugin.sha256) == (str(site), digest)
    stamp = (site / "specbench_steplog-0.dist-info" / "METADATA").stat().st_mtime_ns
    second = steplog_launch(logs, cfg, {})  # the next start of the same config; the harness's PYTHONPATH kept
    assert second.env["SPECBENCH_STEPLOG_DIR"].endswith("spec-s1") and second.env["PYTHONPATH"].endswith("/from/the/harness")
    assert (site / "specbench_steplog-0.dist-info" / "METADATA").stat().st_mtime_ns == stamp  # reused, not rewritten
    other = steplog_launch(tmp_path / "other-run" / "logs", cfg, {})  # another run: the same folder
    assert other.meta["steplog_plugin"] == launch.meta["steplog_plugin"]
    assert steplog_launch(logs, cfg, {}, start=7).env["SPECBENCH_STEPLOG_DIR"].endswith("spec-s7")
    steplog_launch(logs, ServerConfig(name="spec-small", steplog="steps"), {})
    assert steplog_launch(logs, cfg, {}).env["SPECBENCH_STEPLOG_DIR"].endswith("spec-s8")  # spec-small-s0 is not a start of spec
