#!/usr/bin/env bash
# Installs the Debian packages twinrun needs, only those missing. Run as root (or with sudo).
set -euo pipefail
# libfabric-dev, libopenmpi-dev, openmpi-bin: the twin across processes (sim/multiproc, docs/multiprocess.md)
# chromium: the HTML scenario report's browser test renders the page headless (tests/scenario/html_check.py)
need=(cmake make gcc g++ clang pkg-config libcmocka-dev libcjson-dev libpcre2-dev libyaml-dev zlib1g-dev valgrind gcovr libclang-rt-14-dev clang-format python3 libfabric-dev libopenmpi-dev openmpi-bin chromium)
missing=()
for p in "${need[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# node and npm: the tokenizer's comparison with llama3-tokenizer-js and Hugging Face `tokenizers`
# (tests/unit/tok_llama3.sh, the throughput figures of docs/benchmarks.md); any node 18+ will do (one
# from NodeSource carries npm and conflicts with Debian's npm package)
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "twinrun: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The npm packages the tokenizer is compared with, into build/npm (git-ignored), pinned: the real
# Llama-3 vocabulary with an independent implementation, `tokenizers`' Rust core (its npm binding)
npm_dir="$(cd "$(dirname "$0")/.." && pwd)/build/npm"
# and tiktoken's (its npm WASM binding), for Megatron's TikTokenizer; uPlot, which the HTML scenario report
# inlines (docs/reports.md#html)
npm_pkgs=(llama3-tokenizer-js@1.2.0 tokenizers@0.23.2 tiktoken@1.0.22 uplot@1.6.32)
for p in "${npm_pkgs[@]}"; do
  if [ ! -d "$npm_dir/node_modules/${p%@*}" ]; then
    echo "twinrun: npm install ${npm_pkgs[*]} into $npm_dir"
    mkdir -p "$npm_dir"
    npm install --prefix "$npm_dir" --no-audit --no-fund --silent "${npm_pkgs[@]}"
    break
  fi
done
