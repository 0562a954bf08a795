#!/usr/bin/env bash
# Packs built binaries and the shared libraries they need beyond glibc into one .tar.xz for the
# GPU machine (which has no build tools for our dependencies), plus `source_dir`: the source tree
# the binaries were configured with (tests/backend_cuda/device_run.sh links it to the copy there).
#   tools/device/bundle.sh OUT.tar.xz SOURCE_DIR BINARY...
set -euo pipefail
out=$1 src=$2
shift 2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for bin in "$@"; do
  cp "$bin" "$stage/"
  strip --strip-all "$stage/$(basename "$bin")"
  # glibc, the loader and the CUDA driver come from the machine itself.
  ldd "$bin" | awk '/=> \// {print $3}' |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/"; done
done
echo "$src" > "$stage/source_dir"
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -9e -T2 > "$out"
ls -la "$out"
