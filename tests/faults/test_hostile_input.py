"""Untrusted input: hostile suite files, damaged results, secrets, standard JSON.

Each test reproduces one hostile input: a suite file that would hang, crash or escape the run
directory, results or meta files damaged in every way a user or a disk can damage them, and
credentials in URLs, flags and environment variables. The expected answer is always a one-line
exit 2 naming the file (and key), a rendered ``—``, or a value that never reaches a file.
"""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.errors import SuiteError
from specbench.suite import read_suite

PASSWORD = "hunter2-s3cret"


def _strict(text: str):
    """A parser that refuses the NaN / Infinity tokens Python's json module lets through."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text('{"prompt": "hello"}\n{"prompt": "world"}\n')
    return p


def suite_text(prompts: Path, *, config: str = "  - name: baseline\n    url: http://127.0.0.1:9\n",
               load: str = "  max_tokens: 8\n") -> str:
    return (f"name: t\nmodel: smol\nconfigs:\n{config}datasets:\n  - name: p\n    path: {prompts}\n"
            f"load:\n{load}")


# ================================================================================ 1. suite files


BOMB = """name: bomb
model: smol
configs: [{name: baseline, url: "http://127.0.0.1:9"}]
datasets: [builtin]
load:
  extra_body:
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
    i: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_alias_bomb_is_refused_at_once(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 800
    t0 = time.monotonic()
    rc, _, err = cli(capsys, "run", path, "-o", tmp_path / "out")
    assert time.monotonic() - t0 < 60  # a guard, not a speed: expanded, the bomb's 387M strings take far longer
    assert rc == 2
    one_line_error(err, str(path), "load.extra_body", "alias")
    assert not (tmp_path / "out").exists()


def test_recursive_alias_is_refused(tmp_path, prompts, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, load="  max_tokens: 8\n  extra_body: &x {self: *x}\n"))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), "alias")


def test_small_anchor_reuse_still_works(tmp_path, prompts):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=(
        "  - &launch {name: baseline, args: [--max-model-len, '2048']}\n"
        "  - {<<: *launch, name: ngram, method: ngram, num_speculative_tokens: 3}\n")))
    suite = read_suite(path)
    assert [c.name for c in suite.configs] == ["baseline", "ngram"]
    assert suite.configs[1].args == ("--max-model-len", "2048")


@pytest.mark.parametrize("where,text,key", [
    ("load", "  max_tokens: 8\n  temperature: 0\n  max_tokens: 9999\n", "load.max_tokens"),
    ("top", None, "model"),
    ("nested", "  max_tokens: 8\n  extra_body:\n    top_k: 1\n    top_k: 50\n", "load.extra_body.top_k"),
])
def test_duplicate_keys_are_an_error_naming_key_file_and_line(tmp_path, prompts, capsys, where, text, key):
    path = tmp_path / "s.yaml"
    body = suite_text(prompts, load=text) if text else suite_text(prompts) + "model: other\n"
    path.write_text(body)
    with pytest.raises(SuiteError) as info:
        read_suite(path)
    line = str(info.value)
    second = [i for i, ln in enumerate(body.splitlines(), 1) if ln.strip().startswith(key.split(".")[-1] + ":")][-1]
    assert line.startswith(f"{path}:{second}:"), line  # the file and the line of the second occurrence
    assert key in line and "duplicate key" in line
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), key)


@pytest.mark.parametrize("content", [
    b"\xff\xfe\x00n\x00a\x00m\x00e\x00",  # UTF-16
    b"name: t\nmodel: \xe9t\xe9\n",  # Latin-1
    bytes(range(256)) * 4,  # binary
    b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00",  # an executable
    b"name: t\x00\nmodel: smol\n",  # NUL in otherwise valid UTF-8
])
def test_non_utf8_or_binary_suite_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "s.yaml"
    path.write_bytes(content)
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path))


def test_deep_nesting_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("name: " + "[" * 20000 + "]" * 20000 + "\n")
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path))


@pytest.mark.parametrize("url", ["http://[::1", "http://[not-ipv6]:80", "http://user:x@[::1"])
def test_malformed_url_is_one_line(tmp_path, prompts, capsys, url):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: baseline\n    url: '{url}'\n"))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), "configs[0].url")
    assert "x@" not in err  # a password in a malformed URL is not echoed either


@pytest.mark.parametrize("line,key", [
    ("timeout_s: .nan", "load.timeout_s"), ("timeout_s: .inf", "load.timeout_s"),
    ("temperature: .nan", "load.temperature"), ("temperature: .inf", "load.temperature"),
    ("top_p: -.inf", "load.top_p"), ("request_rate: [1, .nan]", "load.request_rate[1]"),
    ("extra_body: {penalty: .nan}", "load.extra_body.penalty"),
])
def test_nan_and_inf_settings_are_one_line(tmp_path, prompts, capsys, line, key):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, load=f"  max_tokens: 8\n  {line}\n"))
    rc, _, err = cli(capsys, "run", path, "-o", tmp_path / "out")
    assert rc == 2
    one_line_error(err, str(path), key, "finite")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", ".hidden", "..", "x" * 65, "sp ace", "", "tab\tx",
                                  "nul\u0000x", "ünï"])
