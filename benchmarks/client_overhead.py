"""Client overhead benchmark (issue #8, "Measure without disturbing").

Runs specbench's streaming client (``specbench.load.generate.generate_load``) and ``vllm bench serve`` against
``synthetic_server.py`` at rising numbers of concurrent streams and reports how far each client's
timings are from the truth, how many chunks/s it sustains, and what CPU it spends per chunk.

Truth comes in two forms, both from the server:

* **schedule** — the deterministic plan (TTFT, gap between chunks, tokens per chunk);
* **send** — the server's ``perf_counter`` just before it handed each chunk to the socket (it
  logs them; ``perf_counter`` is CLOCK_MONOTONIC, shared by all processes on Linux). Error vs send
  is what the *client* (plus the loopback path and the kernel) adds; error vs schedule also
  contains the server's own timer lateness.

Each run gets a fresh server and a fresh client process; the parent only samples both processes'
CPU time from /proc every 20 ms and otherwise sleeps. Client CPU is counted over the measured
window (first request sent → last chunk received), not over start-up and warm-up.

Variants of specbench's client (``specbench+orjson``, ``+uvloop``, ``+fast``, ``+gc`` and
combinations) are applied by monkeypatching in the client process only; the package is not edited.

Usage (see benchmarks/README.md): ``python benchmarks/client_overhead.py`` — about 7 minutes on
2 cores (``--rt 10`` on a shared machine). ``--quick`` for a short smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from synthetic_server import schedule

ENGINE_PY = Path.home() / ".cache/specbench/engine/bin/python"
TOKENIZER = Path.home() / ".cache/specbench/models/SmolLM2-135M-Instruct"
CLK_TCK = os.sysconf("SC_CLK_TCK")
KEY_RE = re.compile(r"^\[(\d+-\d+)\]")
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
         "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega"]


# --------------------------------------------------------------------------------------------
# child: specbench's client under test
# --------------------------------------------------------------------------------------------

def child_specbench(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--num-prompts", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--variant", default="")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    variant = set(filter(None, a.variant.split("+")))

    import specbench.client as sclient
    from specbench.load.generate import LoadPass, generate_load
    from specbench.schemas.request import Prompt

    # The package as `specbench run` uses it: socket client with kernel stamps, orjson, uvloop,
    # quiet GC in generate_load(). Variants: "+aiohttp" (the TLS path), "+openai" (load.client: openai,
    # the official SDK, chunks stamped when it yields them), "+asyncio" (no uvloop). Older
    # names (+orjson, +fast, +uvloop, +gc) are what the package now does and change nothing.

    rng = random.Random(0)

    def prompts(n: int, tag: str) -> list[Prompt]:
        return [Prompt(id=f"{tag}{i}", dataset="synthetic", turns=(" ".join(rng.choices(WORDS, k=16)),))
                for i in range(n)]

    spec = sclient.RequestSpec(base_url=a.url, model="smol", endpoint="chat", max_tokens=a.max_tokens,
                               temperature=0.0)
    out: dict = {}

    print("specbench child: warming up", flush=True)

    async def run() -> None:
        # as specbench/run/phases.py: the kernel-stamped socket client, "+aiohttp" for the TLS path, "+openai" the SDK
        kind = "openai" if "openai" in variant else "aiohttp" if "aiohttp" in variant else "auto"
        s = sclient.open_transport(a.url, kind)
        out["clock"] = sclient.transport_clock(s)
        try:
            # warm-up: one request per stream, so every connection is open before measuring
            await generate_load(s, spec, prompts(a.concurrency, "w"), LoadPass(config="synthetic", phase="warmup",
                                                                   concurrency=a.concurrency))
            ps = prompts(a.num_prompts, "p")
            ru0, pt0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
            res = await generate_load(s, spec, ps, LoadPass(config="synthetic", concurrency=a.concurrency))
            ru1, pt1 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
            out["wall_s"] = res.wall_s
            out["started"], out["ended"] = res.started, res.ended
            out["cpu_s"] = pt1 - pt0
            out["cpu_user_s"] = ru1.ru_utime - ru0.ru_utime
            out["cpu_sys_s"] = ru1.ru_stime - ru0.ru_stime
            out["wakeups"] = ru1.ru_nvcsw - ru0.ru_nvcsw  # voluntary context switches: sleeps ended by I/O or a timer
            out["records"] = res.records
        finally:
            await sclient.close_transport(s)

    if "asyncio" in variant:
        asyncio.run(run())
    else:
        import uvloop
        uvloop.run(run())
    out["records"] = [r.to_dict() | {"text": r.text[:24]} for r in out["records"]]
    Path(a.out).write_text(json.dumps(out))


# --------------------------------------------------------------------------------------------
# parent: processes, CPU sampling
# --------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        return None


def system_busy_ticks() -> int:
    """Busy CPU ticks of the whole machine (all cores) since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)  # user nice system irq softirq steal


