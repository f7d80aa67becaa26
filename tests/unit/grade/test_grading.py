"""Task accuracy: answer extraction and normalisation, fenced program runs, paired statistics, and
the whole path on scripted servers (graded only when the suite asks)."""

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from specbench.datasets import DatasetSpec
from specbench.errors import SuiteError
from specbench.grade import Gold, accuracy_pairs, accuracy_summary, golds, grade_answer, mcnemar_exact, paired_accuracy
from specbench.grade.answers import equivalent, extract_gsm8k, extract_math, last_boxed, normalize
from specbench.grade.programs import extract_code, humaneval_program, mbpp_program, network_isolation, run_program
from specbench.schemas.request import RequestRecord
from specbench.suite import parse_suite
from tests.support import suites
from tests.support.paths import ROOT
from tests.support.suites import baseline_and_spec

SHARED = Path(os.environ.get("SPECBENCH_SHARED") or ROOT.parent / "shared" / "datasets")
needs_shared = pytest.mark.skipif(not (SHARED / "gsm8k.jsonl").is_file(), reason=f"no shared datasets at {SHARED}")


# ---- math answers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("predicted, gold", [
    ("18", "18"), ("18.00", "18"), ("1,000", "1000"), ("\\$18", "18"), ("18.", "18"),
    ("\\dfrac{17}{50}", "\\frac{17}{50}"), ("0.34", "\\dfrac{17}{50}"), ("\\frac12", "\\frac{1}{2}"), ("1/2", "0.5"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left( 3, \\frac{\\pi}{2} \\right)"), ("(3,\\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("90^\\circ", "90"), ("10\\text{ cm}", "10"), ("10 \\mbox{ inches}^2", "10"), ("\\text{Evelyn}", "\\text{Evelyn}"),
    ("x = 5", "5"), ("6 - 5i", "6-5i"), ("\\sqrt2", "\\sqrt{2}"), (".35625", "0.35625"), ("50\\%", "50"),
    ("\\!\\, 4\\;", "4"),
])
def test_equivalent_answers(predicted, gold):
    assert equivalent(predicted, gold), (normalize(predicted), normalize(gold))


@pytest.mark.parametrize("predicted, gold", [
    ("17", "71"), ("\\frac{1}{8}", "\\frac{1}{9}"), ("0.35", "0.35625"), ("(3,\\pi)", "(3,\\frac{\\pi}{2})"),
    (None, "5"), ("", "5"), ("-18", "18"), ("1,000", "100"),
])
def test_wrong_answers(predicted, gold):
    assert not equivalent(predicted, gold)


def test_extraction():
    assert last_boxed("first \\boxed{1} then \\boxed{\\frac{a}{b^{2}}} end") == "\\frac{a}{b^{2}}"
    assert last_boxed("\\boxed 7 done") == "7"
    assert last_boxed("cut off \\boxed{\\frac{1}{2") is None
    assert extract_math("so the answer is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.")[0] == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert extract_math("no box, 42") == (None, "no \\boxed{} answer")
    assert extract_gsm8k("9 * 2 = 18 dollars.\n#### 18") == ("18", "####")
    assert extract_gsm8k("The answer is \\boxed{1,000}.") == ("1,000", "boxed")
    assert extract_gsm8k("16 - 3 - 4 = 9 eggs, so 9 * 2 = 18") == ("18", "last number")
    assert extract_gsm8k("I do not know") == (None, "no answer found")


@needs_shared
def test_gold_answers_from_the_shared_files():
    gsm = golds(DatasetSpec("gsm8k", "gsm8k"), SHARED)
    assert gsm["0"].answer == "18" and gsm["2"].answer == "70000"
    math = golds(DatasetSpec("math500", "math500"), SHARED)
    assert math["test/precalculus/807.json"].answer == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert grade_answer("... so $\\boxed{(3, \\tfrac{\\pi}{2})}$.", math["test/precalculus/807.json"]).correct is True
    assert grade_answer("Janet makes 9 * 2 = 18.\n#### 18", gsm["0"]).to_dict() == {"correct": True, "answer": "18", "gold": "18", "how": "####"}
    assert grade_answer("#### 16", gsm["0"]).correct is False


