"""pass@1 for humaneval and mbpp: the model's program run with the set's tests, fenced in.

Each program runs in a fresh temporary directory as ``python -I`` (no user site, no PYTHON*
variables) with a minimal environment, stdin closed, stdout/stderr to files in that directory,
in its own session (killed as a group at the time limit), under resource limits (address space,
CPU seconds, file size, no core files). Network: the child gets its own empty network namespace
(``unshare(CLONE_NEWNET)``), so even loopback is unreachable; where the kernel refuses that, a
prelude replaces the socket constructors and name lookup with ones that raise. Run as root, the
child also drops to uid/gid 65534 when the interpreter can be run as that user. Each grade says
which guards were in force (``network``, ``user``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
NOBODY = 65534
MEMORY_BYTES = 2 << 30
FILE_BYTES = 16 << 20

PRELUDE = '''\
import socket as _sb_socket, _socket as _sb_raw
class _SbBlocked(_sb_socket.socket):
    def __init__(self, *a, **k):
        raise OSError("network disabled by specbench's grader")
class _SbRawBlocked(_sb_raw.socket):
    def __init__(self, *a, **k):
        raise OSError("network disabled by specbench's grader")
def _sb_refuse(*a, **k):
    raise OSError("network disabled by specbench's grader")
_sb_socket.socket = _SbBlocked
_sb_raw.socket = _SbRawBlocked
_sb_socket.create_connection = _sb_socket.getaddrinfo = _sb_socket.socketpair = _sb_refuse
_sb_socket.fromfd = _sb_socket.create_server = _sb_refuse
del _sb_socket, _sb_raw, _SbBlocked, _SbRawBlocked, _sb_refuse
'''


@dataclass(frozen=True)
class RunResult:
    passed: bool
    detail: str  # "passed", "timed out after N s", or the last line of stderr
    network: str  # "namespace" (an empty network namespace) or "socket guard" (the prelude only)
    user: str = ""  # the uid the program ran as


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_fence: tuple[bool, bool] | None = None


def _limits(timeout_s: float, isolate: bool, drop: bool) -> None:
    """Runs in the child between fork and exec: only async-signal-safe-ish calls, nothing imported."""
    if isolate:
        flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
        if _libc.unshare(flags) != 0:
            os._exit(97)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    cpu = int(timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if drop:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def _works(isolate: bool, drop: bool) -> bool:
    try:
        return subprocess.run([sys.executable, "-I", "-c", "pass"], preexec_fn=lambda: _limits(5, isolate, drop),
                              capture_output=True, timeout=30, cwd="/").returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def fence() -> tuple[bool, bool]:
    """(own network namespace, drop to uid 65534): what this machine allows, probed once per process."""
    global _fence
    if _fence is None:
        isolate = _works(True, False)
        _fence = (isolate, os.geteuid() == 0 and _works(isolate, True))
    return _fence


def network_isolation() -> bool:
    return fence()[0]


def run_program(source: str, timeout_s: float = 10.0) -> RunResult:
    """Run ``source`` fenced in (see the module docstring); passed = exit status 0 within the limit."""
    isolate, drop = fence()
    network = "namespace" if isolate else "socket guard"
    user = str(NOBODY if drop else os.geteuid())
    with tempfile.TemporaryDirectory(prefix="specbench-grade-") as tmp:
        work = Path(tmp)
        program = work / "program.py"
        program.write_text(PRELUDE + source)
        out, err = work / "stdout", work / "stderr"
        if drop:
            for path in (work, program):
                os.chown(path, NOBODY, NOBODY)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "no_proxy": "*"}
        with out.open("wb") as fo, err.open("wb") as fe:
            proc = subprocess.Popen([sys.executable, "-I", "-B", str(program)], cwd=tmp, env=env,
                                    stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True,
                                    preexec_fn=lambda: _limits(timeout_s, isolate, drop))
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the program and anything it started
                except ProcessLookupError:
                    pass
                proc.wait()
        if rc is None:
            return RunResult(False, f"timed out after {timeout_s:g} s", network, user)
        if rc == 0:
            return RunResult(True, "passed", network, user)
        lines = [line for line in err.read_text(errors="replace").splitlines() if line.strip()]
        why = lines[-1][:200] if lines else (f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}")
        return RunResult(False, why, network, user)


def extract_code(text: str, entry_point: str | None = None) -> str | None:
    """The model's program: the fenced block defining ``entry_point`` (else the first fenced block;
    a fence cut by max_tokens runs to the end), or the whole answer when it has no fence."""
    blocks = re.findall(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", text, flags=re.S)
    blocks = [b for b in blocks if b.strip()]
    if blocks:
        if entry_point:
            for b in blocks:
                if re.search(rf"def\s+{re.escape(entry_point)}\s*\(", b):
                    return b
        return blocks[0]
    return text if text.strip() else None


def humaneval_program(answer: str, prompt: str, test: str, entry_point: str) -> str | None:
    """The answer as a program with HumanEval's ``check``: a bare function body is completed onto
    the prompt (the set's own completion format)."""
    code = extract_code(answer, entry_point)
    if code is None:
        return None
    if not re.search(rf"def\s+{re.escape(entry_point)}\s*\(", code):
        code = prompt + code
    return f"{code}\n\n{test}\n\ncheck({entry_point})\n"


def mbpp_program(answer: str, tests: list[str], imports: list[str] | None = None, setup: str = "") -> str | None:
    code = extract_code(answer, _mbpp_entry(tests))
    if code is None:
        return None
    head = "\n".join(imports or [])
    return f"{head}\n{setup}\n{code}\n\n" + "\n".join(tests) + "\n"


def _mbpp_entry(tests: list[str]) -> str | None:
    m = re.search(r"assert\s+(?:set\(|math\.isclose\()?\s*([A-Za-z_]\w*)\s*\(", tests[0]) if tests else None
    return m.group(1) if m else None
