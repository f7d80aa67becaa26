"""What the step recorder costs (issue 33, item 5): throughput with it off vs ``steps`` vs ``timing``.

One vLLM server per model, launched with ``SPECBENCH_STEPLOG=timing`` and a control file
(``SPECBENCH_STEPLOG_CONTROL``) that the recorder re-reads every 0.25 s and that may only lower its level:
the three levels are compared on the same server, so a server-to-server spread cannot hide a 1 % cost.
Per round, per concurrency, the levels run back to back (ABC, then CBA in the next round, so a drift over
time does not favour one level); each pass is specbench's own ``run`` against the server's URL (a
warm-up pass at the cell's concurrency, then the timed pass), and its ``output_throughput_tps`` and
``tpot_mean_ms`` are read from ``results.json``. The noise floor is the round-to-round spread of ``off``.
The step log's rows written during each pass (warm-up included) show the recorder was on when it should be.

GPU host (the bundle's packages only; environment as in run_h200.sh: ``PYTHONPATH=$ROOT:$SITE``,
``SPECBENCH_DATA_DIR`` holding gsm8k.jsonl, ``MODELS=~/.cache/specbench/models``; one GPU)::

    CUDA_VISIBLE_DEVICES=0 python3 benchmarks/gpu/steplog_overhead.py --python python3 \\
        --model "$MODELS/SmolLM2-135M-Instruct" --args "--max-model-len 4096" \\
        --concurrency 1,64 --rounds 2 --requests 16,256 --max-tokens 128 --label "H200, vLLM 0.26.0, SmolLM2-135M"
    CUDA_VISIBLE_DEVICES=0 python3 benchmarks/gpu/steplog_overhead.py --python python3 \\
        --model "$MODELS/qwen3-8b-shape" --args "--load-format dummy --max-model-len 4096 --max-num-seqs 64" \\
        --concurrency 1,64 --rounds 2 --requests 8,128 --max-tokens 128 --label "H200, vLLM 0.26.0, Qwen3-8B shape"

CPU engine (this repo's ``specbench setup cpu``; proves the script works, nothing more)::

    python benchmarks/gpu/steplog_overhead.py --python ~/.cache/specbench/engine/bin/python \\
        --model ~/.cache/specbench/models/SmolLM2-135M-Instruct \\
        --args "--enforce-eager --dtype bfloat16 --max-model-len 2048" \\
        --env VLLM_CPU_KVCACHE_SPACE=2 --env VLLM_TARGET_DEVICE=cpu \\
        --concurrency 1,4 --rounds 1 --max-tokens 32 --requests 6 --label "CPU, contended 2-core box"

Writes ``--out``/steplog_overhead-<stamp>.{json,md} (default results/benchmarks/, git-ignored; what the docs cite is
copied into results/evidence/: its README).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from specbench import __version__  # noqa: E402
from specbench.hooks import plugin_site, steplog_env
from specbench.schemas.run_files import RESULTS  # noqa: E402

LEVELS = ("off", "steps", "timing")
SERVED = "steplog-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(a: argparse.Namespace, model: str, port: int, work: Path) -> tuple[subprocess.Popen[bytes], Path]:
    logs, control = work / "steplog", work / "control"
    logs.mkdir(parents=True, exist_ok=True)
    control.write_text("timing\n")
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in a.env)
    env.update(steplog_env("timing", logs, plugin_site(work, __version__).path, env.get("PYTHONPATH")))
    env["SPECBENCH_STEPLOG_CONTROL"] = str(control)
    cmd = [a.python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", SERVED,
           "--host", "127.0.0.1", "--port", str(port), *shlex.split(a.args)]
    print(f"$ {shlex.join(cmd)}", flush=True)
    with open(work / "server.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(proc, port, a.startup_timeout)
    except SystemExit as failed:  # no /health: the work folder goes, so its log is kept beside the results
        stop(proc)
        raise SystemExit(f"{failed.code}: {kept_log(work / 'server.log', a.out)}") from None
    except BaseException:  # Ctrl-C: leave no server behind
        stop(proc)
        raise
    return proc, logs


def kept_log(log: Path, out: Path) -> str:
    """The server log's last line and where a copy of it now lies (``out``), for a one-line failure."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.exists() else []
    out.mkdir(parents=True, exist_ok=True)
    kept = out / f"steplog_overhead-{time.strftime('%Y%m%d-%H%M%S')}-server.log"
    shutil.copyfile(log, kept) if log.exists() else kept.write_text("")
    return f"{lines[-1][:300] if lines else '(the server wrote nothing)'!r} (log: {kept})"


