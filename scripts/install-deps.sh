#!/usr/bin/env bash
# Installs the Debian packages the build needs, only when one is missing.
set -euo pipefail
packages=(cmake ninja-build g++ libfmt-dev libspdlog-dev catch2 libcli11-dev libxxhash-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
if [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ]; then
  echo "error: the CUDA toolkit headers were not found at ${CUDA_HOME:-/usr/local/cuda}/include" >&2
  echo "       (set CUDA_HOME; only the headers and libnvrtc are needed, not a GPU)" >&2
  exit 1
fi
