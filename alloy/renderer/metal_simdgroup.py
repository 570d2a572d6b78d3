"""The simdgroup-matrix main loop in MSL: what the Metal renderer prints for an MMA instruction of a SIMDGROUP_8X8
tile (codegen/tensor_core.py describes the tile and where each thread's accumulators lie).

A fixed routine with the tile's sizes and the operands' strides filled in, as CUDA's (renderer/cuda_mma.py), rather
than instructions the linear program spells out: the 8x8 matrices are opaque values owned by a whole SIMD group,
loaded, multiplied and stored by calls the MSL compiler schedules, which no lane-by-lane instruction of the program
can describe. It is printed into the kernel's body, not a helper function: MSL declares threadgroup memory only at
kernel scope, and the software Metal device (whose `threadgroup` is a storage class) takes no threadgroup pointers.

`simdgroup_lines` declares the threadgroup slices and the thread's float `acc` array, then fills acc with its elements
(tensor_core.accumulator_index: pairs of row neighbours) of the threadgroup's BM x BN tile of A @ B at (m0, n0).
"""
from __future__ import annotations
from alloy.codegen.matmul import MatmulSpec
from alloy.codegen.tensor_core import TensorCoreTile

# A[m, k] at A[m*sAm + k*sAk], B[k, n] at B[k*sBk + n*sBn] (any strides: transposed operands too); rows past M,
# columns past N and the reduction past K read zeros. {x}: the names and numbers simdgroup_lines fills in.
MAIN_LOOP = """{{
  const device {t}* A = {a}+{a_off};
  const device {t}* B = {b}+{b_off};
  const int m0 = {m0}, n0 = {n0}, lane = int(lid.x), warp = lane / 32;
  const int wm = (warp / {warps_n}) * {wm}, wn = (warp % {warps_n}) * {wn};
  simdgroup_float8x8 c[{mi}][{ni}];
  for (int i = 0; i < {mi}; i++)
    for (int j = 0; j < {ni}; j++) c[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (int k0 = 0; k0 < {K}; k0 += {bk}) {{
    // every thread copies a share of both slices, row-major, so each SIMD group then loads 8x8 blocks of them
    for (int e = lane; e < {bm} * {bk}; e += {threads}) {{
      int m = m0 + e / {bk}, k = k0 + e % {bk};
      {acc}_a[e] = (m < {M} && k < {K}) ? A[m * {sam}l + k * {sak}l] : {t}(0);
    }}
    for (int e = lane; e < {bk} * {bn}; e += {threads}) {{
      int k = k0 + e / {bn}, n = n0 + e % {bn};
      {acc}_b[e] = (k < {K} && n < {N}) ? B[k * {sbk}l + n * {sbn}l] : {t}(0);
    }}
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int kk = 0; kk < {bk}; kk += 8) {{
      simdgroup_matrix<{t}, 8, 8> a[{mi}], b[{ni}];
      for (int i = 0; i < {mi}; i++) simdgroup_load(a[i], {acc}_a + (wm + i * 8) * {bk} + kk, {bk});
      for (int j = 0; j < {ni}; j++) simdgroup_load(b[j], {acc}_b + kk * {bn} + wn + j * 8, {bn});
      for (int i = 0; i < {mi}; i++)
        for (int j = 0; j < {ni}; j++) simdgroup_multiply_accumulate(c[i][j], a[i], b[j], c[i][j]);
    }}
    threadgroup_barrier(mem_flags::mem_threadgroup);   // every SIMD group is done with the slices refilled next
  }}
  // a matrix's elements are spread over its SIMD group's lanes in a layout MSL leaves unspecified: through
  // threadgroup memory, each thread takes its own elements of the tile
  for (int i = 0; i < {mi}; i++)
    for (int j = 0; j < {ni}; j++) simdgroup_store(c[i][j], {acc}_c + (wm + i * 8) * {bn} + wn + j * 8, {bn});
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int e = 0; e < {n_acc}; e++) {acc}[e] = {acc}_c[2 * (lane + (e / 2) * {threads}) + e % 2];
}}"""

def simdgroup_lines(spec: MatmulSpec, tile: TensorCoreTile, operand_type: str, a: str, b: str, a_off: str, b_off: str,
                    m0: str, n0: str, acc: str) -> list[str]:
  """The kernel-scope threadgroup slices, the float array `acc` and the main loop that fills it; a, b: the operands'
  buffers; a_off, b_off: their element offsets for this threadgroup's batch element; m0, n0: its tile's origin."""
  t = operand_type
  loop = MAIN_LOOP.format(t=t, a=a, b=b, a_off=a_off, b_off=b_off, m0=m0, n0=n0, acc=acc, warps_n=tile.bn // tile.wn,
                          wm=tile.wm, wn=tile.wn, mi=tile.wm // 8, ni=tile.wn // 8, bm=tile.bm, bn=tile.bn, bk=tile.bk,
                          threads=tile.threads, M=spec.M, N=spec.N, K=spec.K, sam=spec.a.stride, sak=spec.a.k_stride,
                          sbk=spec.b.k_stride, sbn=spec.b.stride, n_acc=tile.accumulators)
  return [f"threadgroup {t} {acc}_a[{tile.bm * tile.bk}];", f"threadgroup {t} {acc}_b[{tile.bk * tile.bn}];",
          f"threadgroup float {acc}_c[{tile.bm * tile.bn}];", f"float {acc}[{tile.accumulators}];", *loop.split("\n")]