def wait_quiet(max_busy_cores: float, timeout: float) -> float:
    """Wait until the machine's busy CPU over one second is below ``max_busy_cores``; return the last reading."""
    deadline = time.time() + timeout
    while True:
        b0 = system_busy_ticks()
        time.sleep(1.0)
        busy = (system_busy_ticks() - b0) / CLK_TCK
        if busy <= max_busy_cores or time.time() > deadline:
            return busy


def proc_children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class CpuSampler(threading.Thread):
    """Samples cumulative CPU ticks of the client and the server processes every ``interval`` s."""

    def __init__(self, client_pid: int, server_pids: list[int], interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.client_pid, self.server_pids, self.interval = client_pid, server_pids, interval
        self.samples: list[tuple[float, int, int, int]] = []
        self.stop = threading.Event()
        self.last_client = 0
        self.last_server: dict[int, int] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            t = time.perf_counter()
            c = proc_ticks(self.client_pid)
            if c is not None:
                self.last_client = c
            for p in self.server_pids:
                v = proc_ticks(p)
                if v is not None:
                    self.last_server[p] = v
            self.samples.append((t, self.last_client, sum(self.last_server.values()), system_busy_ticks()))
            self.stop.wait(self.interval)

    def cpu_between(self, t0: float, t1: float) -> tuple[float, float, float]:
        """(client, server, whole machine) CPU seconds between two perf_counter times, interpolated."""
        if len(self.samples) < 2:
            return math.nan, math.nan, math.nan
        arr = np.asarray(self.samples, dtype=float)
        out = []
        for col in (1, 2, 3):
            v = np.interp([t0, t1], arr[:, 0], arr[:, col])
            out.append((v[1] - v[0]) / CLK_TCK)
        return out[0], out[1], out[2]


def set_rt(pid: int, prio: int) -> None:
    """SCHED_FIFO for every thread of ``pid`` (``prio`` 0: back to SCHED_OTHER)."""
    policy = os.SCHED_FIFO if prio > 0 else os.SCHED_OTHER
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(prio))
        except OSError:
            pass


RT_MARKERS = ("specbench child: warming up", "Starting initial single prompt test run")


def raise_nofile() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Server:
    def __init__(self, args, log_dir: Path) -> None:
        self.port = free_port()
        self.log_dir = log_dir
        cmd = [sys.executable, str(HERE / "synthetic_server.py"), "--port", str(self.port),
               "--workers", str(args.server_workers), "--ttft-ms", str(args.ttft_ms), "--gap-ms", str(args.gap_ms),
               "--tokens-per-chunk", str(args.tokens_per_chunk), "--log-dir", str(log_dir)]
        cmd += ["--phase", args.phase] + (["--vary-length"] if args.vary_length else [])
        self.proc = subprocess.Popen(cmd, preexec_fn=raise_nofile)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("synthetic server did not start") from None
                time.sleep(0.05)
        time.sleep(0.1 * args.server_workers)  # let every worker bind
        kids = proc_children(self.proc.pid)
        self.pids = kids if args.server_workers > 1 else [self.proc.pid]
        if args.rt:
            for pid in self.pids:
                set_rt(pid, args.rt)

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        log: dict[str, tuple] = {}
        self.connections = 0
        for f in self.log_dir.glob("worker-*.json"):
            data = json.loads(f.read_text())
            self.connections += data.get("connections", 0)
            for key, t_recv, ttft, gap, n_tokens, sends in data["requests"]:
                log[key] = (t_recv, ttft, gap, n_tokens, sends)
        return log


def wait_client(proc: subprocess.Popen, pid: int, log: Path, args) -> int | str:
    """Wait for the client; with ``--rt`` make it SCHED_FIFO once its start-up (imports, dataset) is done."""
    deadline = time.time() + args.client_timeout
    rt_set = not args.rt
    while True:
        try:
            return proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
        if time.time() > deadline:
            proc.kill()
            return "timeout"
        if not rt_set:
            text = log.read_text(errors="replace")
            if any(m in text for m in RT_MARKERS):
                set_rt(pid, args.rt)
                rt_set = True


