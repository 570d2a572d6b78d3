"""The tensor-core main loop in CUDA C with inline PTX: what the CUDA renderer prints for an MMA instruction.

CUDA C for NVRTC rather than PTX: the loop is a fixed routine (codegen/tensor_core.py describes it) specialised by
template arguments, and NVRTC's optimizer unrolls it, allocates the fragment registers and schedules the ldmatrix
loads between the mma instructions, which a PTX printer would have to do itself for ptxas (which does not). The PTX
instructions it needs (cp.async, ldmatrix, mma.sync) are inline asm.

`MMA_PRELUDE` defines `alloy_mma::tile<...>(A, B, strides, sizes, m0, n0, acc)`: it adds the products of the
threadgroup's BM x BN tile at (m0, n0) into the thread's `acc` (float32, in tensor_core.accumulator_index's order).
`SIMT_PRELUDE`'s `alloy_simt::simt_tile<...>` does the same for a float32 tile on the CUDA cores (SIMT_F32).
"""
from __future__ import annotations
from alloy.codegen.matmul import MatmulSpec
from alloy.codegen.tensor_core import SIMT_F32, TensorCoreTile, aligned, unit_axes

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
// one tensor-core step: KIND 0 float16, 1 bfloat16 (m16n8k16), 2 tf32 (m16n8k8, float32 bits rounded to tf32 first)
template <int KIND> __device__ __forceinline__ void mma_step(float* d, const unsigned* a, const unsigned* b) {
  if (KIND == 2) {
    unsigned ta[4], tb[2];
    #pragma unroll
    for (int i = 0; i < 4; i++) asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(ta[i]) : "f"(__uint_as_float(a[i])));
    #pragma unroll
    for (int i = 0; i < 2; i++) asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(tb[i]) : "f"(__uint_as_float(b[i])));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(ta[0]), "r"(ta[1]), "r"(ta[2]), "r"(ta[3]), "r"(tb[0]), "r"(tb[1]));
  } else if (KIND == 1) asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
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
// Copy an OUTER x INNER slice of T (INNER contiguous in memory, rows `ld` apart) into shared memory, zeros past
// outer_left rows and inner_left columns. ALIGNED: rows start on 16 bytes and inner_left is whole chunks.
template <int OUTER, int INNER, int THREADS, bool ALIGNED, typename T>
__device__ __forceinline__ void load_slice(T* dst, const T* g, long long ld, int outer_left, int inner_left, int tid) {
  constexpr int EPC = 16 / sizeof(T), CH = INNER / EPC, TOTAL = OUTER * CH;
  #pragma unroll
  for (int i = 0; i < (TOTAL + THREADS - 1) / THREADS; i++) {
    int idx = tid + i * THREADS;
    if (TOTAL % THREADS != 0 && idx >= TOTAL) break;
    int r = idx / CH, c = idx % CH;
    T* d = dst + swz<CH>(r, c) * EPC;
    const T* s = g + r * ld + c * EPC;
    if (ALIGNED) {
      bool ok = r < outer_left && c * EPC < inner_left;
      cp_async16(smem(d), ok ? s : g, ok ? 16 : 0);
    } else {
      #pragma unroll
      for (int e = 0; e < EPC; e++) d[e] = (r < outer_left && c * EPC + e < inner_left) ? s[e] : (T)0;
    }
  }
}
// acc += A[m0:m0+BM, :] @ B[:, n0:n0+BN] for this thread's part. T: the operands' bits (unsigned short for 16-bit
// floats, unsigned for float32 as tf32); A_K: A's contiguous axis is K (else M); B_N: B's contiguous axis is N (else
// K). sAm, sAk, sBk, sBn: element strides. Fragments come from ldmatrix (.trans for 16-bit operands whose contiguous
// axis is not K); a 32-bit operand whose contiguous axis is not K is read element by element.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, int KIND, bool A_K, bool B_N, bool A_AL, bool B_AL, typename T>
__device__ __forceinline__ void tile(const T* A, const T* B, long long sAm, long long sAk, long long sBk, long long sBn,
                                     int M, int N, int K, int m0, int n0, float* acc) {
  constexpr int WARPS_N = BN / WN, THREADS = 32 * (BM / WM) * WARPS_N, MI = WM / 16, NI = WN / 8;
  constexpr int EPC = 16 / sizeof(T), KS = KIND == 2 ? 8 : 16;   // elements a 16-byte chunk holds; K of one step
  constexpr int A_OUT = A_K ? BM : BK, A_IN = A_K ? BK : BM, B_OUT = B_N ? BK : BN, B_IN = B_N ? BN : BK;
  // the pipeline's slices in dynamic shared memory (past the 48 KiB a static array may take): the module declares
  // their size as alloy_dynamic_shared_bytes, which the runtime passes at every launch
  extern __shared__ __align__(128) unsigned char alloy_mma_smem[];
  T (*sA)[BM * BK] = reinterpret_cast<T (*)[BM * BK]>(alloy_mma_smem);
  T (*sB)[BK * BN] = reinterpret_cast<T (*)[BK * BN]>(alloy_mma_smem + STAGES * BM * BK * sizeof(T));
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
  const int i8 = lane >> 3, r8 = lane & 7, g = lane >> 2, t = lane & 3;
  for (int kt = 0; kt < KT; kt++) {
    cp_wait<STAGES - 2>();
    __syncthreads();   // this slice has landed for every thread; and every thread is done with the one refilled next
    if (kt + STAGES - 1 < KT) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_commit();
    const T* a_s = sA[kt % STAGES];
    const T* b_s = sB[kt % STAGES];
    #pragma unroll
    for (int kk = 0; kk < BK / KS; kk++) {
      unsigned af[MI][4], bf[NI][2];
      #pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        if (A_K || KIND != 2) {
          // matrix i8 of the x4: rows +8 for i8 odd, K + KS/2 for i8 >= 2 (the a0..a3 of an m16n8k16 or m16n8k8)
          int at = A_K ? swz<A_IN / EPC>(wm + mi * 16 + r8 + 8 * (i8 & 1), kk * 2 + (i8 >> 1))
                       : swz<A_IN / EPC>(kk * 16 + r8 + 8 * (i8 >> 1), (wm + mi * 16) / EPC + (i8 & 1));
          ldsm4<!A_K>(af[mi], smem(a_s + at * EPC));
        } else {   // 32-bit, M contiguous: a_j at row g + 8 (j & 1), k t + 4 (j >> 1)
          #pragma unroll
          for (int j = 0; j < 4; j++) {
            int m = wm + mi * 16 + g + 8 * (j & 1);
            af[mi][j] = reinterpret_cast<const unsigned*>(a_s)[swz<A_IN / EPC>(kk * 8 + t + 4 * (j >> 1), m / EPC) * EPC + m % EPC];
          }
        }
      }
      #pragma unroll
      for (int nj = 0; nj < NI; nj += 2) {
        if (!B_N || KIND != 2) {
          // matrix i8: K + KS/2 for i8 odd, the next n8 tile for i8 >= 2 (b0, b1 of tiles nj and nj + 1)
          int bt = B_N ? swz<B_IN / EPC>(kk * 16 + r8 + 8 * (i8 & 1), (wn + nj * 8) / EPC + (i8 >> 1))
                       : swz<B_IN / EPC>(wn + nj * 8 + r8 + 8 * (i8 >> 1), kk * 2 + (i8 & 1));
          unsigned r[4];
          ldsm4<B_N>(r, smem(b_s + bt * EPC));
          bf[nj][0] = r[0]; bf[nj][1] = r[1]; bf[nj + 1][0] = r[2]; bf[nj + 1][1] = r[3];
        } else {   // 32-bit, N contiguous: b_j at k t + 4 j, column g
          #pragma unroll
          for (int q = 0; q < 2; q++)
            #pragma unroll
            for (int j = 0; j < 2; j++) {
              int n = wn + (nj + q) * 8 + g;
              bf[nj + q][j] = reinterpret_cast<const unsigned*>(b_s)[swz<B_IN / EPC>(kk * 8 + t + 4 * j, n / EPC) * EPC + n % EPC];
            }
        }
      }
      #pragma unroll
      for (int mi = 0; mi < MI; mi++)
        #pragma unroll
        for (int ni = 0; ni < NI; ni++) mma_step<KIND>(acc + (mi * NI + ni) * 4, af[mi], bf[ni]);
    }
  }
  cp_wait<0>();
}
}  // namespace alloy_mma
"""

# The float32 tile on the CUDA cores (tensor_core.SIMT_F32; codegen/tensor_core.py describes it). No cp.async: an
# operand whose contiguous axis is K is transposed on its way into shared memory, so every slice goes through registers,
# the next one's global loads issued before the current one's multiply-adds
SIMT_PRELUDE = r"""namespace alloy_simt {
// The 4 elements of a 16-byte word at g (o, i..i+3) of a slice (rows `ld` apart, inner axis contiguous), zeros
// past outer_left rows and inner_left columns; ALIGNED: one 16-byte load where the word is whole
template <bool ALIGNED>
__device__ __forceinline__ float4 word(const float* g, long long ld, int o, int i, int outer_left, int inner_left) {
  if (ALIGNED && o < outer_left && i + 3 < inner_left) return *reinterpret_cast<const float4*>(g + o * ld + i);
  float v[4];
  #pragma unroll
  for (int e = 0; e < 4; e++) v[e] = (o < outer_left && i + e < inner_left) ? g[o * ld + i + e] : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}
// One operand's BK x ROWS slice (ROWS: BM of A or BN of B), K-major in shared memory (s[k * ROWS + r]). K_INNER:
// the operand's contiguous axis is K (its words run along K, stored transposed); else along the rows.
template <int ROWS, int BK, int THREADS, bool K_INNER, bool ALIGNED> struct Slice {
  static constexpr int WORDS = ROWS * BK / 4, PER = (WORDS + THREADS - 1) / THREADS;
  float4 r[PER];
  // g: the slice's first element; ld: the stride of the non-contiguous axis; rows_left, k_left: what is in range
  __device__ __forceinline__ void fetch(const float* g, long long ld, int rows_left, int k_left, int tid) {
    #pragma unroll
    for (int p = 0; p < PER; p++) {
      int w = tid + p * THREADS;
      if (WORDS % THREADS != 0 && w >= WORDS) break;
      if (K_INNER) r[p] = word<ALIGNED>(g, ld, w % ROWS, (w / ROWS) * 4, rows_left, k_left);
      else r[p] = word<ALIGNED>(g, ld, w / (ROWS / 4), (w % (ROWS / 4)) * 4, k_left, rows_left);
    }
  }
  __device__ __forceinline__ void store(float* s, int tid) const {
    #pragma unroll
    for (int p = 0; p < PER; p++) {
      int w = tid + p * THREADS;
      if (WORDS % THREADS != 0 && w >= WORDS) break;
      if (K_INNER) {
        int row = w % ROWS, k = (w / ROWS) * 4;
        s[k * ROWS + row] = r[p].x; s[(k + 1) * ROWS + row] = r[p].y; s[(k + 2) * ROWS + row] = r[p].z; s[(k + 3) * ROWS + row] = r[p].w;
      } else *reinterpret_cast<float4*>(s + (w / (ROWS / 4)) * ROWS + (w % (ROWS / 4)) * 4) = r[p];
    }
  }
};
// acc[i * TN + j] += sum_k A[m0 + row(i), k] * B[k, n0 + col(j)], with row(i) = ty*4 + (i/4)*(BM*4/TM) + i%4 and
// col(j) = tx*4 + (j/4)*(BN*4/TN) + j%4 (tensor_core.accumulator_index). A_K: A's contiguous axis is K (else M);
// B_N: B's is N (else K). sAm, sAk, sBk, sBn: element strides.
template <int BM, int BN, int BK, int TM, int TN, bool A_K, bool B_N, bool A_AL, bool B_AL>
__device__ __forceinline__ void simt_tile(const float* A, const float* B, long long sAm, long long sAk, long long sBk, long long sBn,
                                          int M, int N, int K, int m0, int n0, float* acc) {
  constexpr int TX = BN / TN, THREADS = (BM / TM) * TX;
  extern __shared__ __align__(16) unsigned char alloy_simt_smem[];
  float* sA = reinterpret_cast<float*>(alloy_simt_smem);   // [2][BK][BM], then [2][BK][BN]
  float* sB = sA + 2 * BK * BM;
  const int tid = threadIdx.x, ty = tid / TX, tx = tid % TX;
  Slice<BM, BK, THREADS, A_K, A_AL> a;
  Slice<BN, BK, THREADS, !B_N, B_AL> b;
  auto fetch = [&](int k0) {
    if (A_K) a.fetch(A + m0 * sAm + k0, sAm, M - m0, K - k0, tid); else a.fetch(A + k0 * sAk + m0, sAk, M - m0, K - k0, tid);
    if (B_N) b.fetch(B + k0 * sBk + n0, sBk, N - n0, K - k0, tid); else b.fetch(B + n0 * sBn + k0, sBn, N - n0, K - k0, tid);
  };
  const int KT = (K + BK - 1) / BK;
  fetch(0);
  a.store(sA, tid); b.store(sB, tid);
  __syncthreads();
  for (int kt = 0; kt < KT; kt++) {
    const float* as = sA + (kt & 1) * BK * BM;
    const float* bs = sB + (kt & 1) * BK * BN;
    if (kt + 1 < KT) fetch((kt + 1) * BK);   // in flight during this slice's multiply-adds
    #pragma unroll
    for (int k = 0; k < BK; k++) {
      float av[TM], bv[TN];
      #pragma unroll
      for (int g = 0; g < TM / 4; g++) {
        float4 v = *reinterpret_cast<const float4*>(as + k * BM + g * (BM * 4 / TM) + ty * 4);
        av[4 * g] = v.x; av[4 * g + 1] = v.y; av[4 * g + 2] = v.z; av[4 * g + 3] = v.w;
      }
      #pragma unroll
      for (int g = 0; g < TN / 4; g++) {
        float4 v = *reinterpret_cast<const float4*>(bs + k * BN + g * (BN * 4 / TN) + tx * 4);
        bv[4 * g] = v.x; bv[4 * g + 1] = v.y; bv[4 * g + 2] = v.z; bv[4 * g + 3] = v.w;
      }
      #pragma unroll
      for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) acc[i * TN + j] = fmaf(av[i], bv[j], acc[i * TN + j]);
    }
    if (kt + 1 < KT) { a.store(sA + ((kt + 1) & 1) * BK * BM, tid); b.store(sB + ((kt + 1) & 1) * BK * BN, tid); }
    __syncthreads();   // the next slice is stored for every thread, and every thread is done with this one
  }
}
}  // namespace alloy_simt
"""

def prelude(tile: TensorCoreTile) -> str:
  """The main-loop routine an MMA instruction of this tile calls."""
  return SIMT_PRELUDE if tile.instruction == SIMT_F32 else MMA_PRELUDE

MMA_KINDS = {"float16": 0, "bfloat16": 1, "float32": 2}   # the template's KIND: float32 operands run as tf32

def mma_call(spec: MatmulSpec, tile: TensorCoreTile, a: str, b: str, a_off: str, b_off: str, m0: str, n0: str, acc: str) -> str:
  """The statement running the main loop into the float array `acc` (zeroed before it); a, b: the operands'
  buffers; a_off, b_off: their element offsets for this threadgroup's batch element; m0, n0: its tile's origin."""
  a_k, b_n = unit_axes(spec)
  a_al, b_al = aligned(spec)
  flag = lambda v: "true" if v else "false"
  strides = f"{spec.a.stride}ll, {spec.a.k_stride}ll, {spec.b.k_stride}ll, {spec.b.stride}ll, {spec.M}, {spec.N}, {spec.K}, {m0}, {n0}, {acc}"
  if tile.instruction == SIMT_F32:
    targs = f"{tile.bm}, {tile.bn}, {tile.bk}, {tile.wm}, {tile.wn}, {flag(a_k)}, {flag(b_n)}, {flag(a_al)}, {flag(b_al)}"
    return f"alloy_simt::simt_tile<{targs}>((const float*)({a}+{a_off}), (const float*)({b}+{b_off}), {strides});"
  kind = MMA_KINDS[spec.operand_dtype.name]
  bits = "unsigned" if spec.operand_dtype.itemsize == 4 else "unsigned short"
  targs = (f"{tile.bm}, {tile.bn}, {tile.bk}, {tile.wm}, {tile.wn}, {tile.stages}, {kind}, "
           f"{flag(a_k)}, {flag(b_n)}, {flag(a_al)}, {flag(b_al)}")
  return f"alloy_mma::tile<{targs}>((const {bits}*)({a}+{a_off}), (const {bits}*)({b}+{b_off}), {strides});"
