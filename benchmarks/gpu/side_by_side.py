"""specbench and ``vllm bench serve`` on the same vLLM server, alternating (issue 16, item 4).

    python3 side_by_side.py --out DIR --model MODEL_DIR --drafter DSPARK_DIR [--gpu 1] [--reps 2]

For each server (n-gram k=3; DSpark k=3 with synthetic acceptance 80/60/40 %) one vLLM server is
started on its own; a full unmeasured pass at the highest concurrency warms it (a fresh server's
first pass at high C is slow). Then at each load point, repetition by repetition, the two clients
take turns (the order flips each repetition), on the same gsm8k prompts (specbench's recipe
text, sent as one user message by both), max_tokens 128, ignore_eos, temperature 0, C warm-up
requests each. At the highest load point specbench also runs with ``client_processes: auto`` and
2. Writes DIR/side_by_side.json (every number) and DIR/side_by_side.md (the table).
Run with the engine's Python and specbench on PYTHONPATH.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from specbench.schemas.run_files import META, RESULTS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

SERVERS = {
    "ngram_k3": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2},
    "dspark_k3_synth": {"method": "dspark", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                        "synthetic_acceptance_rates": [0.8, 0.6, 0.4]},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"server not ready after {timeout} s")


def prompts_file(out: Path, n: int) -> Path:
    """The exact texts specbench sends (its gsm8k recipe), for vllm bench serve's custom data set."""
    from specbench.datasets.loader import load_prompts
    from specbench.suite import read_suite

    suite = read_suite(str(write_suite(out, "probe", "http://127.0.0.1:1", {"method": "ngram", "num_speculative_tokens": 3}, 1, n, 1)))
    rows = load_prompts(suite.datasets[0], suite.data_dir)
    path = out / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": p.turns[0]}) + "\n" for p in rows))
    return path


def write_suite(out: Path, name: str, url: str, spec: dict, c: int, n: int, warmup, processes=1) -> Path:
    import yaml

    cfg = {"name": "server", "url": url, "method": spec["method"], "num_speculative_tokens": spec["num_speculative_tokens"]}
    suite = {"name": name, "model": "smol", "endpoint": "chat", "configs": [cfg],
             "datasets": [{"name": "gsm8k", "requests": n}],
             "load": {"concurrency": c, "max_tokens": 128, "temperature": 0, "ignore_eos": True,
                      "warmup": warmup, "client_processes": processes}}
    path = out / "suites" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def run_specbench(out: Path, tag: str, url: str, spec: dict, c: int, n: int, warmup, processes=1) -> dict:
    suite = write_suite(out, tag, url, spec, c, n, warmup, processes)
    run_dir = out / "runs" / tag
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "specbench.cli", "run", str(suite), "-o", str(run_dir), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    if done.returncode != 0 or not (run_dir / RESULTS).exists():
        return {"error": (done.stdout + done.stderr)[-800:], "wall_s": wall}
    row = json.loads((run_dir / RESULTS).read_text())[0]
    meta = json.loads((run_dir / META).read_text())
    keys = ["requests", "output_throughput_tps", "ttft_mean_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p99_ms",
            "itl_mean_ms", "itl_p99_ms", "step_mean_ms", "step_p99_ms", "mean_acceptance_length", "acceptance_rate",
            "acceptance_per_position", "shared_read_share", "stream_merged_chunks", "stream_mean_acceptance_length"]
    res = {k: row.get(k) for k in keys}
    res["timing"] = meta.get("timing")
    res["client_processes"] = processes
    res["wall_s"] = wall
    return res


def run_vllm_bench(out: Path, tag: str, url: str, model_dir: str, prompts: Path, c: int, n: int) -> dict:
    argv = [sys.executable, str(ROOT / "benchmarks" / "vllm_bench_serve.py"), "--backend", "openai-chat",
            "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "smol", "--tokenizer", model_dir,
            "--dataset-name", "custom", "--dataset-path", str(prompts), "--custom-output-len", "128",
            "--skip-chat-template", "--disable-shuffle", "--max-concurrency", str(c), "--num-prompts", str(n),
            "--request-rate", "inf", "--temperature", "0", "--ignore-eos", "--num-warmups", str(c),
            "--disable-tqdm", "--seed", "0", "--save-result", "--result-dir", str(out / "vllm_bench"),
            "--result-filename", f"{tag}.json"]
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    (out / "vllm_bench").mkdir(exist_ok=True)
    (out / "vllm_bench" / f"{tag}.log").write_text(done.stdout + done.stderr)
    path = out / "vllm_bench" / f"{tag}.json"
    if done.returncode != 0 or not path.exists():
        return {"error": (done.stdout + done.stderr)[-800:], "wall_s": wall}
    r = json.loads(path.read_text())
    keys = {"requests": "completed", "output_throughput_tps": "output_throughput", "ttft_mean_ms": "mean_ttft_ms",
            "ttft_p99_ms": "p99_ttft_ms", "tpot_mean_ms": "mean_tpot_ms", "tpot_p99_ms": "p99_tpot_ms",
            "itl_mean_ms": "mean_itl_ms", "itl_p99_ms": "p99_itl_ms", "mean_acceptance_length": "spec_decode_acceptance_length",
            "acceptance_rate": "spec_decode_acceptance_rate", "acceptance_per_position": "spec_decode_per_position_acceptance_rates"}
    res = {k: r.get(v) for k, v in keys.items()}
    if res["acceptance_rate"] is not None:
        res["acceptance_rate"] /= 100.0
    res["wall_s"] = wall
    return res