def run_client(args, name: str, conc: int, nprompts: int, work: Path, profile: bool = False) -> dict:
    """One run: fresh server, one client process; returns the joined measurements.

    ``profile``: run the client under py-spy (its numbers are then disturbed by the sampling and
    kept out of the tables).
    """
    run_dir = work / (f"{name}-c{conc}" + ("-profile" if profile else ""))
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    server = Server(args, run_dir / "server")
    out_file = run_dir / "client.json"
    try:
        if name.startswith("specbench"):
            variant = name.partition("+")[2]
            cmd = [sys.executable, str(Path(__file__).resolve()), "_specbench", "--url", server.url,
                   "--concurrency", str(conc), "--num-prompts", str(nprompts), "--max-tokens", str(args.max_tokens),
                   "--variant", variant, "--out", str(out_file)]
        else:
            cmd = [str(args.engine_python), str(HERE / "vllm_bench_serve.py"),
                   "--backend", "openai-chat", "--base-url", server.url, "--endpoint", "/v1/chat/completions",
                   "--model", "smol", "--tokenizer", str(args.tokenizer),
                   "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", str(args.max_tokens),
                   "--max-concurrency", str(conc), "--num-prompts", str(nprompts), "--request-rate", "inf",
                   "--temperature", "0", "--num-warmups", str(conc), "--ready-check-timeout-sec", "30",
                   "--disable-tqdm", "--seed", "0",
                   "--save-result", "--save-detailed", "--result-dir", str(run_dir), "--result-filename", "client.json"]
        prof = None
        if profile:
            prof = run_dir / "profile.txt"
            cmd = [str(args.py_spy), "record", "--format", "raw", "--rate", "250",
                   "-o", str(prof), "--"] + cmd
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
        env.pop("CUDA_VISIBLE_DEVICES", None)
        with open(run_dir / "client.log", "w") as logf:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, preexec_fn=raise_nofile)
            time.sleep(0.05)
            client_pid = proc.pid
            if prof is not None:  # sample the profiled python, not py-spy
                for _ in range(100):
                    kids = proc_children(proc.pid)
                    if kids:
                        client_pid = kids[0]
                        break
                    time.sleep(0.02)
            sampler = CpuSampler(client_pid, server.pids)
            sampler.start()
            rc = wait_client(proc, client_pid, run_dir / "client.log", args)
            sampler.stop.set()
            sampler.join()
        if rc != 0:
            raise RuntimeError(f"{name} at {conc} streams exited with {rc}; see {run_dir / 'client.log'}")
    finally:
        log = server.stop()
    data = json.loads(out_file.read_text())
    reqs = load_specbench(data) if name.startswith("specbench") else load_vllm(data)
    row = analyse(name, conc, reqs, log, sampler, args)
    row["profile"] = str(prof) if prof else None
    row["tcp_connections"] = server.connections  # warm-up opens one per stream; more = reconnects
    if name.startswith("specbench") and data.get("cpu_s") is not None:
        row["cpu_self_us_per_chunk"] = data["cpu_s"] / max(1, row["chunks"]) * 1e6
    return row


# --------------------------------------------------------------------------------------------
# loading what each client recorded, in one shape
# --------------------------------------------------------------------------------------------

def load_specbench(data: dict) -> list[dict]:
    """Per request: key, send time, content-chunk receive times, and the client's own TTFT / TPOT / ITL."""
    from specbench.measure.latency import token_itl, tpot
    from specbench.schemas.request import RequestRecord

    out = []
    for d in data["records"]:
        rec = RequestRecord.from_dict(d)
        m = KEY_RE.match(rec.text or "")
        out.append({
            "key": m.group(1) if m else None, "ok": rec.ok, "send": rec.send_time, "recv": list(rec.chunk_times),
            "ttft": rec.ttft, "tpot": tpot(rec), "itl_tokens": token_itl(rec),
            "chunk_tokens": list(rec.chunk_tokens), "output_tokens": rec.output_tokens,
            "reads": rec.chunk_read_times,  # +openai: when the transport read each chunk's bytes
        })
    return out


