#!/usr/bin/env bash
# One call on the GPU machine: the op suite on CUDA (PTX first, then CUDA C only), the seed example on CUDA, the GPU and jit benchmarks.
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 ALLOY_SKIP_NVRTC_CHECK=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEV=CUDA timeout 300 python3 -m pytest -q -x -p no:cacheprovider -p no:benchmark test/frontend test/schedule test/engine test/runtime/test_cuda.py test/runtime/test_ptx.py -n 8 2>&1 | tail -15 | tee $OUT/pytest.log
# the same suite with CUDA C only (the PTX renderer's fallback path)
ALLOY_PTX=0 DEV=CUDA timeout 300 python3 -m pytest -q -x -p no:cacheprovider -p no:benchmark test/frontend test/schedule test/engine -n 8 2>&1 | tail -2
DEV=CUDA DEBUG=4 python3 example.py 2>&1 | tail -30
timeout 200 python3 bench/gpu.py 2>&1 | tail -12 | tee $OUT/bench.log
DEV=CUDA timeout 120 python3 bench/jit.py 2>&1 | tail -7 | tee $OUT/jit.log
DEV=CUDA ALLOY_CUDA_NATIVE_LOOP=0 timeout 120 python3 bench/jit.py 2>&1 | tail -4
DEV=CUDA TRACE=$OUT/trace.json python3 example.py > /dev/null && python3 -m alloy.trace $OUT/trace.json | head -5
timeout 240 python3 bench/cuda_renderers.py 2>&1 | tail -16 | tee $OUT/renderers.log
