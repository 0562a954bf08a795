#!/usr/bin/env bash
# Packs built binaries and the shared libraries they need beyond glibc into one .tar.xz for the
# GPU machine (which has no build tools for our dependencies), plus `source_dir`: the source tree
# the binaries were configured with (tests/backend_cuda/device_run.sh links it to the copy there).
#   tools/device/bundle.sh OUT.tar.xz SOURCE_DIR BINARY|SCRIPT.sh...
set -euo pipefail
out=$1 src=$2
shift 2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for bin in "$@"; do
  cp "$bin" "$stage/"
  case $bin in *.sh) continue ;; esac  # a script for the run travels as it is
  strip --strip-all "$stage/$(basename "$bin")"
  # glibc, the loader, the CUDA driver and cuBLAS (the machine's toolkit has it; it is ~600 MB)
  # come from the machine itself.
  ldd "$bin" | awk '/=> \// {print $3}' |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/"; done
done
echo "$src" > "$stage/source_dir"
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -9e -T2 > "$out"
ls -la "$out"