def wait_healthy(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before /health")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"no /health from http://127.0.0.1:{port} in {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's whole process group (API server, engine core, workers), then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def row_counts(logs: Path) -> dict[str, int]:
    return {kind: sum(p.read_bytes().count(b"\n") for p in logs.glob(f"{kind}-*.jsonl")) for kind in ("sched", "gpu")}


def requests_at(a: argparse.Namespace, conc: int) -> int:
    """``--requests`` is one count, or one per ``--concurrency`` entry (C=1 needs far fewer than C=64)."""
    counts = a.requests if len(a.requests) == len(a.concurrency) else [a.requests[0]] * len(a.concurrency)
    return counts[a.concurrency.index(conc)]


def dataset(a: argparse.Namespace, conc: int) -> tuple[dict[str, Any], str | None]:
    data, n = (Path(a.data_dir) if a.data_dir else None), requests_at(a, conc)
    if data is not None and (data / "gsm8k.jsonl").exists():
        return {"name": "gsm8k", "requests": n}, str(data.resolve())
    return {"name": "builtin", "source": "builtin", "requests": min(n, 24)}, None


def one_pass(a: argparse.Namespace, port: int, level: str, conc: int, work: Path, tag: str) -> dict[str, Any]:
    ds, data_dir = dataset(a, conc)
    suite = {"name": f"steplog-{tag}", "model": SERVED, "endpoint": "chat",
             "configs": [{"name": level, "url": f"http://127.0.0.1:{port}"}], "datasets": [ds],
             "load": {"concurrency": conc, "max_tokens": a.max_tokens, "ignore_eos": True, "warmup": "pass",
                      "temperature": 0}}
    if data_dir:
        suite["data_dir"] = data_dir
    path = work / f"{tag}.yaml"
    path.write_text(json.dumps(suite, indent=1))  # JSON is YAML
    run_dir = work / "runs" / tag
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "specbench.cli", "run", str(path), "-o", str(run_dir), "--quiet"],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tag}: specbench run exited {done.returncode}: {done.stderr.strip()[-800:]}")
    (rec,) = json.loads((run_dir / RESULTS).read_text())
    return {"tps": rec.get("output_throughput_tps"), "tpot_ms": rec.get("tpot_mean_ms"), "status": rec.get("status")}