def test_config_names_that_are_not_plain_file_names_are_refused(tmp_path, prompts, capsys, name):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: {json.dumps(name)}\n    url: http://127.0.0.1:9\n"))
    rc, _, err = cli(capsys, "run", path, "-o", tmp_path / "out")
    assert rc == 2
    one_line_error(err, str(path), "configs[0].name")
    assert not (tmp_path / "out").exists()


def test_suite_name_that_escapes_the_results_dir_is_refused(tmp_path, prompts, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts).replace("name: t\n", "name: ../../escape\n", 1))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), ".name")


@pytest.mark.parametrize("name", ["baseline", "dspark_k3", "ngram-k7", "Qwen3.8B", "x" * 64, "_a"])
def test_plain_names_are_accepted(tmp_path, prompts, name):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: {name}\n    url: http://127.0.0.1:9\n"))
    assert read_suite(path).configs[0].name == name


def test_gate_suite_file_is_read_with_the_same_bounds(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    results = tmp_path / "results.json"
    results.write_text("[]")
    t0 = time.monotonic()
    rc, _, err = cli(capsys, "gate", results, "--suite", path)
    assert time.monotonic() - t0 < 60 and rc == 2  # a guard (see above)
    assert "alias" in err and "Traceback" not in err


# ===================================================================== 2. standard JSON everywhere

from specbench.report import render  # noqa: E402
from specbench.run.rundir import RunDir, write_json  # noqa: E402
from specbench.schemas.acceptance import AcceptanceWindow  # noqa: E402
from specbench.schemas.meta import RunMeta  # noqa: E402
from specbench.schemas.phase import PhaseInfo  # noqa: E402
from specbench.schemas.request import RequestRecord  # noqa: E402
from specbench.schemas.row import ResultRow  # noqa: E402

NAN, INF = float("nan"), float("inf")


def test_run_dir_writers_never_emit_nan_or_infinity(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create()
    info = PhaseInfo(config="b", dataset="d", concurrency=1, request_rate=None, repeat=0, wall_s=NAN,
                     acceptance=AcceptanceWindow.from_dict({"acceptance_rate": INF, "acceptance_per_position": [0.5, NAN]}))
    rec = RequestRecord(prompt_id="p", dataset="d", config="b", send_time=1.0, chunk_times=[1.5, INF],
                        chunk_tokens=[1, 2], spec_stats={"mean": -INF})
    run.append_phase(info, [rec])
    run.write_meta(RunMeta(unknown={"x": NAN, "nested": {"y": [INF, 1.0]}}))
    row = ResultRow.start("d", "b")
    row.output_throughput_tps = NAN
    run.write_results([row], "table")
    write_json(tmp_path / "other.json", {"v": -INF})
    for name in ("phases.jsonl", "requests.jsonl"):
        for line in (tmp_path / "run" / name).read_text().splitlines():
            _strict(line)
    meta = _strict((tmp_path / "run" / "meta.json").read_text())
    assert meta == {"x": None, "nested": {"y": [None, 1.0]}}
    assert _strict((tmp_path / "run" / "results.json").read_text())[0]["output_throughput_tps"] is None
    assert _strict((tmp_path / "other.json").read_text()) == {"v": None}
    phase = _strict((tmp_path / "run" / "phases.jsonl").read_text())
    assert phase["wall_s"] is None and phase["acceptance"]["acceptance_per_position"] == [0.5, None]


def test_report_json_and_csv_never_carry_nan_or_infinity():
    records = [ResultRow.start("d", "b")]  # built in memory, not read (the loader would null NaN first)
    records[0].update({"output_throughput_tps": NAN, "ci95": {"x": [INF, 1.0]}, "latency_p95_ms": -INF})
    parsed = _strict(render(records, "json"))
    assert parsed[0]["output_throughput_tps"] is None and parsed[0]["ci95"]["x"] == [None, 1.0]
    rows = list(csv.DictReader(io.StringIO(render(records, "csv"))))
    assert rows[0]["output_throughput_tps"] == "" and rows[0]["latency_p95_ms"] == ""
    assert "nan" not in render(records, "csv").lower() and "inf" not in render(records, "csv").lower()
    md = render(records, "markdown")
    assert "nan" not in md.lower() and "inf" not in md.lower()


def test_report_json_of_a_results_file_with_nan_tokens_is_standard(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text('[{"run": "b", "dataset": "d", "output_throughput_tps": NaN, "speedup_vs_baseline": Infinity,'
                    ' "custom": -Infinity, "nested": {"a": [NaN]}}]')
    rc, out, err = cli(capsys, "report", path, "--format", "json")
    assert rc == 0
    row = _strict(out)[0]
    assert row["output_throughput_tps"] is None and row["speedup_vs_baseline"] is None
    assert row["custom"] is None and row["nested"] == {"a": [None]}
    assert "output_throughput_tps" in err and str(path) in err  # the repair is said, naming file and key


from aiohttp import web  # noqa: E402

from tests.support import suites  # noqa: E402
from tests.support.runs import run_suite  # noqa: E402
from tests.support.scripted_server import Script, ScriptedServer  # noqa: E402


class NanMetricsServer(ScriptedServer):
    """A speculative server whose per-position spec-decode counters read NaN (a broken exporter)."""

    async def metrics(self, request: web.Request) -> web.Response:
        resp = await super().metrics(request)
        lines = []
        for line in resp.text.splitlines():
            if line.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total"):
                line = line.rsplit(" ", 1)[0] + " NaN"
            lines.append(line)
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


@pytest.fixture
def servers(scripted):
    """Start any ScriptedServer (subclass) instance: ``await servers(instance)`` → its URL."""
    return scripted.serve


def write_suite(path: Path, prompts: Path, configs: list[dict], **load) -> Path:
    return suites.write_suite(path, configs, name="trust", endpoint="chat",
                              datasets=[{"name": "p", "path": str(prompts), "requests": 2}],
                              load={"concurrency": 1, "max_tokens": 8, "temperature": 0, "warmup": 0, "timeout_s": 30, **load})


def strict_run_files(out: Path) -> dict[str, object]:
    """Every JSON file of a run parsed with a strict parser; returns them by name."""
    files = {}
    for name in ("meta.json", "results.json"):
        files[name] = _strict((out / name).read_text())
    for name in ("phases.jsonl", "requests.jsonl"):
        files[name] = [_strict(line) for line in (out / name).read_text().splitlines()]
    return files


async def test_a_run_against_nan_counters_writes_standard_json(tmp_path, prompts, servers, capsys):
    base = await servers(ScriptedServer(Script()))
    spec = await servers(NanMetricsServer(Script(pattern=[3], k=3)))
    suite = write_suite(tmp_path / "s.yaml", prompts, [{"name": "baseline", "url": base},
                                                       {"name": "ngram", "url": spec, "method": "ngram",
                                                        "num_speculative_tokens": 3}])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    files = strict_run_files(out)
    spec_row = next(r for r in files["results.json"] if r["run"] == "ngram")
    assert spec_row["acceptance_pos_1"] is None  # NaN is not a measurement: null, never a bare NaN token
    rc, text, _ = cli(capsys, "report", out, "--format", "json")
    assert rc == 0 and _strict(text)


# ============================================================ 3. report, export and gate on damage

import shutil  # noqa: E402

from tests.support.paths import DATA  # noqa: E402

HTML_RUN = DATA / "html" / "run"
GATE_RUN = DATA / "gate" / "reference"
FORMATS = ("markdown", "json", "csv", "html", "export")


@pytest.fixture
def damaged(tmp_path):
    """A copy of a real run (with requests.jsonl) whose results/meta a test then damages."""
    out = tmp_path / "run"
    shutil.copytree(HTML_RUN, out)

    def damage(records=None, meta=None, results_text=None, meta_text=None):
        if records is not None:
            (out / "results.json").write_text(json.dumps(records))
        if results_text is not None:
            (out / "results.json").write_bytes(results_text if isinstance(results_text, bytes) else results_text.encode())
        if meta is not None:
            (out / "meta.json").write_text(json.dumps(meta))
        if meta_text is not None:
            (out / "meta.json").write_text(meta_text)
        return out

    return damage


def original_records() -> list[dict]:
    return json.loads((HTML_RUN / "results.json").read_text())


def original_meta() -> dict:
    return json.loads((HTML_RUN / "meta.json").read_text())


def report(capsys, run: Path, fmt: str, tmp_path: Path) -> tuple[int, str, str]:
    """``specbench report``/``export`` of ``run`` in one format; returns (exit code, output text, stderr)."""
    if fmt == "export":
        rc, _, err = cli(capsys, "export", run, "-o", tmp_path / "exported")
        return rc, "", err
    target = tmp_path / f"out.{fmt}"
    rc, _, err = cli(capsys, "report", run, "--format", fmt, "-o", target)
    return rc, target.read_text() if rc == 0 else "", err


def check_rendered(fmt: str, text: str) -> None:
    if fmt == "json":
        _strict(text)
    if fmt in ("markdown", "html", "csv"):
        low = text.lower()
        assert ">nan<" not in low and "| nan" not in low and "inf |" not in low and ",nan," not in low


def _set(key, value):
    def apply(records):
        for r in records:
            if r["run"] == "ngram_k3":
                r[key] = value
        return records
    return apply


def _drop(key):
    def apply(records):
        for r in records:
            r.pop(key, None)
        return records
    return apply


REPAIRED = {  # damage → the key that renders —, with a warning naming file and key
    "string throughput": (_set("output_throughput_tps", "fast"), "output_throughput_tps"),
    "string speedup": (_set("speedup_vs_baseline", "1.4x"), "speedup_vs_baseline"),
    "NaN latency": (_set("latency_p95_ms", NAN), "latency_p95_ms"),
    "Infinity speedup": (_set("speedup_vs_baseline", INF), "speedup_vs_baseline"),
    "list acceptance": (_set("acceptance_rate", [0.5]), "acceptance_rate"),
    "bool requests": (_set("requests", True), "requests"),
    "object concurrency": (_set("concurrency", {"c": 1}), "concurrency"),
    "string ci": (_set("ci95", {"speedup_vs_baseline": "narrow"}), "ci95.speedup_vs_baseline"),
    "ci not an object": (_set("ci95", [1, 2]), "ci95"),
    "per-position strings": (_set("acceptance_per_position", ["a", NAN]), "acceptance_per_position"),
    "categories garbage": (_set("categories", {"math": "x", "code": {"requests": "many"}}), "categories"),
    "status a number": (_set("status", 5), "status"),
    "flag a string": (_set("acceptance_sources_agree", "no"), "acceptance_sources_agree"),
    "rate a string": (_set("request_rate", "fast"), "request_rate"),
    # a number outside what its key is by definition (schemas/row_read.BOUNDS): shown as —, said
    "negative speedup": (_set("speedup_vs_baseline", -1.4), "speedup_vs_baseline"),
    "negative latency": (_set("latency_p95_ms", -12.5), "latency_p95_ms"),
    "acceptance rate above 1": (_set("acceptance_rate", 1.7), "acceptance_rate"),
    "acceptance length below 1": (_set("mean_acceptance_length", 0.4), "mean_acceptance_length"),
    "a 400-digit count": (_set("requests", 10 ** 400), "requests"),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", sorted(REPAIRED))
def test_wrong_typed_or_non_finite_values_render_as_dash(damaged, capsys, tmp_path, fmt, damage):
    fn, key = REPAIRED[damage]
    run = damaged(records=fn(original_records()))
    rc, text, err = report(capsys, run, fmt, tmp_path)
    assert rc == 0, err
    assert "Traceback" not in err
    warning = [ln for ln in err.splitlines() if "warning" in ln]
    assert warning and str(run / "results.json") in warning[0] and key in warning[0], err
    check_rendered(fmt, text)
    if fmt == "markdown":
        row = next(ln for ln in text.splitlines() if "| ngram_k3 |" in ln)
        assert "fast" not in row and "1.4x |" not in row


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_numeric_key_renders_dash(damaged, capsys, tmp_path, fmt):
    run = damaged(records=_drop("output_throughput_tps")(original_records()))
    rc, text, err = report(capsys, run, fmt, tmp_path)
    assert rc == 0 and "Traceback" not in err
    check_rendered(fmt, text)
    if fmt == "markdown":
        lines = text.splitlines()
        col = [c.strip() for c in lines[0].split("|")].index("Output tok/s")
        rows = [ln for ln in lines[2:] if ln.startswith("| ")]
        rows = rows[:next((i for i, ln in enumerate(rows) if not ln.startswith(("| gsm8k", "| mtbench"))), len(rows))]
        assert rows and all(ln.split("|")[col].strip() == "—" for ln in rows[:12])


FATAL = {  # damage → words the one-line error must hold (besides the file)
    "results a mapping": (dict(results_text='{"run": "b"}'), ["results.json", "list"]),
    "results a string": (dict(results_text='"results"'), ["results.json", "list"]),
    "results a number": (dict(results_text="42"), ["results.json", "list"]),
    "results NaN": (dict(results_text="NaN"), ["results.json", "list"]),
    "list of strings": (dict(results_text='["a", "b"]'), ["results.json", "record 0"]),
    "list with null": (dict(results_text="[null]"), ["results.json", "record 0"]),
    "record without run": (dict(records=[{"dataset": "d"}]), ["results.json", "record 0", "run"]),
    "run not text": (dict(records=[{"run": 5, "dataset": "d"}]), ["results.json", "record 0", "run"]),
    "dataset null": (dict(records=[{"run": "b", "dataset": None}]), ["results.json", "record 0", "dataset"]),
    "not UTF-8": (dict(results_text=b"\xff\xfe[\x00]\x00"), ["results.json", "UTF-8"]),
    "torn JSON": (dict(results_text='[{"run": "b", "dat'), ["results.json", "not valid JSON"]),
    "deeply nested": (dict(results_text="[" * 100000 + "]" * 100000), ["results.json"]),
    "meta a list": (dict(meta_text="[]"), ["meta.json", "object"]),
    "meta a string": (dict(meta_text='"meta"'), ["meta.json", "object"]),
    "meta null": (dict(meta_text="null"), ["meta.json", "object"]),
    "meta torn": (dict(meta_text='{"suite": '), ["meta.json", "not valid JSON"]),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", sorted(FATAL))
def test_unusable_results_or_meta_is_one_line_exit_2(damaged, capsys, tmp_path, fmt, damage):
    kwargs, words = FATAL[damage]
    run = damaged(**kwargs)
    rc, _, err = report(capsys, run, fmt, tmp_path)
    assert rc == 2
    one_line_error(err, str(run), *words)


META_FIELDS = {  # a meta.json field of the wrong type: ignored with a warning naming it, never a crash
    "suite": "alpha", "notes": "one note", "host": ["x"], "comparability": "same", "started_at": 5,
    "specbench_version": {"v": 1}, "merged_from": [1, 2],
    "suite.raw": "raw", "suite.name": 7, "suite.raw.configs": 5, "suite.raw.model": ["m"],
    "suite.raw.description": {"d": 1}, "host.cpus": "many", "comparability.max_tokens": "lots",
    "notes.item": [1, None],
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("field", sorted(META_FIELDS))
def test_meta_fields_of_the_wrong_type_are_ignored_and_said(damaged, capsys, tmp_path, fmt, field):
    meta = original_meta()
    meta["notes"] = ["a note"]
    target, *path = field.split(".")
    if field == "notes.item":
        meta["notes"] = META_FIELDS[field]
        key = "notes"
    else:
        holder = meta
        for part in [target, *path][:-1]:
            holder = holder.setdefault(part, {})
        holder[[target, *path][-1]] = META_FIELDS[field]
        key = field
    run = damaged(meta=meta)
    rc, text, err = report(capsys, run, fmt, tmp_path)
    assert rc == 0, err
    assert "Traceback" not in err
    assert any(str(run / "meta.json") in ln and key in ln for ln in err.splitlines()), err
    check_rendered(fmt, text)


def test_damaged_requests_jsonl_lines_are_skipped_not_a_crash(damaged, capsys, tmp_path):
    run = damaged()
    lines = (run / "requests.jsonl").read_text().splitlines()
    bad = ['[1, 2]', '{"prompt_id": "x", "dataset": "gsm8k", "config": "baseline", "chunk_times": "soon"}',
           '{"prompt_id": "x", "dataset": "gsm8k", "config": "baseline", "send_time": "now"}',
           '{"prompt_id": "x", "dataset": "gsm8k", "config": "baseline", "chunk_tokens": [1.5]}',
           '"just text"', '{"dataset": "gsm8k"}']
    (run / "requests.jsonl").write_text("\n".join(lines[:3] + bad + lines[3:]) + "\n")
    for fmt in ("html", "export"):
        rc, _, err = report(capsys, run, fmt, tmp_path)
        assert rc == 0, err
        assert "Traceback" not in err and f"{run / 'requests.jsonl'}:4:" in err


# ---------------------------------------------------------------------------------------- gate


@pytest.fixture
def gate_run(tmp_path):
    def make(edit=None, text=None, meta_text=None):
        out = tmp_path / "cand"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(GATE_RUN, out)
        (out / "meta.json").unlink()
        records = json.loads((out / "results.json").read_text())
        if edit:
            edit(records)
        (out / "results.json").write_text(text if text is not None else json.dumps(records))
        if meta_text is not None:
            (out / "meta.json").write_text(meta_text)
        return out
    return make


def _all(key, value):
    def apply(records):
        for r in records:
            r[key] = value
    return apply


@pytest.mark.parametrize("edit,check", [
    (_all("latency_p95_ms", -INF), ("--max", "latency_p95_ms=100000")),
    (_all("latency_p95_ms", INF), ("--max", "latency_p95_ms=100000")),
    (_all("output_throughput_tps", INF), ("--min", "output_throughput_tps=1")),
    (_all("output_throughput_tps", NAN), ("--min", "output_throughput_tps=1")),
    (_all("output_throughput_tps", "fast"), ("--min", "output_throughput_tps=1")),
    (_all("output_throughput_tps", None), ("--min", "output_throughput_tps=1")),
    (_all("ci95", {"output_throughput_tps": [-INF, INF]}), ("--min", "output_throughput_tps=1e9")),
    (_all("ci95", "wide"), ("--min", "output_throughput_tps=1")),
    (_all("status", 5), ("--min", "output_throughput_tps=1")),
    (_all("concurrency", "8"), ("--min", "output_throughput_tps=1")),
])
def test_gate_never_passes_or_crashes_on_damaged_numbers(gate_run, capsys, edit, check):
    cand = gate_run(edit)
    rc, out, err = cli(capsys, "gate", cand, *check)
    assert rc == 2, out
    one_line_error(err, "specbench gate")


@pytest.mark.parametrize("text", ['{"a": 1}', '"x"', "[1]", "[null]", "NaN", "[" * 100000, "", '[{"run": 1}]'])
def test_gate_on_unusable_results_is_one_line(gate_run, capsys, text):
    cand = gate_run(text=text)
    rc, _, err = cli(capsys, "gate", cand, "--min", "output_throughput_tps=1")
    assert rc == 2
    one_line_error(err, str(cand / "results.json"))


@pytest.mark.parametrize("meta_text", ["[]", '"x"', "null", "[" * 100000, '{"suite": {"raw": {"gate": "x"}}}',
                                       '{"suite": {"raw": {"gate": {"min": {"speedup_vs_baseline": NaN}}}}}'])
def test_gate_on_unusable_meta_is_one_line(gate_run, capsys, meta_text):
    cand = gate_run(meta_text=meta_text)
    rc, _, err = cli(capsys, "gate", cand, "--min", "output_throughput_tps=1")
    assert rc == 2
    one_line_error(err, str(cand / "meta.json"))


def test_gate_warns_when_comparability_is_unreadable(gate_run, capsys, tmp_path):
    cand = gate_run(meta_text='{"comparability": ["not", "an", "object"]}')
    ref = tmp_path / "ref"
    shutil.copytree(GATE_RUN, ref)
    rc, _, err = cli(capsys, "gate", cand, "--reference", ref, "--max-drop", "output_throughput_tps=50%")
    assert rc == 0 and "cannot verify the runs are comparable" in err


# ============================================================================== 4. secrets

import base64  # noqa: E402
import sys  # noqa: E402

from specbench.launch import read_engine  # noqa: E402
from specbench.run.results import redact_raw  # noqa: E402
from tests.support.paths import SCRIPTED  # noqa: E402

MASK = "***"


@pytest.mark.parametrize("name", ["--api-key", "--hf-token", "--db-password", "--client-secret", "DB_PASSWORD",
                                  "MY_SECRET", "HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "apiKey",
                                  "--passwd", "GOOGLE_APPLICATION_CREDENTIALS", "--auth", "OAUTH", "Authorization",
                                  "--ssl-password", "keys", "x.secret.y"])
def test_secret_names(name):
    from specbench.util.redact import is_secret_name

    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "num_speculative_tokens", "--max-num-batched-tokens", "--tokenizer",
                                  "api_key_env", "--ssl-keyfile", "author", "--port", "CUDA_VISIBLE_DEVICES", "monkeys",
                                  "temperature", "", "-"])
def test_not_secret_names(name):
    from specbench.util.redact import is_secret_name

    assert not is_secret_name(name)


def test_redact_argv_both_forms_and_switches():
    from specbench.util.redact import redact_argv

    argv = ["vllm", "--db-password", "p1", "--client-secret=p2", "--hf-token", "p3", "--disable-auth", "--port", "80",
            "--url=http://u:p4@h:1/x", "--API-KEY", "p5", "--max-num-batched-tokens", "512", "--api-key"]
    assert redact_argv(argv) == ["vllm", "--db-password", MASK, f"--client-secret={MASK}", "--hf-token", MASK,
                                 "--disable-auth", "--port", "80", f"--url=http://u:{MASK}@h:1/x", "--API-KEY", MASK,
                                 "--max-num-batched-tokens", "512", "--api-key"]
    # a flag the launcher declares secret takes its value even when it looks like a flag
    assert redact_argv(["--token-file", "-abc"], ["--token-file"]) == ["--token-file", MASK]
    assert argv[2] == "p1"  # a copy, never in place


def test_redact_env_and_nested_mappings():
    from specbench.util.redact import redact_env, redact_mapping

    env = {"DB_PASSWORD": "p", "MY_SECRET": "p", "HF_TOKEN": "p", "PLAIN": "visible", "PROXY": "http://u:p@proxy:3128"}
    assert redact_env(env) == {"DB_PASSWORD": MASK, "MY_SECRET": MASK, "HF_TOKEN": MASK, "PLAIN": "visible",
                               "PROXY": f"http://u:{MASK}@proxy:3128"}
    raw = {"api_key_env": "MY_KEY", "load": {"max_tokens": 8, "extra_body": {"api_key": "p", "top_k": 1}},
           "configs": [{"name": "b", "num_speculative_tokens": 3, "url": "https://u:p@h",
                        "speculative": {"draft": {"auth": {"user": "a", "pass": "p"}}},
                        "args": ["--db-password", "p", "--n", "1"], "env": {"MY_SECRET": "p"}}]}
    red = redact_mapping(raw)
    assert red["api_key_env"] == "MY_KEY"  # the variable's name, not its value
    assert red["load"] == {"max_tokens": 8, "extra_body": {"api_key": MASK, "top_k": 1}}
    cfg = red["configs"][0]
    assert cfg["num_speculative_tokens"] == 3 and cfg["url"] == f"https://u:{MASK}@h"
    assert cfg["speculative"]["draft"]["auth"] == {"user": MASK, "pass": MASK}
    assert cfg["args"] == ["--db-password", MASK, "--n", "1"] and cfg["env"] == {"MY_SECRET": MASK}
    assert redact_raw(raw) == red  # the runner's name for it is the same function
    assert "'p'" not in repr(red) and raw["configs"][0]["env"]["MY_SECRET"] == "p"


@pytest.mark.parametrize("url,shown", [
    ("http://user:pass@host:8000/v1", f"http://user:{MASK}@host:8000/v1"),
    ("https://user:p@ss:w@rd@host", f"https://user:{MASK}@host"),
    ("http://u:p@[::1]:8000", f"http://u:{MASK}@[::1]:8000"),
    ("cannot reach http://u:p@h:1/v1/models: error", f"cannot reach http://u:{MASK}@h:1/v1/models: error"),
    ("http://host:8000", "http://host:8000"), ("http://[::1]:8000", "http://[::1]:8000"),
])
def test_redact_url(url, shown):
    from specbench.util.redact import redact_url

    assert redact_url(url) == shown


def test_split_credentials_gives_one_basic_header():
    from specbench.util.redact import split_credentials

    url, header = split_credentials("http://us%40er:p%3Ass@[::1]:8000/x")
    assert url == "http://[::1]:8000/x"
    assert base64.b64decode(header.split()[1]).decode() == "us@er:p:ss"
    assert split_credentials("http://h:1") == ("http://h:1", None)


def test_engines_redact_by_pattern_too():
    for name in ("vllm", "sglang"):
        argv = read_engine(name).redact(["x", "--db-password", "p", "--client-secret=p", "--api-key", "k"])
        assert argv == ["x", "--db-password", MASK, f"--client-secret={MASK}", "--api-key", MASK]


def _files_containing(root: Path, needle: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


@pytest.mark.parametrize("client", ["socket", "aiohttp", "openai"])
async def test_url_password_is_redacted_everywhere_but_sent(tmp_path, prompts, servers, capsys, client):
    server = ScriptedServer(Script())
    url = await servers(server)
    with_password = url.replace("http://", f"http://bench:{PASSWORD}@")
    suite = write_suite(tmp_path / "s.yaml", prompts, [{"name": "baseline", "url": with_password}], client=client)
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite), out)
    assert outcome.exit_code == 0, outcome.failed_configs
    shown = url.replace("http://", f"http://bench:{MASK}@")
    files = strict_run_files(out)
    assert files["meta.json"]["servers"]["baseline"]["url"] == shown
    assert files["meta.json"]["suite"]["raw"]["configs"][0]["url"] == shown
    assert files["results.json"][0]["server_url"] == shown
    assert all(p["server"]["url"] == shown for p in files["phases.jsonl"])
    assert _files_containing(out, PASSWORD) == []
    printed = capsys.readouterr()
    assert PASSWORD not in printed.out + printed.err
    # ... while the server got the real credentials, as one Basic header, from both clients
    expected = "Basic " + base64.b64encode(f"bench:{PASSWORD}".encode()).decode()
    assert server.headers and all(h.get("Authorization") == expected for h in server.headers)


async def test_unreachable_url_with_password_is_reported_redacted(tmp_path, prompts, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    suite = write_suite(tmp_path / "s.yaml", prompts,
                        [{"name": "baseline", "url": f"http://bench:{PASSWORD}@127.0.0.1:{port}"}])
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite), out)
    assert outcome.failed_configs and PASSWORD not in outcome.failed_configs["baseline"]
    assert f"bench:{MASK}@127.0.0.1:{port}" in outcome.failed_configs["baseline"]
    assert _files_containing(out, PASSWORD) == []


def test_url_password_in_suite_errors_is_redacted(tmp_path, prompts, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: baseline\n    url: 'ftp://u:{PASSWORD}@h'\n"))
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2 and PASSWORD not in err and f"u:{MASK}@h" in err


SECRET_WRAPPER = f'''import os, runpy, sys
SCRIPTED = {str(SCRIPTED)!r}
# like vLLM, which logs its non-default args at start: the log must still hold no secret
print("non-default args:", sys.argv[1:], {{k: v for k, v in os.environ.items() if k in ("DB_PASSWORD", "MY_SECRET", "HF_TOKEN")}}, flush=True)
out, skip = [], False
for a in sys.argv[1:]:
    if skip:
        skip = False
        continue
    if a in ("--db-password", "--hf-token"):
        skip = True
        continue
    if a.startswith("--client-secret="):
        continue
    out.append(a)
sys.argv = [SCRIPTED, *out]
runpy.run_path(SCRIPTED, run_name="__main__")
'''


async def test_launched_server_secrets_never_reach_meta_log_or_any_file(tmp_path, prompts, launchers, capsys):
    wrapper = tmp_path / "secret_engine.py"
    wrapper.write_text(SECRET_WRAPPER)
    (launchers / "secretfake.yaml").write_text(yaml.safe_dump({
        "extends": "vllm", "name": "secretfake", "python": sys.executable, "command": ["{python}", str(wrapper)],
        "args": ["--port", "{port}", "--model", "{model}"], "gpu_env": None}))
    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "secrets", "model": "smol", "engine": "secretfake",
        "configs": [{"name": "baseline", "args": ["--db-password", PASSWORD, f"--client-secret={PASSWORD}"],
                     "env": {"DB_PASSWORD": PASSWORD, "MY_SECRET": PASSWORD, "PLAIN_SETTING": "visible"}}],
        "server": {"env": {"HF_TOKEN": PASSWORD}, "args": ["--hf-token", PASSWORD], "startup_timeout_s": 60},
        "datasets": [{"name": "p", "path": str(prompts), "requests": 2}],
        "load": {"concurrency": 1, "max_tokens": 8, "warmup": 0, "timeout_s": 30}}))
    out = tmp_path / "run"
    outcome = await run_suite(read_suite(suite), out)
    assert outcome.exit_code == 0, outcome.failed_configs
    meta = _strict((out / "meta.json").read_text())
    server = meta["servers"]["baseline"]
    argv = server["argv"]
    assert argv[argv.index("--db-password") + 1] == MASK and f"--client-secret={MASK}" in argv
    assert argv[argv.index("--hf-token") + 1] == MASK
    assert server["env"]["DB_PASSWORD"] == MASK and server["env"]["MY_SECRET"] == MASK
    assert server["env"]["HF_TOKEN"] == MASK and server["env"]["PLAIN_SETTING"] == "visible"
    raw = meta["suite"]["raw"]
    assert raw["configs"][0]["args"] == ["--db-password", MASK, f"--client-secret={MASK}"]
    assert raw["configs"][0]["env"]["MY_SECRET"] == MASK and raw["server"]["env"]["HF_TOKEN"] == MASK
    assert raw["load"]["max_tokens"] == 8  # a count is not a secret (it used to read "***")
    header = (out / "logs" / "baseline.log").read_text().splitlines()[0]
    assert header.startswith("$ ") and f"--db-password {MASK}" in header and f"--client-secret={MASK}" in header
    assert _files_containing(out, PASSWORD) == []
    printed = capsys.readouterr()
    assert PASSWORD not in printed.out + printed.err


