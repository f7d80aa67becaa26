"""A launch's step-log folder, plugin folder and env (run/servers.steplog_launch)."""

import os

from specbench.run.servers import steplog_launch
from specbench.suite import ServerConfig


def test_off_adds_nothing_and_makes_no_folder(tmp_path):
    assert steplog_launch(tmp_path / "logs", ServerConfig(name="b"), {}) == {}
    assert not (tmp_path / "logs").exists()


def test_each_start_gets_its_folder_the_plugin_is_written_once_and_pythonpath_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/from/the/harness")
    logs, cfg = tmp_path / "logs", ServerConfig(name="spec", steplog="timing")
    env = steplog_launch(logs, cfg, {"PYTHONPATH": "/from/the/suite"})
    site = logs / "steplog" / "_plugin"
    assert env["SPECBENCH_STEPLOG"] == "timing" and env["SPECBENCH_STEPLOG_DIR"] == str((logs / "steplog/spec-s0").resolve())
    assert env["PYTHONPATH"] == os.pathsep.join([str(site.resolve()), "/from/the/suite"])
    assert (site / "specbench" / "hooks" / "vllm_steplog.py").is_file()
    stamp = (site / "specbench_steplog-0.dist-info" / "METADATA").stat().st_mtime_ns
    second = steplog_launch(logs, cfg, {})  # the next start of the same config; the harness's PYTHONPATH kept
    assert second["SPECBENCH_STEPLOG_DIR"].endswith("spec-s1") and second["PYTHONPATH"].endswith("/from/the/harness")
    assert (site / "specbench_steplog-0.dist-info" / "METADATA").stat().st_mtime_ns == stamp  # once per run
    assert steplog_launch(logs, cfg, {}, start=7)["SPECBENCH_STEPLOG_DIR"].endswith("spec-s7")
    steplog_launch(logs, ServerConfig(name="spec-small", steplog="steps"), {})
    assert steplog_launch(logs, cfg, {})["SPECBENCH_STEPLOG_DIR"].endswith("spec-s8")  # spec-small-s0 is not a start of spec
