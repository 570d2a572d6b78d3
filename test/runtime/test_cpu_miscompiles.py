"""Kernels the CPU device's C compiler once got wrong, kept as checks against NumPy on the device (and, on the CPU,
through the compiler's flags): GCC 12 with -march=native on a Zen 4 (AVX-512 taken for Zen 3 plus flags) SLP-vectorized
a float64 kernel of selects and adds with 512-bit vectors and stored one element of sixteen wrong
(runtime/cpu/compiler.py: AUTO_VECTORS_256)."""
import numpy as np, pytest
from alloy import Tensor
from alloy.triangular import tril, triu
from conftest import supported

@pytest.mark.parametrize("n", [4, 5, 8])
def test_triangles_of_one_tensor_added_transposed(device, n):
  for dtype in supported(device, ["float64", "float32"]):
    a = np.random.default_rng(n).standard_normal((n, n)).astype(dtype)
    b = Tensor(a, device=device).realize()
    np.testing.assert_array_equal((tril(b) + tril(b, -1).transpose(-1, -2)).numpy(), np.tril(a) + np.tril(a, -1).T, err_msg=dtype)
    np.testing.assert_array_equal((triu(b) + triu(b, 1).transpose(-1, -2)).numpy(), np.triu(a) + np.triu(a, 1).T, err_msg=dtype)

def test_avx512_kernels_auto_vectorize_at_256_bits():
  from alloy.runtime.cpu.compiler import AUTO_VECTORS_256, CPUCompiler, vector_isa
  if vector_isa() != "avx512f": pytest.skip("kernels are not built for AVX-512 here")
  assert all(f in CPUCompiler().flags for f in AUTO_VECTORS_256)