def load_vllm(data: dict) -> list[dict]:
    """vLLM's detailed result: start_times, ttfts, itls (per chunk), latencies, output_lens."""
    out = []
    for st, ttft, itl, lat, olen, text, err in zip(data["start_times"], data["ttfts"], data["itls"], data["latencies"],
                                                   data["output_lens"], data["generated_texts"], data["errors"]):
        ok = not err and ttft is not None and ttft > 0
        times = list(st + ttft + np.concatenate([[0.0], np.cumsum(itl)])) if ok else []
        m = KEY_RE.match(text or "")
        tp = (lat - ttft) / (olen - 1) if ok and olen and olen > 1 else None
        out.append({"key": m.group(1) if m else None, "ok": ok, "send": st, "recv": times, "ttft": ttft,
                    "tpot": tp, "itl_tokens": None, "output_tokens": olen, "n_itl": len(itl)})
    return out


# --------------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------------

def pct(a, p) -> float | None:
    a = np.asarray(a, dtype=float)
    return float(np.percentile(a, p)) if a.size else None


def analyse(name: str, conc: int, reqs: list[dict], log: dict, sampler: CpuSampler, args) -> dict:
    ttft_s, ttft_x, gap_s, gap_x, itl_s, itl_x, tpot_s, tpot_x, lag, late, reqpath, own = ([] for _ in range(12))
    ok = sorted((r for r in reqs if r["ok"]), key=lambda r: r["send"])
    failed = len(reqs) - len(ok)
    unjoined = role_dropped = 0
    first_wave = {id(r) for r in ok[:conc]}
    ttft_x_steady: list[float] = []
    chunks = tokens = 0
    sched_time = 0.0
    for r in ok:
        srv = log.get(r["key"])
        if srv is None:
            unjoined += 1
            continue
        t_recv, ttft, gap, n_tok, sends = srv
        sizes = np.asarray(schedule(n_tok, args.tokens_per_chunk), dtype=float)
        n_chunks = len(sizes)
        recv = np.asarray(r["recv"], dtype=float)
        if len(recv) == n_chunks + 1:  # vllm bench counts the role chunk as a token chunk: drop its timestamp
            recv = recv[1:]
            role_dropped += 1
        if len(recv) != n_chunks or len(sends) != n_chunks:
            unjoined += 1
            continue
        sends = np.asarray(sends)
        sched = t_recv + ttft + gap * np.arange(n_chunks)
        sched_time += sched[-1] - t_recv
        chunks += n_chunks
        tokens += n_tok
        # TTFT: the client's own number vs the schedule, and vs what the server actually did
        # (t_recv is the kernel's arrival time of the request at the server's socket)
        ttft_s.append(r["ttft"] - ttft)
        ttft_x.append(r["ttft"] - (sends[0] - t_recv))
        if id(r) not in first_wave:
            ttft_x_steady.append(ttft_x[-1])
        reqpath.append(t_recv - r["send"])
        # per-chunk gaps (what vllm bench calls ITL)
        g = np.diff(recv)
        gap_s.append(g - gap)
        gap_x.append(g - np.diff(sends))
        # per-token ITL (specbench only): n samples of gap/n per chunk
        if r["itl_tokens"] is not None:
            tok = sizes[1:]
            itl_s.append(r["itl_tokens"] - np.repeat(gap / tok, tok.astype(int)))
            itl_x.append(r["itl_tokens"] - np.repeat(np.diff(sends) / tok, tok.astype(int)))
        if r["tpot"] is not None and n_tok > 1:
            tpot_s.append(r["tpot"] - (sched[-1] - sched[0]) / (n_tok - 1))
            tpot_x.append(r["tpot"] - (sends[-1] - sends[0]) / (n_tok - 1))
        lag.append(recv - sends)
        late.append(sends - sched)
        if r.get("reads") is not None and len(r["reads"]) == n_chunks:
            own.append(recv - np.asarray(r["reads"], dtype=float))
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0)
    row: dict = {"client": name, "streams": conc, "requests": len(reqs), "failed": failed, "unjoined": unjoined,
                 "role_chunk_dropped": role_dropped}
    t0 = min(r["send"] for r in ok)
    t1 = max(r["recv"][-1] for r in ok)
    wall = t1 - t0
    ccpu, scpu, allcpu = sampler.cpu_between(t0, t1)
    ideal = sched_time / conc  # closed loop: C streams busy back to back, on schedule
    row.update({
        "wall_s": wall, "chunks": chunks, "tokens": tokens,
        "chunks_per_s": chunks / wall, "tokens_per_s": tokens / wall,
        "offered_chunks_per_s": chunks / ideal if ideal else None,
        "ideal_wall_s": ideal,
        "client_cpu_s": ccpu, "server_cpu_s": scpu,
        "client_core_util": ccpu / wall, "server_core_util": scpu / wall,
        # everything else on the machine during the window (other users' jobs; ~0.01 is our sampler)
        "other_cores": max(0.0, allcpu - ccpu - scpu) / wall,
        "client_cpu_s_per_1k_chunks": ccpu / chunks * 1e3 if chunks else None,
        "client_us_per_chunk": ccpu / chunks * 1e6 if chunks else None,
        "chunks_per_client_core_s": chunks / ccpu if ccpu > 0 else None,
    })
    for label, xs in (("ttft_vs_sched", ttft_s), ("ttft_vs_send", ttft_x), ("ttft_steady_vs_send", ttft_x_steady),
                      ("tpot_vs_sched", tpot_s),
                      ("tpot_vs_send", tpot_x), ("request_path", reqpath)):
        a = np.abs(np.asarray(xs, dtype=float)) * 1e3
        row[f"{label}_p50_ms"], row[f"{label}_p99_ms"] = pct(a, 50), pct(a, 99)
    for label, xs in (("gap_vs_sched", gap_s), ("gap_vs_send", gap_x), ("itl_vs_sched", itl_s),
                      ("itl_vs_send", itl_x), ("lag", lag), ("server_late", late), ("own_lag", own)):
        a = np.abs(cat(xs)) * 1e3
        row[f"{label}_p50_ms"], row[f"{label}_p99_ms"] = pct(a, 50), pct(a, 99)
        if label in ("lag", "server_late", "own_lag"):
            row[f"{label}_max_ms"] = float(a.max()) if a.size else None
    return row


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def f(v, nd=2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}"


