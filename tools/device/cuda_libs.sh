# Sourced by the GPU-machine scripts: appends to LD_LIBRARY_PATH the folders of the machine's CUDA
# runtime, cuBLAS and CUPTI (its toolkit or torch's nvidia wheels); the bundles do not carry them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c "import nvidia, os; print(' '.join(os.path.join(p, s, 'lib') for p in nvidia.__path__ for s in os.listdir(p)))" 2> /dev/null); do
  if [ -e "$d/libcublasLt.so.13" ] || [ -e "$d/libcudart.so.13" ] || [ -e "$d/libcupti.so.13" ]; then
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  fi
done
export LD_LIBRARY_PATH
