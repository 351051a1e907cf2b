#!/usr/bin/env bash
# CI: the adapter tests (tests/adapters) against the real outside packages, on CPU.
# verifiers 0.4.0 pins mcp==2 while openenv 0.10 needs mcp<2, so they get two venvs:
#   .venv-adapters  : the project + TRL 1.16 + OpenEnv 0.10   (~3 min to install)
#   .venv-verifiers : the project + verifiers 0.4             (~4-6 min to install)
# The verifiers harness is built by `uv` from PyPI on first use (cached in ~/.cache/uv).
# Called by .ci/run; later runs reuse the venvs.
set -euo pipefail
cd "$(dirname "$0")/.."

make_venv() {  # make_venv DIR EXTRAS
    python3 -m venv "$1"
    "$1/bin/python" -m pip install -q --upgrade pip
    "$1/bin/python" -m pip install -q torch==2.13.0          # the CPU build; an unpinned torch pulls CUDA
    "$1/bin/python" -m pip install -q -e ".[$2]"
}
make_venv .venv-adapters train,test,trl,openenv
make_venv .venv-verifiers train,test,verifiers

export MTRL_GYM_CACHE="$PWD/.cache/mtrl_gym"
.venv-verifiers/bin/python -m pytest -q -p no:cacheprovider tests/adapters/test_verifiers.py tests/adapters/test_episode.py
MTRL_GYM_VERIFIERS_VENV="$PWD/.venv-verifiers" .venv-adapters/bin/python -m pytest -q -p no:cacheprovider tests/adapters
