"""The step log's files and the guards every hook runs under (standard library only, in vLLM's processes)."""

from __future__ import annotations

import json
import multiprocessing.util
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

SCHEMA = "specbench.steplog/1"
LEVELS = ("off", "steps", "timing", "tokens")  # each level records everything the ones before it do
MAX_HIST = 17  # hist index 0..16: tokens a request committed in the step (accepted guesses plus one)
MARK = "_specbench_steplog"
STEP_ATTR = "_specbench_step"


def level() -> str:
    value = os.environ.get("SPECBENCH_STEPLOG", "off").strip().lower()
    return value if value in LEVELS else "off"


class _Active:
    """The level the hooks act at now: the launch's level, or lower while ``SPECBENCH_STEPLOG_CONTROL`` names a
    file that says so (re-read by the flusher every 0.25 s). It lets a benchmark compare off / steps / timing
    passes on one server, where a server-to-server spread would otherwise hide a 1 % cost."""

    def __init__(self) -> None:
        self.rank = LEVELS.index(level())
        self.control = os.environ.get("SPECBENCH_STEPLOG_CONTROL")

    def refresh(self) -> None:
        if not self.control:
            return
        try:
            with open(self.control) as f:
                wanted = f.read().strip().lower()
        except OSError:
            return
        if wanted in LEVELS:
            self.rank = min(LEVELS.index(wanted), LEVELS.index(level()))


ACTIVE = _Active()


class _Log:
    """This process's step-log files, opened on first write (a forked child gets its own pid's files)."""

    def __init__(self) -> None:
        self.dir = os.environ.get("SPECBENCH_STEPLOG_DIR") or "."
        self.lock = threading.Lock()
        self.files: dict[str, Any] = {}
        self.pid = os.getpid()
        self.hooks: dict[str, str] = {}
        self.notes: list[str] = []
        self.clock: str | None = None
        self.runner: str | None = None
        self.exit_pid: int | None = None

    def _file(self, kind: str) -> Any:
        if self.pid != os.getpid():  # forked: the parent's open files are not ours
            self.files, self.pid = {}, os.getpid()
        f = self.files.get(kind)
        if f is None:
            f = self.files[kind] = open(os.path.join(self.dir, f"{kind}-{os.getpid()}.jsonl"), "a", buffering=1 << 16)
            self._flush_at_exit()
        return f

    def _flush_at_exit(self) -> None:
        """Write what is buffered when this process ends. vLLM's engine core and workers are multiprocessing
        children: they leave through ``os._exit`` after multiprocessing's own finalizers, so ``atexit`` never runs
        there and the last 0.25 s of rows were lost (issue 38: a token log one accepted guess short). The child's
        finalizer registry is cleared when it starts, hence registered here, at this process's first row."""
        if self.exit_pid == os.getpid():
            return
        self.exit_pid = os.getpid()
        multiprocessing.util.Finalize(None, final_flush, exitpriority=100)

    def write(self, kind: str, row: dict[str, Any]) -> None:
        line = json.dumps(row, separators=(",", ":"), allow_nan=False)
        with self.lock:
            self._file(kind).write(line + "\n")

    def flush(self, kind: str | None = None) -> None:
        with self.lock:
            for name, f in self.files.items():
                if kind is not None and name != kind:
                    continue
                try:
                    f.flush()
                except (OSError, ValueError):
                    pass

    def hook(self, name: str, state: str) -> None:
        self.hooks[name] = state
        self.header()

    def header(self) -> None:
        vllm = sys.modules.get("vllm")
        body = {"schema": SCHEMA, "pid": os.getpid(), "level": level(), "hooks": self.hooks, "notes": self.notes,
                "clock": self.clock, "runner": self.runner, "vllm_version": getattr(vllm, "__version__", None),
                "written_at": time.time()}
        path = os.path.join(self.dir, f"header-{os.getpid()}.json")
        try:
            with open(path + ".tmp", "w") as f:
                json.dump(body, f)
            os.replace(path + ".tmp", path)
        except OSError:
            pass


