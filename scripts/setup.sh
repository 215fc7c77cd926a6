#!/usr/bin/env bash
# Installs Tessera's build dependencies on Debian 12 (as root, or with sudo)
# when any is missing, then configures and builds everything into build/.
# Its arguments go to cmake's configure (scripts/test.sh adds
# -DTESSERA_BUILD_FUZZERS=ON).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22
  libgtest-dev libbenchmark-dev protobuf-compiler libprotobuf-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  coinor-libcbc-dev pkgconf libxxhash-dev libsleef-dev
  libonnx-dev libonnx-testdata python3-onnx python3-torch
  clang libclang-rt-dev chromium libzmq3-dev cppzmq-dev
)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y \
    --no-install-recommends "${missing[@]}"
fi

cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "${TESSERA_BUILD_JOBS:-2}"