class BrokenMetricsServer(ScriptedServer):
    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(status=500, text="exporter down")


async def test_metrics_error_of_a_url_with_password_is_stored_redacted(tmp_path, prompts, servers):
    url = await servers(BrokenMetricsServer(Script()))
    suite = write_suite(tmp_path / "s.yaml", prompts,
                        [{"name": "baseline", "url": url.replace("http://", f"http://bench:{PASSWORD}@")}])
    out = tmp_path / "run"
    await run_suite(read_suite(suite), out)
    phase = strict_run_files(out)["phases.jsonl"][0]
    assert f"bench:{MASK}@" in phase["acceptance"]["acceptance_error"]
    assert _files_containing(out, PASSWORD) == []


def test_url_credentials_and_an_api_key_together_are_refused(tmp_path, prompts, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=f"  - name: baseline\n    url: 'http://u:{PASSWORD}@127.0.0.1:9'\n")
                    + "api_key_env: MY_KEY\n")
    rc, _, err = cli(capsys, "run", path)
    assert rc == 2
    one_line_error(err, str(path), "configs[0].url", "api_key_env")
    assert PASSWORD not in err


# ======================================================= 5. numbers: every one a file can carry is bounded

from specbench.schemas.profile_file import FORMAT as PROFILE_FORMAT  # noqa: E402