def measure(a: argparse.Namespace, model: str, work: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    port = free_port()
    proc, logs = start_server(a, model, port, work)
    cells: list[dict[str, Any]] = []
    try:
        for rnd in range(a.rounds):
            for conc in a.concurrency:
                for level in (LEVELS if rnd % 2 == 0 else LEVELS[::-1]):
                    (work / "control").write_text(level + "\n")
                    time.sleep(0.6)
                    before = row_counts(logs)
                    res = one_pass(a, port, level, conc, work, f"r{rnd}-c{conc}-{level}")
                    time.sleep(0.6)  # the recorder flushes every 0.25 s
                    after = row_counts(logs)
                    cell = {"model": model, "round": rnd, "concurrency": conc, "level": level, **res,
                            **{f"{k}_rows": after[k] - before[k] for k in after}}
                    print(json.dumps(cell), flush=True)
                    cells.append(cell)
    finally:
        stop(proc)
    headers = [json.loads(p.read_text()) for p in sorted(logs.glob("header-*.json"))]
    return cells, headers


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None else format(x, spec)


def table(cells: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    lines = ["| model | C | level | tok/s per round | mean tok/s | overhead vs off | off spread (noise) "
             "| TPOT ms | sched rows | gpu rows |", "|---|---|---|---|---|---|---|---|---|---|"]
    summary: list[dict[str, Any]] = []
    for model in dict.fromkeys(str(c["model"]) for c in cells):
        for conc in dict.fromkeys(int(c["concurrency"]) for c in cells if c["model"] == model):
            group = [c for c in cells if c["model"] == model and c["concurrency"] == conc]

            def mean_of(level: str, key: str, g: list[dict[str, Any]] = group) -> float | None:
                vals = [float(c[key]) for c in g if c["level"] == level and c[key] is not None]
                return statistics.fmean(vals) if vals else None

            off = [float(c["tps"]) for c in group if c["level"] == "off" and c["tps"] is not None]
            spread = 100 * (max(off) - min(off)) / statistics.fmean(off) if len(off) > 1 else None
            for level in LEVELS:
                tps = [c["tps"] for c in group if c["level"] == level]
                mean, base = mean_of(level, "tps"), mean_of("off", "tps")
                over = 100 * (base - mean) / base if mean is not None and base and level != "off" else None
                rows = [sum(int(c[f"{k}_rows"]) for c in group if c["level"] == level) for k in ("sched", "gpu")]
                summary.append({"model": model, "concurrency": conc, "level": level, "tps": tps, "mean_tps": mean,
                                "overhead_pct": over, "off_spread_pct": spread, "tpot_ms": mean_of(level, "tpot_ms"),
                                "sched_rows": rows[0], "gpu_rows": rows[1]})
                lines.append(f"| {Path(model).name} | {conc} | {level} | {' / '.join(fmt(t) for t in tps)} "
                             f"| {fmt(mean)} | {fmt(over, '+.2f')}{' %' if over is not None else ''} "
                             f"| {fmt(spread, '.2f')}{' %' if spread is not None else ''} "
                             f"| {fmt(mean_of(level, 'tpot_ms'), '.2f')} | {rows[0]} | {rows[1]} |")
    return "\n".join(lines), summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default="python3", help="the engine's Python (has vLLM)")
    p.add_argument("--model", action="append", required=True, help="model folder; repeat for one server each")
    p.add_argument("--args", default="", help="extra vLLM arguments, one string")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server; repeatable")
    p.add_argument("--concurrency", default="1,64", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--requests", default="64", type=lambda s: [int(x) for x in s.split(",")],
                   help="prompts per pass (the warm-up pass repeats them): one count, or one per --concurrency entry")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--data-dir", default=os.environ.get("SPECBENCH_DATA_DIR") or str(ROOT.parent / "shared" / "datasets"),
                   help="folder with gsm8k.jsonl (else the built-in prompts)")
    p.add_argument("--startup-timeout", type=float, default=900)
    p.add_argument("--label", default="", help="where it ran, written above the table")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    a = p.parse_args()
    bad = [kv for kv in a.env if "=" not in kv]
    if bad:
        p.error(f"--env {bad[0]!r}: expected KEY=VALUE")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: no server left behind
    stamp = time.strftime("%Y%m%d-%H%M%S")
    cells: list[dict[str, Any]] = []
    headers: dict[str, list[Any]] = {}
    with tempfile.TemporaryDirectory(prefix="steplog-overhead-") as tmp:
        for i, model in enumerate(a.model):
            got, headers[model] = measure(a, model, Path(tmp) / f"m{i}")
            cells += got
    md, summary = table(cells)
    hooks = {m: sorted({f"{k}: {v}" for h in hs for k, v in h.get("hooks", {}).items()}) for m, hs in headers.items()}
    text = (f"# Step-recorder overhead ({stamp})\n\n{a.label}\n\n`{shlex.join(sys.argv)}`\n\n{md}\n\n"
            "Overhead = (off − level) ÷ off of the mean throughput (positive: slower). Rows: step-log rows written "
            "during the pass, its warm-up included.\n\nHooks: " + json.dumps(hooks) + "\n")
    print(text)
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"steplog_overhead-{stamp}"
    out.with_suffix(".json").write_text(json.dumps({"label": a.label, "argv": sys.argv, "cells": cells,
                                                    "summary": summary, "headers": headers}, indent=1) + "\n")
    out.with_suffix(".md").write_text(text)
    print(f"wrote {out}.json, {out}.md")


if __name__ == "__main__":
    main()
