#!/usr/bin/env bash
# The main job: installs dependencies, builds, and serves the bundled default model on the CPU.
# Extra arguments go to `deepinfer serve` (e.g. --port 8000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
exec build/src/cli/deepinfer serve --device cpu "$@"
