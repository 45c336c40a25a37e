#!/usr/bin/env bash
# Installs the Debian packages twinrun needs, only those missing. Run as root (or with sudo).
set -euo pipefail
# libfabric-dev, libopenmpi-dev, openmpi-bin: the twin across processes (sim/multiproc, docs/multiprocess.md)
need=(cmake make gcc g++ clang pkg-config libcmocka-dev libcjson-dev libpcre2-dev libyaml-dev zlib1g-dev valgrind gcovr libclang-rt-14-dev clang-format python3 libfabric-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${need[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "twinrun: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
