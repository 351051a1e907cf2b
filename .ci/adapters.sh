#!/usr/bin/env bash
# CI: the adapter tests (tests/adapters) against the real outside packages, on CPU, at the
# newest and the lowest version of each supported range (pyproject.toml extras).
# verifiers pins mcp==2 while openenv needs mcp<2, so they get separate venvs:
#   .venv-adapters        : the project + the newest TRL and OpenEnv in range   (~3 min to install)
#   .venv-verifiers       : the project + the newest verifiers in range          (~4-6 min to install)
#   .venv-adapters-lowest : the project + the lowest TRL and OpenEnv in range    (~2 min to install);
#                           runs the TRL and OpenEnv tests only. verifiers' range (>=0.4.0,<0.5)
#                           has one release today, so its lowest is the newest (.venv-verifiers).
# The lowest versions are in .ci/adapters-lowest.txt (checked against pyproject.toml by a test).
# The verifiers harness is built by `uv` from PyPI on first use (cached in ~/.cache/uv).
# Called by .ci/run; later runs reuse the venvs (and upgrade the frameworks to the newest in range).
set -euo pipefail
cd "$(dirname "$0")/.."

make_venv() {  # make_venv DIR EXTRAS [PIP ARGS...]
    local dir=$1 extras=$2
    shift 2
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
    "$dir/bin/python" -m pip install -q torch==2.13.0          # the CPU build; an unpinned torch pulls CUDA
    "$dir/bin/python" -m pip install -q -e ".[$extras]" "$@"
}
# naming a framework with --upgrade takes the newest release its range allows (only it is upgraded)
make_venv .venv-adapters train,test,trl,openenv --upgrade trl openenv
make_venv .venv-verifiers train,test,verifiers --upgrade verifiers
make_venv .venv-adapters-lowest train,test,trl,openenv -c .ci/adapters-lowest.txt

export MTRL_GYM_CACHE="$PWD/.cache/mtrl_gym"
.venv-verifiers/bin/python -m pytest -q -p no:cacheprovider tests/adapters/test_verifiers.py tests/adapters/test_episode.py
MTRL_GYM_VERIFIERS_VENV="$PWD/.venv-verifiers" .venv-adapters/bin/python -m pytest -q -p no:cacheprovider tests/adapters
MTRL_GYM_ADAPTERS_LOWEST=1 .venv-adapters-lowest/bin/python -m pytest -q -p no:cacheprovider \
    tests/adapters/test_trl.py tests/adapters/test_openenv.py tests/adapters/test_version_ranges.py
