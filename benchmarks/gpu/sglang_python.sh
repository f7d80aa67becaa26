#!/bin/sh
# SGLang's python3: its own site folder (unpacked from the SGLang bundle) instead of the vLLM one,
# so the two engines' pins (transformers, xgrammar, openai, …) never meet; logs the GPUs it was given.
echo "[sglang_python] pid=$$ CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset} PYTHONPATH=${SGLANG_SITE}" >&2
PYTHONPATH=${SGLANG_SITE:?SGLANG_SITE: the SGLang site folder} exec python3 "$@"
