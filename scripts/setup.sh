#!/usr/bin/env bash
# Sets up a fresh Debian machine for DeepInfer, idempotently and quickly on a second run:
#   1. Debian packages (compiler, CMake/Ninja, GoogleTest, ICU, nlohmann-json, CLI11, ccache,
#      Boost headers for the HTTP server's Beast/Asio),
#      installed only when one is missing;
#   2. a Python virtual environment at .venv with the build and test requirements, refreshed only
#      when requirements change;
#   3. the `deepinfer` package itself (`pip install --no-build-isolation .`), incremental thanks
#      to the persistent scikit-build-core build directory.
# Source it (`. scripts/setup.sh`) to get .venv on PATH; running it also works.
set -euo pipefail
DEEPINFER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$DEEPINFER_ROOT"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- 1. Debian packages -------------------------------------------------------------------
APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config python3-venv
              libgtest-dev libgmock-dev libicu-dev nlohmann-json3-dev libcli11-dev libboost-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. Python environment ----------------------------------------------------------------
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PYTHON" -m venv .venv
fi
req_stamp=".venv/.deepinfer-requirements"
req_hash="$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$req_stamp" 2>/dev/null)" != "$req_hash" ]; then
  log "installing Python requirements"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements/build.txt -r requirements/test.txt
  echo "$req_hash" > "$req_stamp"
fi
export PATH="$DEEPINFER_ROOT/.venv/bin:$PATH"
export VIRTUAL_ENV="$DEEPINFER_ROOT/.venv"

# --- 3. The package -------------------------------------------------------------------------
# Reinstall only when a tracked source file changed since the last install.
src_stamp=".venv/.deepinfer-installed"
src_hash="$( (git ls-files -s 2>/dev/null; git diff 2>/dev/null; \
             git ls-files --others --exclude-standard 2>/dev/null | xargs -r cat 2>/dev/null) | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$src_stamp" 2>/dev/null)" != "$src_hash" ] || ! .venv/bin/python -c "import deepinfer._core" 2>/dev/null; then
  log "building and installing deepinfer (pip install --no-build-isolation .)"
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    .venv/bin/python -m pip install -q --no-build-isolation --no-deps . 
  echo "$src_hash" > "$src_stamp"
fi
log "ready: $(.venv/bin/deepinfer --version)"