def fmt(v, nd=2):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def table(rows: list[dict]) -> str:
    head = ("| server | C | client | rep | req | output tok/s | TTFT mean/p99 ms | TPOT mean/p99 ms | ITL mean/p99 ms "
            "| accept len | accept rate | harness share | shared_read_share |")
    lines = [head, "|" + " --- |" * 13]
    for r in rows:
        m = r["result"]
        if "error" in m:
            lines.append(f"| {r['server']} | {r['c']} | {r['client']} | {r['rep']} | failed: {m['error'][-120:]!r} |")
            continue
        timing = m.get("timing") or {}
        lines.append(" | ".join([
            f"| {r['server']}", str(r["c"]), r["client"], str(r["rep"]), fmt(m.get("requests")),
            fmt(m.get("output_throughput_tps"), 0), f"{fmt(m.get('ttft_mean_ms'))}/{fmt(m.get('ttft_p99_ms'))}",
            f"{fmt(m.get('tpot_mean_ms'))}/{fmt(m.get('tpot_p99_ms'))}", f"{fmt(m.get('itl_mean_ms'))}/{fmt(m.get('itl_p99_ms'))}",
            fmt(m.get("mean_acceptance_length"), 3), fmt(m.get("acceptance_rate"), 4),
            fmt(timing.get("harness_share"), 4), fmt(m.get("shared_read_share"), 4)]) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--drafter", required=True)
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--points", default="16:128,256:512", help="C:prompts,...")
    ap.add_argument("--servers", default=",".join(SERVERS))
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    points = [tuple(int(x) for x in p.split(":")) for p in args.points.split(",")]
    prompts = prompts_file(out, max(n for _, n in points))
    rows: list[dict] = []
    for name in args.servers.split(","):
        spec = dict(SERVERS[name])
        body = {k: v for k, v in spec.items()}
        if spec["method"] == "dspark":
            body["model"] = args.drafter
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
                "--served-model-name", "smol", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048",
                "--speculative-config", json.dumps(body)]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(args.gpu), VLLM_USE_FLASHINFER_SAMPLER="0")
        log = open(out / f"server-{name}.log", "w")
        print(f"[{time.strftime('%T')}] {name}: starting {' '.join(argv)}", flush=True)
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            ready = wait_ready(url, proc, 900)
            print(f"[{time.strftime('%T')}] {name}: ready in {ready:.0f} s", flush=True)
            top_c, top_n = max(points)
            run_specbench(out, f"{name}-warm", url, spec, top_c, top_n, 0)
            for c, n in points:
                for rep in range(args.reps):
                    order = ["specbench", "vllm bench serve"] if rep % 2 == 0 else ["vllm bench serve", "specbench"]
                    for client in order:
                        tag = f"{name}-c{c}-r{rep}-{'sb' if client == 'specbench' else 'vb'}"
                        if client == "specbench":
                            res = run_specbench(out, tag, url, spec, c, n, c)
                        else:
                            res = run_vllm_bench(out, tag, url, args.model, prompts, c, n)
                        rows.append({"server": name, "c": c, "client": client, "rep": rep, "result": res})
                        print(f"[{time.strftime('%T')}] {tag}: {json.dumps(res)[:300]}", flush=True)
                if c == top_c:
                    for procs in ("auto", 2):
                        tag = f"{name}-c{c}-p{procs}"
                        res = run_specbench(out, tag, url, spec, c, n, c, procs)
                        rows.append({"server": name, "c": c, "client": f"specbench (client_processes {procs})", "rep": 0, "result": res})
                        print(f"[{time.strftime('%T')}] {tag}: {json.dumps(res)[:300]}", flush=True)
                (out / "side_by_side.json").write_text(json.dumps(rows, indent=1))
                (out / "side_by_side.md").write_text(table(rows))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            log.close()
    (out / "side_by_side.json").write_text(json.dumps(rows, indent=1))
    (out / "side_by_side.md").write_text(table(rows))
    print(table(rows))


if __name__ == "__main__":
    main()