# ---- programs ---------------------------------------------------------------------------------------

def test_passing_and_failing_programs():
    assert run_program("assert sum([1, 2]) == 3\n").passed
    failed = run_program("def f(x):\n    return x + 1\nassert f(1) == 3, 'f(1) should be 3'\n")
    assert not failed.passed and "AssertionError: f(1) should be 3" in failed.detail
    crash = run_program("raise SystemExit(4)\n")
    assert not crash.passed and crash.detail == "exit status 4"


@pytest.mark.parametrize("program", ["while True:\n    pass\n", "import time\ntime.sleep(60)\n",
                                     "import subprocess\nsubprocess.Popen(['sleep', '60'])\nimport time\ntime.sleep(60)\n"])
def test_programs_that_hang_are_killed_at_the_limit(program):
    t0 = time.monotonic()
    result = run_program(program, timeout_s=1.5)
    assert not result.passed and result.detail == "timed out after 1.5 s"
    assert time.monotonic() - t0 < 50  # a guard, not a speed: left alone the programs run 60 s or forever


def test_memory_hog_is_stopped():
    result = run_program("x = bytearray(8 << 30)\n", timeout_s=5)
    assert not result.passed and "MemoryError" in result.detail


@pytest.fixture
def listener():
    """A TCP server on loopback that records every connection it accepts."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    seen: list = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            seen.append(conn)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield srv.getsockname()[1], seen
    stop.set()
    thread.join()
    srv.close()


@pytest.mark.parametrize("how", ["socket.create_connection(('127.0.0.1', PORT), timeout=2)",
                                 "_socket.socket().connect(('127.0.0.1', PORT))",
                                 "urllib.request.urlopen('http://127.0.0.1:%d/' % PORT, timeout=2)"])
def test_programs_cannot_reach_the_network(listener, how):
    port, seen = listener
    program = f"import socket, _socket, urllib.request\nPORT = {port}\n{how}\nprint('reached')\n"
    result = run_program(program, timeout_s=5)
    assert not result.passed
    assert seen == []  # nothing got through, even to loopback
    assert result.network in ("namespace", "socket guard")


def test_network_namespace_used_where_the_kernel_allows_it(listener):
    """Without the prelude only the namespace stands between a program and the network."""
    from specbench.grade import programs

    if not network_isolation():
        pytest.skip("this kernel does not allow a network namespace: the socket guard alone applies")
    port, seen = listener
    saved = programs.PRELUDE
    programs.PRELUDE = ""
    try:
        result = run_program(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n", timeout_s=5)
    finally:
        programs.PRELUDE = saved
    assert not result.passed and seen == [] and result.network == "namespace"


def test_program_runs_in_a_fresh_temporary_directory(tmp_path):
    result = run_program("import os, pathlib\nassert pathlib.Path.cwd().name.startswith('specbench-grade-')\n"
                         "assert sorted(os.listdir('.')) == ['program.py', 'stderr', 'stdout'], os.listdir('.')\n"
                         "assert 'SPECBENCH' not in ''.join(os.environ)\n")
    assert result.passed, result.detail


HUMANEVAL = {"prompt": 'def add(a, b):\n    """Add two numbers."""\n',
             "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
             "entry_point": "add"}


@pytest.mark.parametrize("answer, passed", [
    ("Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.", True),
    ("```python\n    return a + b\n```", True),  # a body, completed onto the prompt
    ("```python\ndef helper():\n    pass\n```\n```python\ndef add(a, b):\n    return a - b\n```", False),
    ("```python\ndef add(a, b):\n    return a +", False),  # cut by max_tokens: a syntax error
    ("I cannot help with that.", False),
])
def test_humaneval_pass_at_1(answer, passed):
    gold = Gold("humaneval", prompt=HUMANEVAL["prompt"], tests=(HUMANEVAL["test"],), entry_point="add")
    assert grade_answer(answer, gold).correct is passed


@needs_shared
def test_mbpp_with_imports_and_the_real_first_task():
    rows = [json.loads(line) for line in (SHARED / "mbpp_sanitized.jsonl").read_text().splitlines()[:3]]
    row = next(r for r in rows if r["task_id"] == 2)
    right = f"```python\n{row['code']}\n```"
    wrong = "```python\ndef similar_elements(a, b):\n    return ()\n```"
    gold = Gold("mbpp", tests=tuple(row["test_list"]), imports=tuple(row["test_imports"]))
    assert grade_answer(right, gold).correct is True
    assert grade_answer(wrong, gold).correct is False
    assert mbpp_program("x", ["assert f(1) == 1"], ["import math"]).startswith("import math\n")


def test_extract_code_prefers_the_block_defining_the_entry_point():
    text = "```python\nimport os\n```\nthen\n```py\ndef f():\n    return 1\n```"
    assert extract_code(text, "f") == "def f():\n    return 1\n"
    assert extract_code(text) == "import os\n"
    assert extract_code("def f(): return 2") == "def f(): return 2"
    assert humaneval_program("", "p", "t", "f") is None


# ---- statistics -------------------------------------------------------------------------------------

def test_mcnemar_exact_known_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # all 6 discordant one way
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)


def test_paired_accuracy_difference_and_ci():
    pairs = [(True, True)] * 40 + [(False, True)] * 10 + [(True, False)] * 2 + [(False, False)] * 8
    out = paired_accuracy(pairs)
    assert out.accuracy_diff_vs_baseline == pytest.approx((42 - 50) / 60)
    assert out.accuracy_diff_ci_low < out.accuracy_diff_vs_baseline < out.accuracy_diff_ci_high < 0
    assert out.accuracy_mcnemar_p == pytest.approx(mcnemar_exact(2, 10))
    assert out.accuracy_paired_prompts == 60 and "McNemar" in out.accuracy_diff_method
    same = paired_accuracy([(True, True), (False, False)] * 5)
    assert same.accuracy_diff_vs_baseline == 0 and same.accuracy_mcnemar_p == 1.0
    assert paired_accuracy([]).accuracy_diff_vs_baseline is None


def graded(pid: str, correct: bool | None, **kw) -> RequestRecord:
    r = RequestRecord(prompt_id=pid, dataset="d", config="c", chunk_times=[1.0], output_tokens=1, **kw)
    r.grade = None if correct is None else {"correct": correct}
    return r


def test_cell_accuracy_and_pairs():
    recs = [graded("a", True), graded("b", False, finish_reason="length"), graded("c", None)]
    out = accuracy_summary(recs, graded_set=True)
    assert out.accuracy == 0.5 and out.accuracy_compared == 2 and out.accuracy_ungraded == 1
    assert out.accuracy_truncated == 1
    assert accuracy_summary(recs, graded_set=False) is None  # not asked: no keys
    empty = accuracy_summary([graded("a", None)], graded_set=True)
    assert empty.accuracy is None and "no request was graded" in empty.accuracy_error
    base = [graded("a", False), graded("b", False), graded("c", True)]
    assert accuracy_pairs(recs, base) == [(True, False), (False, False)]


# ---- suite switch --------------------------------------------------------------------------------

def suite_with(grade, datasets=("gsm8k", "mt_bench")) -> dict:
    return {"name": "s", "model": "m", "configs": [{"name": "baseline", "url": "http://127.0.0.1:1"}],
            "datasets": [{"name": d} for d in datasets], "load": {"grade": grade}}


def test_grade_switch():
    assert parse_suite(suite_with(True), Path("s.yaml")).load.grade == ("gsm8k",)
    assert parse_suite(suite_with(["gsm8k"]), Path("s.yaml")).load.grade == ("gsm8k",)
    assert parse_suite(suite_with(False), Path("s.yaml")).load.grade == ()
    assert parse_suite({**suite_with(False), "load": {}}, Path("s.yaml")).load.grade == ()  # off by default
    with pytest.raises(SuiteError, match=r"load.grade: 'mt_bench' \(source mt_bench\) has no grader"):
        parse_suite(suite_with(["mt_bench"]), Path("s.yaml"))
    with pytest.raises(SuiteError, match="load.grade: 'nope' is not a data set of this suite"):
        parse_suite(suite_with(["nope"]), Path("s.yaml"))
    with pytest.raises(SuiteError, match="load.grade: no data set of this suite has a grader"):
        parse_suite(suite_with(True, datasets=("mt_bench",)), Path("s.yaml"))


# ---- end to end: graded only when asked ----------------------------------------------------------

def write_suite(tmp_path: Path, urls: dict[str, str], **load) -> Path:
    return suites.write_suite(tmp_path, baseline_and_spec(urls["baseline"], urls["spec"]), name="acc", data_dir=str(SHARED),
                              datasets=[{"name": "gsm8k", "requests": 8}], load={"concurrency": 2, "max_tokens": 8, "warmup": 0, **load})


@needs_shared
async def test_graded_run_pairs_accuracy_with_the_baseline(tmp_path, scripted, monkeypatch):
    """The scripted servers answer "tN" tokens, so every answer is wrong; the grader is rigged to read
    the spec config's answer to prompt 0 as "#### 18" (the baseline runs, and is graded, first)."""
    from specbench.suite import read_suite
    from tests.support.runs import run_suite

    _, base = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    _, spec = await scripted(pattern=[1, 2, 4], k=3, ttft_s=0.002, gap_s=0.001)
    calls: list = []
    import specbench.grade.grading as grade_mod

    real = grade_mod.grade_answer

    def rigged(text, gold):  # the spec config "answers" prompt 0 right: its text is graded as "#### 18"
        calls.append(text)
        return real("#### 18" if gold.answer == "18" and text.startswith("t") and len(calls) > 8 else text, gold)

    monkeypatch.setattr(grade_mod, "grade_answer", rigged)
    await run_suite(read_suite(write_suite(tmp_path, {"baseline": base, "spec": spec}, grade=True)), tmp_path / "out")
    rows = {r["run"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())}
    assert len(calls) == 16  # 8 prompts × 2 configs, warm-up never graded
    assert rows["baseline"]["accuracy"] == 0.0 and rows["baseline"]["accuracy_compared"] == 8
    assert rows["spec"]["accuracy"] == pytest.approx(1 / 8)
    assert rows["spec"]["accuracy_diff_vs_baseline"] == pytest.approx(1 / 8)
    assert rows["spec"]["accuracy_mcnemar_p"] == 1.0 and rows["spec"]["accuracy_paired_prompts"] == 8
    assert rows["spec"]["accuracy_truncated"] == 8  # max_tokens 8 cut every answer
    records = [json.loads(line) for line in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    assert all(r["grade"]["how"] in ("####", "last number", "no answer found") for r in records)
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| Accuracy (graded) |" in md and "| 12.5% (8) |" in md and "| +12.5 pp [" in md
    assert "exact McNemar test" in md


@needs_shared
async def test_grader_never_runs_unless_asked(tmp_path, scripted, monkeypatch):
    import specbench.grade.grading as grade_mod
    from specbench.suite import read_suite
    from tests.support.runs import run_suite

    _, url = await scripted(pattern=[1], ttft_s=0.002, gap_s=0.001)
    monkeypatch.setattr(grade_mod, "grade_answer", lambda *a: pytest.fail("graded without load.grade"))
    monkeypatch.setattr(grade_mod, "golds", lambda *a: pytest.fail("gold answers read without load.grade"))
    await run_suite(read_suite(write_suite(tmp_path, {"baseline": url, "spec": url})), tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all("accuracy" not in r for r in rows)
    assert "Accuracy" not in (tmp_path / "out" / "results.md").read_text()
