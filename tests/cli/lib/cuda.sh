# Shared by the `--device cuda` CLI tests (source it after setting bin and test_name): skips (exit
# 0) when the build has no CUDA backend; sets mode to "device", or without a GPU to "emulated"
# with the kernel bodies run on the host (DEEPINFER_CUDA_EMULATE=1).
if ! "$bin" info | grep -q '"cuda_backend":true'; then
  echo "$test_name: this build has no CUDA backend; skipping"
  exit 0
fi
mode=device
if ! nvidia-smi -L >/dev/null 2>&1; then
  export DEEPINFER_CUDA_EMULATE=1
  mode=emulated
fi