LOG = _Log()


def guarded(name: str, body: Callable[..., Any], need: str = "steps") -> Callable[..., Any]:
    """``body`` that runs only at level ``need`` or above, and turns itself off (and says so) at its first
    exception instead of raising into vLLM."""
    rank = LEVELS.index(need)

    def run(*args: Any) -> Any:
        if ACTIVE.rank < rank or LOG.hooks.get(name) != "installed":
            return None
        try:
            return body(*args)
        except Exception as err:  # never break the server: this hook stops, the step goes on
            LOG.hook(name, f"failed: {type(err).__name__}: {err}"[:300])
            return None
    return run


FLUSH_MIN_MS = 1.0  # a flush at least this long is an event of its own (the recorder ruled in or out)
MAX_PENDING = 100_000  # events queued while nothing flushes: the oldest are dropped, the engine never grows
#: events not yet written (``emit``): (kind, wall, ms, step, detail)
PENDING: deque[tuple[str, float, float, int | None, str | None]] = deque(maxlen=MAX_PENDING)
#: the step in flight in this process, [step]: the runner's while it runs one, else the scheduler's last; None between
IN_FLIGHT: list[int | None] = [None]


def emit(kind: str, wall: float, ms: float, detail: str | None = None) -> None:
    """Queue one event (``events`` rows, the ``steps`` level and above): never blocks, never takes the log's lock —
    a garbage collection can start inside ``LOG.write`` — and is written by the flusher."""
    if ACTIVE.rank < LEVELS.index("steps"):
        return
    PENDING.append((kind, wall, round(max(ms, 0.0), 4), IN_FLIGHT[0], detail[:300] if detail else None))


def write_pending() -> None:
    """The queued events to ``events-<pid>.jsonl`` (the flusher's thread, or the process's end)."""
    while PENDING:
        try:
            kind, wall, ms, step, detail = PENDING.popleft()
        except IndexError:
            return
        LOG.write("events", {"kind": kind, "wall": wall, "ms": ms, "step": step, "detail": detail})


flusher_thread: threading.Thread | None = None
#: called by the flusher before each flush (``block`` False) and once at exit (True, the GPU idle): the runner
#: hooks resolve the steps whose marks completed
resolvers: list[Callable[[bool], None]] = []
#: called by the flusher every tick (the allocator's reserved bytes, ``vllm_onetime``)
pollers: list[Callable[[], None]] = []
#: CUDA-graph captures in progress in this process: the flusher touches no CUDA meanwhile (a call from another
#: thread breaks a capture in vLLM's ``global`` capture mode)
CAPTURING = [0]


def final_flush() -> None:
    """Every step still pending resolved, every file flushed: at the process's exit, never raising into it."""
    try:
        for resolve in resolvers:
            resolve(True)
        write_pending()
    except Exception:  # the engine is going away: what cannot be resolved now is dropped
        pass
    LOG.flush()


def start_flusher() -> None:
    """Resolve finished steps and flush files every 0.25 s, so an idle server's last steps reach disk."""
    global flusher_thread
    if flusher_thread is not None and flusher_thread.is_alive():
        return

    def loop() -> None:
        while True:
            time.sleep(0.25)
            try:
                ACTIVE.refresh()
                wall, t0 = time.time(), time.perf_counter()
                if not CAPTURING[0]:
                    for resolve in resolvers:
                        resolve(False)
                    for poll in pollers:
                        poll()
                write_pending()
                LOG.flush()
                ms = (time.perf_counter() - t0) * 1e3
                if ms >= FLUSH_MIN_MS:
                    emit("recorder_flush", wall, ms)
            except Exception as err:  # keep the thread: the next tick may succeed
                LOG.notes.append(f"flush: {type(err).__name__}: {err}"[:300])

    flusher_thread = threading.Thread(target=loop, name="specbench-steplog", daemon=True)
    flusher_thread.start()


def vllm_version() -> str:
    return str(getattr(sys.modules.get("vllm"), "__version__", "?"))