PROFILE_ENTRY = ('{"config": "eagle_k3", "dataset": "p", "num_speculative_tokens": 3, "speedup_vs_baseline": 1.5, '
                 '"acceptance_per_position": [0.75, 0.5, 0.25], "mean_acceptance_length": LENGTH}')  # later keys win


@pytest.mark.parametrize("length, key", [
    ("Infinity", "mean_acceptance_length"), ("1e999", "mean_acceptance_length"), ("-Infinity", "mean_acceptance_length"),
    ("NaN", "mean_acceptance_length"), ("-2.5", "mean_acceptance_length"), ("2.5, \"fill_ratio\": Infinity", "fill_ratio"),
    ("2.5, \"speedup_vs_baseline\": 1e999", "speedup_vs_baseline"), ("2.5, \"spec_drafts\": -4", "spec_drafts"),
    ("2.5, \"num_speculative_tokens\": 100000", "num_speculative_tokens"),
])
def test_whatif_refuses_a_profile_number_that_is_not_one_before_anything_starts(tmp_path, prompts, capsys, fake_engine,
                                                                                 length, key):
    """A profile whose acceptance length is Infinity once ran: the record machinery read it as null."""
    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "plan", "model": "smol", "engine": "fake",
        "configs": [{"name": "baseline"}, {"name": "ngram_k3", "method": "ngram", "num_speculative_tokens": 3}],
        "datasets": [{"name": "p", "path": str(prompts)}],
        "load": {"concurrency": 1, "max_tokens": 8, "warmup": 0}, "server": {"startup_timeout_s": 30}}))
    profile = tmp_path / "profile.json"
    profile.write_text(f'{{"format": "{PROFILE_FORMAT}", "profiles": [{PROFILE_ENTRY.replace("LENGTH", length)}]}}')
    rc, _, err = cli(capsys, "whatif", suite, "--profile", profile, "--no-real", "-o", tmp_path / "out", "-q")
    assert rc == 2
    one_line_error(err, str(profile), f"profiles[0].{key}: expected")
    assert not (tmp_path / "out").exists()


