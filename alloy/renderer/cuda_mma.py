"""The tensor-core main loop in CUDA C with inline PTX: what the CUDA renderer prints for an MMA instruction.

CUDA C for NVRTC rather than PTX: the loop is a fixed routine (codegen/tensor_core.py describes it) specialised by
template arguments, and NVRTC's optimizer unrolls it, allocates the fragment registers and schedules the ldmatrix
loads between the mma instructions, which a PTX printer would have to do itself for ptxas (which does not). The PTX
instructions it needs (cp.async, ldmatrix, mma.sync) are inline asm.

`MMA_PRELUDE` defines `alloy_mma::tile<...>(A, B, strides, sizes, m0, n0, acc)`: it adds the products of the
threadgroup's BM x BN tile at (m0, n0) into the thread's `acc` (float32, in tensor_core.accumulator_index's order).
"""
from __future__ import annotations
from alloy.codegen.matmul import MatmulSpec
from alloy.codegen.tensor_core import TensorCoreTile, aligned, unit_axes

MMA_PRELUDE = r"""namespace alloy_mma {
__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }
template <bool TRANS> __device__ __forceinline__ void ldsm4(unsigned (&r)[4], unsigned addr) {
  if (TRANS) asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                          : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                    : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
template <bool BF16> __device__ __forceinline__ void mma16816(float* d, const unsigned* a, const unsigned* b) {
  if (BF16) asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// Where chunk c (16 bytes) of row r of a slice with CH chunks per row is kept: the 3 low bits of its position are
// XORed with the row (CH >= 8) or the row pair (CH == 4), so the 8 rows one ldmatrix reads, and the 8 chunks a
// quarter-warp's copies write, fall in 8 different 16-byte bank groups
template <int CH> __device__ __forceinline__ int swz(int r, int c) {
  int linear = r * CH + c;
  int f = CH >= 8 ? (r & 7) : ((r * CH / 8) & 7);
  return (linear & ~7) | ((linear & 7) ^ f);
}
// Copy an OUTER x INNER slice (INNER contiguous in memory, rows `ld` apart) into shared memory, zeros past
// outer_left rows and inner_left columns. ALIGNED: rows start on 16 bytes and inner_left is whole chunks.
template <int OUTER, int INNER, int THREADS, bool ALIGNED>
__device__ __forceinline__ void load_slice(unsigned short* dst, const unsigned short* g, long long ld, int outer_left,
                                           int inner_left, int tid) {
  constexpr int CH = INNER / 8, TOTAL = OUTER * CH;
  #pragma unroll
  for (int i = 0; i < (TOTAL + THREADS - 1) / THREADS; i++) {
    int idx = tid + i * THREADS;
    if (TOTAL % THREADS != 0 && idx >= TOTAL) break;
    int r = idx / CH, c = idx % CH;
    unsigned short* d = dst + swz<CH>(r, c) * 8;
    const unsigned short* s = g + r * ld + c * 8;
    if (ALIGNED) {
      bool ok = r < outer_left && c * 8 < inner_left;
      cp_async16(smem(d), ok ? s : g, ok ? 16 : 0);
    } else {
      unsigned short v[8];
      #pragma unroll
      for (int e = 0; e < 8; e++) v[e] = (r < outer_left && c * 8 + e < inner_left) ? s[e] : (unsigned short)0;
      uint4 packed;
      packed.x = v[0] | ((unsigned)v[1] << 16); packed.y = v[2] | ((unsigned)v[3] << 16);
      packed.z = v[4] | ((unsigned)v[5] << 16); packed.w = v[6] | ((unsigned)v[7] << 16);
      *(uint4*)d = packed;
    }
  }
}
// acc += A[m0:m0+BM, :] @ B[:, n0:n0+BN] for this thread's part. A_K: A's contiguous axis is K (else M);
// B_N: B's contiguous axis is N (else K). sAm, sAk, sBk, sBn: element strides.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool BF16, bool A_K, bool B_N, bool A_AL, bool B_AL>
__device__ __forceinline__ void tile(const unsigned short* A, const unsigned short* B, long long sAm, long long sAk,
                                     long long sBk, long long sBn, int M, int N, int K, int m0, int n0, float* acc) {
  constexpr int WARPS_N = BN / WN, THREADS = 32 * (BM / WM) * WARPS_N, MI = WM / 16, NI = WN / 8;
  constexpr int A_OUT = A_K ? BM : BK, A_IN = A_K ? BK : BM, B_OUT = B_N ? BK : BN, B_IN = B_N ? BN : BK;
  __shared__ __align__(128) unsigned short sA[STAGES][BM * BK];
  __shared__ __align__(128) unsigned short sB[STAGES][BK * BN];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
  const int KT = (K + BK - 1) / BK;
  auto load = [&](int stage, int kt) {
    int k0 = kt * BK;
    if (A_K) load_slice<A_OUT, A_IN, THREADS, A_AL>(sA[stage], A + m0 * sAm + k0, sAm, M - m0, K - k0, tid);
    else load_slice<A_OUT, A_IN, THREADS, A_AL>(sA[stage], A + k0 * sAk + m0, sAk, K - k0, M - m0, tid);
    if (B_N) load_slice<B_OUT, B_IN, THREADS, B_AL>(sB[stage], B + k0 * sBk + n0, sBk, K - k0, N - n0, tid);
    else load_slice<B_OUT, B_IN, THREADS, B_AL>(sB[stage], B + n0 * sBn + k0, sBn, N - n0, K - k0, tid);
  };
  #pragma unroll
  for (int s = 0; s < STAGES - 1; s++) { if (s < KT) load(s, s); cp_commit(); }
  const int i8 = lane >> 3, r8 = lane & 7;
  for (int kt = 0; kt < KT; kt++) {
    cp_wait<STAGES - 2>();
    __syncthreads();   // this slice has landed for every thread; and every thread is done with the one refilled next
    if (kt + STAGES - 1 < KT) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_commit();
    const unsigned short* a_s = sA[kt % STAGES];
    const unsigned short* b_s = sB[kt % STAGES];
    #pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      unsigned af[MI][4], bf[NI][2];
      #pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        // matrix i8 of the x4: rows +8 for i8 odd, K +8 for i8 >= 2 (m16n8k16's a0..a3)
        int at = A_K ? swz<A_IN / 8>(wm + mi * 16 + r8 + 8 * (i8 & 1), kk * 2 + (i8 >> 1))
                     : swz<A_IN / 8>(kk * 16 + r8 + 8 * (i8 >> 1), (wm + mi * 16) / 8 + (i8 & 1));
        ldsm4<!A_K>(af[mi], smem(a_s + at * 8));
      }
      #pragma unroll
      for (int nj = 0; nj < NI; nj += 2) {
        // matrix i8: K +8 for i8 odd, the next n8 tile for i8 >= 2 (b0, b1 of tiles nj and nj + 1)
        int bt = B_N ? swz<B_IN / 8>(kk * 16 + r8 + 8 * (i8 & 1), (wn + nj * 8) / 8 + (i8 >> 1))
                     : swz<B_IN / 8>(wn + nj * 8 + r8 + 8 * (i8 >> 1), kk * 2 + (i8 & 1));
        unsigned r[4];
        ldsm4<B_N>(r, smem(b_s + bt * 8));
        bf[nj][0] = r[0]; bf[nj][1] = r[1]; bf[nj + 1][0] = r[2]; bf[nj + 1][1] = r[3];
      }
      #pragma unroll
      for (int mi = 0; mi < MI; mi++)
        #pragma unroll
        for (int ni = 0; ni < NI; ni++) mma16816<BF16>(acc + (mi * NI + ni) * 4, af[mi], bf[ni]);
    }
  }
  cp_wait<0>();
}
}  // namespace alloy_mma
"""

def mma_call(spec: MatmulSpec, tile: TensorCoreTile, a: str, b: str, a_off: str, b_off: str, m0: str, n0: str, acc: str) -> str:
  """The statement running the main loop into the float array `acc` (zeroed before it); a, b: the operands'
  buffers; a_off, b_off: their element offsets for this threadgroup's batch element; m0, n0: its tile's origin."""
  a_k, b_n = unit_axes(spec)
  a_al, b_al = aligned(spec)
  flag = lambda v: "true" if v else "false"
  targs = (f"{tile.bm}, {tile.bn}, {tile.bk}, {tile.wm}, {tile.wn}, {tile.stages}, {flag(spec.operand_dtype.name == 'bfloat16')}, "
           f"{flag(a_k)}, {flag(b_n)}, {flag(a_al)}, {flag(b_al)}")
  return (f"alloy_mma::tile<{targs}>((const unsigned short*)({a}+{a_off}), (const unsigned short*)({b}+{b_off}), "
          f"{spec.a.stride}ll, {spec.a.k_stride}ll, {spec.b.k_stride}ll, {spec.b.stride}ll, {spec.M}, {spec.N}, {spec.K}, "
          f"{m0}, {n0}, {acc});")