def tables(rows: list[dict]) -> str:
    out = []
    out.append("#### Throughput and client cost (✗ = the client broke: chunk lag p99 > --break-lag-ms, "
               "failed requests, or its core saturated)\n")
    out.append("| client | streams | req ok/fail | chunks/s (offered) | tokens/s | wall/ideal | client core | "
               "client µs/chunk | client CPU s/1k chunks | chunks/s per client core | server core | other procs |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        out.append(f"| {r['client']}{' ✗' if r.get('broken') else ''} | {r['streams']} | {r['requests'] - r['failed']}/{r['failed']} | "
                   f"{f(r['chunks_per_s'], 0)} ({f(r['offered_chunks_per_s'], 0)}) | {f(r['tokens_per_s'], 0)} | "
                   f"{f(r['wall_s'] / r['ideal_wall_s'], 3)} | {f(r['client_core_util'] * 100, 0)}% | "
                   f"{f(r['client_us_per_chunk'], 1)} | {f(r['client_cpu_s_per_1k_chunks'], 4)} | "
                   f"{f(r['chunks_per_client_core_s'], 0)} | {f(r['server_core_util'] * 100, 0)}% | "
                   f"{f(r['other_cores'] * 100, 0)}% |")
    out.append("\n#### Timing error vs the server's actual send times (what the client adds), |error| p50 / p99 in ms\n")
    out.append("| client | streams | TTFT | TTFT after 1st wave | per-chunk gap (= vllm's ITL) | per-token ITL | TPOT | "
               "chunk lag recv−send (max) | request transit send→server socket |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        out.append(f"| {r['client']} | {r['streams']} | {f(r['ttft_vs_send_p50_ms'], 3)} / {f(r['ttft_vs_send_p99_ms'], 3)} | "
                   f"{f(r['ttft_steady_vs_send_p50_ms'], 3)} / {f(r['ttft_steady_vs_send_p99_ms'], 3)} | "
                   f"{f(r['gap_vs_send_p50_ms'], 3)} / {f(r['gap_vs_send_p99_ms'], 3)} | "
                   f"{f(r['itl_vs_send_p50_ms'], 3)} / {f(r['itl_vs_send_p99_ms'], 3)} | "
                   f"{f(r['tpot_vs_send_p50_ms'], 4)} / {f(r['tpot_vs_send_p99_ms'], 4)} | "
                   f"{f(r['lag_p50_ms'], 3)} / {f(r['lag_p99_ms'], 3)} ({f(r['lag_max_ms'], 1)}) | "
                   f"{f(r['request_path_p50_ms'], 3)} / {f(r['request_path_p99_ms'], 3)} |")
    out.append("\n#### Timing error vs the deterministic schedule (includes the server's timer lateness), "
               "|error| p50 / p99 in ms\n")
    out.append("| client | streams | TTFT | per-chunk gap | per-token ITL | TPOT | server send lateness (max) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        out.append(f"| {r['client']} | {r['streams']} | {f(r['ttft_vs_sched_p50_ms'], 3)} / {f(r['ttft_vs_sched_p99_ms'], 3)} | "
                   f"{f(r['gap_vs_sched_p50_ms'], 3)} / {f(r['gap_vs_sched_p99_ms'], 3)} | "
                   f"{f(r['itl_vs_sched_p50_ms'], 3)} / {f(r['itl_vs_sched_p99_ms'], 3)} | "
                   f"{f(r['tpot_vs_sched_p50_ms'], 4)} / {f(r['tpot_vs_sched_p99_ms'], 4)} | "
                   f"{f(r['server_late_p50_ms'], 3)} / {f(r['server_late_p99_ms'], 3)} ({f(r['server_late_max_ms'], 1)}) |")
    own = [r for r in rows if r.get("own_lag_p99_ms") is not None]
    if own:
        out.append("\n#### The SDK's chunk lag: the truth (SDK yield − server send) and what a run sees of it "
                   "(SDK yield − the transport's read of the chunk's bytes: `client_lag_p99_ms`), p50 / p99 (max) in ms\n")
        out.append("| client | streams | lag vs server send | lag vs transport read (in-run check) |")
        out.append("|---|---:|---:|---:|")
        for r in own:
            out.append(f"| {r['client']} | {r['streams']} | {f(r['lag_p50_ms'], 3)} / {f(r['lag_p99_ms'], 3)} "
                       f"({f(r['lag_max_ms'], 1)}) | {f(r['own_lag_p50_ms'], 3)} / {f(r['own_lag_p99_ms'], 3)} "
                       f"({f(r['own_lag_max_ms'], 1)}) |")
    by = {(r["client"], r["streams"]): r for r in rows}
    ratio_rows = []
    for r in rows:
        v = by.get(("vllm", r["streams"]))
        if r["client"].startswith("specbench") and v:
            ratio_rows.append((r, v))
    if ratio_rows:
        out.append("\n#### Ratios specbench / vllm bench serve at equal load (CPU: lower is better; "
                   "chunks per core: higher is better)\n")
        out.append("| client | streams | CPU per chunk | chunks/s per client core | gap err p99 (vs send) | "
                   "TTFT err p99 (vs send) | lag p99 |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for r, v in ratio_rows:
            def q(k, r=r, v=v):
                return r[k] / v[k] if r.get(k) and v.get(k) else None
            out.append(f"| {r['client']} | {r['streams']} | {f(q('client_us_per_chunk'), 2)} | "
                       f"{f(q('chunks_per_client_core_s'), 2)} | {f(q('gap_vs_send_p99_ms'), 2)} | "
                       f"{f(q('ttft_vs_send_p99_ms'), 2)} | {f(q('lag_p99_ms'), 2)} |")
    return "\n".join(out)


def _short(frame: str) -> str:
    """``func (/long/path/pkg/mod.py:123)`` → ``func (pkg/mod.py)``."""
    m = re.match(r"(.*) \((.*?)(?::\d+)?\)$", frame)
    if not m:
        return frame
    return f"{m.group(1)} ({'/'.join(m.group(2).split('/')[-2:])})"


def top_costs(raw: Path, n: int = 15) -> str:
    """Self and inclusive shares per function from py-spy's raw (collapsed-stack) output.

    Only samples taken inside the event loop count (start-up imports, closing the session and
    writing results are left out), and not those opening TCP connections, which happens only in the
    warm-up (the server's connection count equals the number of streams); line numbers are dropped
    so a function's lines add up.
    """
    self_c: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, cnt = line.rpartition(" ")
        if (not stack or not ("_run_once" in stack or "uvloop" in stack) or "_create_connection" in stack
                or "ClientSession.__aexit__" in stack):
            continue
        c = int(cnt)
        total += c
        frames = [_short(fr) for fr in stack.split(";")]
        self_c[frames[-1]] = self_c.get(frames[-1], 0) + c
        for fr in set(frames):
            incl[fr] = incl.get(fr, 0) + c
    if not total:
        return "no samples inside the event loop"
    lines = [f"py-spy samples inside the event loop: {total}", "", "| self % | function |", "|---:|---|"]
    for fr, c in sorted(self_c.items(), key=lambda kv: -kv[1])[:n]:
        lines.append(f"| {100 * c / total:.1f} | `{fr}` |")
    lines += ["", "| inclusive % | function |", "|---:|---|"]
    for fr, c in sorted(incl.items(), key=lambda kv: -kv[1])[:n + 5]:
        lines.append(f"| {100 * c / total:.1f} | `{fr}` |")
    return "\n".join(lines)


def broken(r: dict, args) -> str | None:
    if r["failed"]:
        return f"{r['failed']} failed requests"
    if r["unjoined"] > 0.01 * r["requests"]:
        return f"{r['unjoined']} requests not matched"
    if r["lag_p99_ms"] and r["lag_p99_ms"] > args.break_lag_ms:
        return f"chunk lag p99 {r['lag_p99_ms']:.1f} ms > {args.break_lag_ms} ms"
    if r["client_core_util"] > 0.95:
        return f"client saturated its core ({100 * r['client_core_util']:.0f}%)"
    return None


def set_priority(nice: int) -> None:
    """Niceness for this process and the server/client processes it starts.

    With autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``) niceness only ranks
    processes within one session, so the benchmark also starts its own session and sets that
    group's niceness; otherwise other sessions' jobs still get an equal share of the cores.
    """
    try:
        if os.getsid(0) != os.getpid():
            os.setsid()
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError as err:
        print(f"could not set the autogroup's niceness: {err}", file=sys.stderr)
    os.setpriority(os.PRIO_PROCESS, 0, nice)


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_specbench":
        child_specbench(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loads", default="16,64,256,1024", help="concurrent streams, rising")
    ap.add_argument("--clients", default="specbench,vllm",
                    help="specbench[+aiohttp|+openai][+asyncio] and/or vllm, comma separated")
    ap.add_argument("--variants", default="specbench+aiohttp",
                    help="extra specbench variants, run only at --variant-loads")
    ap.add_argument("--variant-loads", default="256,1024")
    ap.add_argument("--rounds", type=int, default=5, help="requests per stream in the measured phase")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--gap-ms", type=float, default=30.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=3)
    ap.add_argument("--phase", choices=["request", "stagger", "grid"], default="stagger",
                    help="how the server lines streams up (see synthetic_server.py)")
    ap.add_argument("--vary-length", action=argparse.BooleanOptionalAction, default=True,
                    help="server ends requests after max_tokens/2..max_tokens tokens")
    ap.add_argument("--server-workers", type=int, default=1)
    ap.add_argument("--break-lag-ms", type=float, default=50.0,
                    help="a client 'breaks' at a load when p99 chunk lag exceeds this (or it fails requests, "
                         "or saturates its core); higher loads are then skipped for it")
    ap.add_argument("--stop-on-break", action="store_true",
                    help="skip higher loads for a client once it broke (default: run them and mark it)")
    ap.add_argument("--client-timeout", type=float, default=300.0)
    ap.add_argument("--quiet-cores", type=float, default=0.15,
                    help="before each run, wait until the rest of the machine uses less than this")
    ap.add_argument("--quiet-timeout", type=float, default=60.0)
    ap.add_argument("--max-other-cores", type=float, default=0.2,
                    help="re-run when other processes used more than this during the measured window")
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--rt", type=int, default=0,
                    help="SCHED_FIFO priority for the server and (after its start-up) the client; for a busy "
                         "shared machine, needs root; 0 = off")
    ap.add_argument("--nice", type=int, default=None,
                    help="run server and clients at this niceness (e.g. -15, needs root) when the machine is shared")
    ap.add_argument("--engine-python", type=Path, default=ENGINE_PY)
    ap.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    ap.add_argument("--profile", action="store_true", help="also profile one run with py-spy")
    ap.add_argument("--profile-client", default="specbench")
    ap.add_argument("--profile-load", type=int, default=1024)
    ap.add_argument("--work", type=Path, default=Path("/tmp/specbench-client-overhead"))
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    ap.add_argument("--quick", action="store_true", help="16,64 streams, 2 rounds, no variants")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.variants = 2, ""
        if args.loads == ap.get_default("loads"):
            args.loads = "16,64"
    if args.nice is not None:
        set_priority(args.nice)
    args.py_spy = Path(sys.executable).parent / "py-spy"
    if args.profile and not args.py_spy.exists():
        args.py_spy = Path(shutil.which("py-spy") or "py-spy")
    loads = [int(x) for x in args.loads.split(",")]
    clients = [c for c in args.clients.split(",") if c]
    if "vllm" in clients and not args.engine_python.exists():
        print(f"no vLLM engine at {args.engine_python}: skipping vllm bench serve", file=sys.stderr)
        clients.remove("vllm")
    variants = [v for v in args.variants.split(",") if v]
    variant_loads = {int(x) for x in args.variant_loads.split(",") if x}
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "load_avg_start": load_avg(), "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "argv": sys.argv[1:], "nice": os.getpriority(os.PRIO_PROCESS, 0), "rt": args.rt,
            "schedule": {"ttft_ms": args.ttft_ms, "gap_ms": args.gap_ms, "tokens_per_chunk": args.tokens_per_chunk,
                         "max_tokens": args.max_tokens, "chunks_per_request": len(schedule(args.max_tokens, args.tokens_per_chunk)),
                         "phase": args.phase, "vary_length": args.vary_length, "server_workers": args.server_workers}}
    rows: list[dict] = []
    dead: dict[str, str] = {}
    t_start = time.time()
    for conc in loads:
        todo = clients + ([v for v in variants if conc in variant_loads])
        for name in todo:
            if name in dead:
                continue
            best = None
            for attempt in range(args.retries + 1):
                idle = wait_quiet(args.quiet_cores, args.quiet_timeout)
                la = load_avg()
                print(f"[{time.time() - t_start:5.0f}s] {name} at {conc} streams (load avg {la}, "
                      f"other busy {idle:.2f} cores) ...", flush=True)
                try:
                    r = run_client(args, name, conc, conc * args.rounds, args.work)
                except RuntimeError as err:
                    print(f"    FAILED: {err}", flush=True)
                    r = None
                    break
                r["attempts"] = attempt + 1
                if best is None or r["other_cores"] < best["other_cores"]:
                    best = r
                if r["other_cores"] <= args.max_other_cores or attempt == args.retries:
                    break
                print(f"    other processes used {r['other_cores']:.2f} cores during the run; retrying", flush=True)
            if best is None:
                dead[name] = "failed"
                continue
            r = best
            r["load_avg_before"] = la
            rows.append(r)
            print(f"    {r['chunks_per_s']:,.0f} chunks/s, {r['tokens_per_s']:,.0f} tok/s, client "
                  f"{r['client_us_per_chunk']:.1f} µs/chunk ({100 * r['client_core_util']:.0f}% core), "
                  f"gap err p99 {r['gap_vs_send_p99_ms']:.3f} ms vs send / {r['gap_vs_sched_p99_ms']:.3f} vs sched, "
                  f"TTFT err p99 {r['ttft_vs_send_p99_ms']:.3f} ms, lag p99 {r['lag_p99_ms']:.3f} ms", flush=True)
            why = broken(r, args)
            r["broken"] = why
            if why:
                print(f"    {name} breaks at {conc} streams: {why}", flush=True)
                if args.stop_on_break and not name.partition("+")[2]:
                    dead[name] = why
    text = tables(rows)
    if args.profile:
        print(f"[{time.time() - t_start:5.0f}s] profiling {args.profile_client} at {args.profile_load} streams "
              "(extra run, not in the tables) ...", flush=True)
        try:
            pr = run_client(args, args.profile_client, args.profile_load, args.profile_load * args.rounds, args.work,
                            profile=True)
            text += f"\n\n#### Profile (py-spy, {args.profile_client} at {args.profile_load} streams, a separate run)\n\n"
            text += top_costs(Path(pr["profile"]))
        except (RuntimeError, OSError) as err:
            print(f"    profiling failed: {err}", flush=True)
    meta["load_avg_end"] = load_avg()
    meta["runtime_s"] = time.time() - t_start
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.out / f"client_overhead-{stamp}.json").write_text(json.dumps({"meta": meta, "rows": rows, "broken": dead}, indent=1))
    (args.out / f"client_overhead-{stamp}.md").write_text(
        f"Run {meta['started']}, {meta['cpus']} CPUs, load avg {meta['load_avg_start']} → {meta['load_avg_end']}, "
        f"{meta['runtime_s']:.0f} s; schedule {meta['schedule']}\n\n" + text + "\n")
    print()
    print(text)
    print(f"\nwritten: {args.out}/client_overhead-{stamp}.{{json,md}}  ({meta['runtime_s']:.0f} s)")


if __name__ == "__main__":
    main()