LAUNCHED = "  - name: baseline\n  - name: ngram_k3\n    method: ngram\n    num_speculative_tokens: 3\n"


@pytest.mark.parametrize("config, load, server, key", [
    # adaptive repeats: a target that underflows Stein's plan (a traceback), a cap in the millions (an unbounded run)
    (LAUNCHED, "  restart: true\n  target_ci: 1.0e-320\n  max_repeats: 10\n", "", "load.target_ci"),
    (LAUNCHED, "  restart: true\n  target_ci: '1e-318%'\n  max_repeats: 10\n", "", "load.target_ci"),
    (LAUNCHED, "  restart: true\n  target_ci: 3%\n  max_repeats: 5000000\n", "", "load.max_repeats"),
    (LAUNCHED, "  repeats: 2000000\n", "", "load.repeats"),
    (LAUNCHED, "  concurrency: [1, 100000000]\n", "", "load.concurrency"),
    (LAUNCHED, "  request_rate: 1.0e-300\n", "", "load.request_rate"),
    (LAUNCHED, "  warmup: 1000000000\n", "", "load.warmup"),
    (LAUNCHED, "  max_tokens: 1000000000000\n", "", "load.max_tokens"),
    (LAUNCHED, "  timeout_s: 1.0e+300\n", "", "load.timeout_s"),
    (LAUNCHED, "  top_p: -3\n", "", "load.top_p"),
    (LAUNCHED, "  client_processes: 1000000\n", "", "load.client_processes"),
    (LAUNCHED, "  slo: {ttft_ms: 1.0e+300}\n", "", "load.slo.ttft_ms"),
    (LAUNCHED, "  slo: {ttft_ms: 100}\n  max_rate_at_slo: {start_rate: 1.0e-12}\n", "", "load.max_rate_at_slo.start_rate"),
    (LAUNCHED, "", "server:\n  startup_timeout_s: -1\n", "server.startup_timeout_s"),
    (LAUNCHED, "", "server:\n  startup_timeout_s: 1.0e+300\n", "server.startup_timeout_s"),
    (LAUNCHED, "", "server:\n  gpus_per_server: 100000000\n", "server.gpus_per_server"),
    (LAUNCHED.replace("tokens: 3", "tokens: 100000"), "", "", "configs[1].num_speculative_tokens"),
    (LAUNCHED, "", "cost:\n  gpu_hour_usd: 1.0e+200\n", "cost.gpu_hour_usd"),
    (LAUNCHED, "", "gate:\n  max_drop: {speedup_vs_baseline: 400%}\n", "gate.max_drop.speedup_vs_baseline"),
    (LAUNCHED, "", "gate:\n  min: {speedup_vs_baseline: -1}\n", "gate.min.speedup_vs_baseline"),
])
def test_every_suite_number_is_bounded_one_line_naming_file_and_key(tmp_path, prompts, config, load, server, key):
    """Each of these once read as a valid suite: then a traceback, an unbounded run or a gate that cannot fail."""
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(prompts, config=config, load="  max_tokens: 8\n" * ("max_tokens" not in load) + load) + server)
    with pytest.raises(SuiteError) as err:
        read_suite(path)
    assert err.value.exit_code == 2
    one_line_error(str(err.value), str(path), key, "expected")
