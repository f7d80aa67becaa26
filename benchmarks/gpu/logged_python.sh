#!/bin/sh
# The engine's python3, first logging which GPUs this server was given (evidence for --parallel gpus).
echo "[logged_python] pid=$$ CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}" >&2
exec python3 "$@"
