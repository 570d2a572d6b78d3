"""Software Metal device: MSL kernels compiled as C++ and run on the CPU, checked against NumPy."""
import os
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

try:
  from alloy.runtime.metal.software import binding as Metal
except ImportError:  # run from outside the repository root
  sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
  from alloy.runtime.metal.software import binding as Metal
from alloy.runtime.metal.software import compiler

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"

SOURCES = {
    # tinygrad-style elementwise: positional buffers, a constant int&, float4 loads/stores and a scalar tail
    "E_ew": HEADER + """
kernel void E_ew(device float* data0, device const float* data1, device const float* data2, constant int& n0,
                 uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
  int i = (gid.x * 64 + lid.x) * 4;
  if (i + 4 <= n0) {
    float4 a = *((device float4*)(data1 + i));
    float4 b = *((device float4*)(data2 + i));
    *((device float4*)(data0 + i)) = a * 2.0f + max(b, 0.0f) * tanh(a) - float4(1.0f, 2.0f, 3.0f, b.w) / 8.0f;
  } else {
    for (int j = i; j < n0; j++) {
      float a = data1[j], b = data2[j];
      float w = data2[i + 3 < n0 ? i + 3 : n0 - 1];
      float4 c = float4(1.0f, 2.0f, 3.0f, w);
      data0[j] = a * 2.0f + max(b, 0.0f) * tanh(a) - c[j - i] / 8.0f;
    }
  }
}""",
    # threadgroup-memory row sum: strided partial sums, tree reduction with barriers in a loop
    "r_rows": HEADER + """
kernel void r_rows(device float* out, device const float* x, constant int& n,
                   uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float part[64];
  float acc = 0.0f;
  for (int i = lid.x; i < n; i += 64) acc += x[gid.x * n + i];
  part[lid.x] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = 32; s > 0; s >>= 1) {
    if (lid.x < s) part[lid.x] += part[lid.x + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid.x == 0) out[gid.x] = part[0];
}""",
    # the renderer's reduction shape: simd_sum / simd_max, then combine two simdgroups through threadgroup memory
    "r_simd": HEADER + """
kernel void r_simd(device float* data0, device float* data1, device const float* x, constant int& n0,
                   uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float acc_tg[2];
  threadgroup float max_tg[2];
  int row = gid.x;
  float acc = 0.0f, mx = -INFINITY;
  for (int i = lid.x; i < n0; i += 64) { float v = x[row * n0 + i]; acc += v; mx = max(mx, v); }
  acc = simd_sum(acc);
  mx = simd_max(mx);
  if ((lid.x & 31) == 0) { acc_tg[lid.x >> 5] = acc; max_tg[lid.x >> 5] = mx; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid.x == 0) { data0[row] = acc_tg[0] + acc_tg[1]; data1[row] = max(max_tg[0], max_tg[1]); }
}""",
    "simd_misc": HEADER + """
kernel void simd_misc(device int* out, uint tid [[thread_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  int v = int(tid) * 3 + 1;
  out[tid * 6 + 0] = simd_shuffle_down(v, 1);
  out[tid * 6 + 1] = simd_shuffle_xor(v, 5);
  out[tid * 6 + 2] = simd_prefix_exclusive_sum(v);
  out[tid * 6 + 3] = simd_broadcast(v, 7);
  out[tid * 6 + 4] = simd_is_first() ? 1 : 0;
  out[tid * 6 + 5] = int(sg * 100 + lane);
}""",
    "hb": HEADER + """
kernel void hb(device half* oh, device bfloat* ob, device float* of, device const half* h1, device const half* h2,
               device const bfloat* b1, uint3 gid [[thread_position_in_grid]]) {
  int i = gid.x * 4;
  half4 a = *((device half4*)(h1 + i));
  half4 b = *((device half4*)(h2 + i));
  *((device half4*)(oh + i)) = a * b + 0.5h;
  for (int k = 0; k < 4; k++) {
    bfloat x = b1[i + k];
    ob[i + k] = x * 2.0f + bfloat(1.0f);
    of[i + k] = float(x) + (float)h1[i + k] + float(as_type<ushort>(a[k]) & 1);
  }
}""",
    "ints": HEADER + """
kernel void ints(device int* oi, device uint* ou, device char* oc, device ushort* os, device long* ol,
                 device const int* a, device const int* b, device const uint* u, uint3 gid [[thread_position_in_grid]]) {
  int i = gid.x;
  int x = a[i], y = b[i];
  oi[i * 4 + 0] = x / y + x % y;
  oi[i * 4 + 1] = (x >> 3) ^ (y & 0xff) | (x << 2);
  oi[i * 4 + 2] = max(x, y) - min(x, y) + abs(x);
  oi[i * 4 + 3] = x > 0 ? clamp(x, -5, 100000) : select(y, -y, y < 0);
  ou[i * 4 + 0] = clz(u[i]);
  ou[i * 4 + 1] = popcount(u[i]);
  ou[i * 4 + 2] = mulhi(u[i], 2654435761u);
  ou[i * 4 + 3] = u[i] * 2654435761u + (uint)x;
  oc[i] = (char)(x);
  os[i] = (ushort)(u[i] >> 7);
  ol[i] = (long)x * (long)y;
}""",
    "scal": HEADER + """
kernel void scal(device float* out, device const float* x, constant float& alpha, constant uint& n,
                 constant int& shift, uint gid [[thread_position_in_grid]]) {
  if (gid < n) out[gid] = x[gid] * alpha + float(shift);
}""",
    # missing barrier between the threadgroup write and the read of a neighbour's slot
    "nobar": HEADER + """
kernel void nobar(device float* out, device const float* x,
                  uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float t[64];
  t[lid.x] = x[gid.x * 64 + lid.x];
  out[gid.x * 64 + lid.x] = t[(lid.x + 1) % 64];
}""",
    "withbar": HEADER + """
kernel void withbar(device float* out, device const float* x,
                    uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float t[64];
  t[lid.x] = x[gid.x * 64 + lid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid.x * 64 + lid.x] = t[(lid.x + 1) % 64];
}""",
    "divbar": HEADER + """
kernel void divbar(device float* out, uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float t[64];
  if (lid.x >= 48) return;
  t[lid.x] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid.x] = t[(lid.x + 1) % 48];
}""",
    "idiv": HEADER + """
kernel void idiv(device int* out, device const int* a, device const int* b, uint gid [[thread_position_in_grid]]) {
  out[gid] = a[gid] / b[gid];
}""",
    "bigtg": HEADER + """
kernel void bigtg(device float* out, uint3 lid [[thread_position_in_threadgroup]]) {
  threadgroup float big[9000];
  big[lid.x * 100] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid.x] = big[lid.x * 100 + 1];
}""",
    "chain": HEADER + """
kernel void add1(device float* a, device const float* b, uint gid [[thread_position_in_grid]]) { a[gid] = b[gid] + 1.0f; }
kernel void mul2(device float* c, device const float* a, uint gid [[thread_position_in_grid]]) { c[gid] = a[gid] * 2.0f; }
kernel void sub3(device float* d, device const float* c, device const float* a, uint gid [[thread_position_in_grid]]) {
  d[gid] = c[gid] - 3.0f * a[gid];
}""",
    "nonuni": HEADER + """
kernel void nonuni(device uint* out, uint3 tpig [[thread_position_in_grid]], uint3 tptg [[threads_per_threadgroup]],
                   uint3 dtptg [[dispatch_threads_per_threadgroup]], uint3 tpg [[threads_per_grid]]) {
  uint i = tpig.y * tpg.x + tpig.x;
  out[i * 3 + 0] = tptg.x * tptg.y;
  out[i * 3 + 1] = dtptg.x * dtptg.y;
  out[i * 3 + 2] = tpg.x * tpg.y;
}""",
    "atom": HEADER + """
kernel void atom(device atomic_uint* hist, device atomic_float* total, device const uint* x, device const float* w,
                 uint gid [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(&hist[x[gid] % 8], 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(total, w[gid], memory_order_relaxed);
}""",
    # simdgroup matrices: each simdgroup computes one 8x8 tile of C = A @ B (float and half inputs)
    "mm": HEADER + """
template <class T>
static inline void tile(device float* C, device const T* A, device const T* B, uint K, uint N, uint row0, uint col0) {
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (uint k = 0; k < K; k += 8) {
    simdgroup_matrix<T, 8, 8> a, b;
    simdgroup_load(a, A, K, ulong2(k, row0));
    simdgroup_load(b, B, N, ulong2(col0, k));
    simdgroup_multiply_accumulate(acc, a, b, acc);
  }
  simdgroup_store(acc, C, N, ulong2(col0, row0));
}
kernel void mm_f32(device float* C, device const float* A, device const float* B, constant uint& K, constant uint& N,
                   uint3 gid [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]]) {
  tile(C, A, B, K, N, gid.y * 8, (gid.x * 2 + sg) * 8);
}
kernel void mm_f16(device float* C, device const half* A, device const half* B, constant uint& K, constant uint& N,
                   uint3 gid [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]]) {
  tile(C, A, B, K, N, gid.y * 8, (gid.x * 2 + sg) * 8);
}
// the transpose flag of load and store, the diagonal constructor, multiply, and d = a*b + c with d distinct from c
kernel void sg_semantics(device float* out, device const float* src, uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m, two(2.0f), p, q;
  simdgroup_load(m, src, 16, ulong2(8, 0), true);   // the block at row 0, column 8 of a 16 x 16 source, transposed
  simdgroup_store(m, out, 16, ulong2(0, 0));        // out[0:8, 0:8]
  simdgroup_store(m, out, 16, ulong2(8, 8), true);  // out[8:16, 8:16]: transposed back
  simdgroup_multiply(p, m, two);
  simdgroup_store(p, out + 256, 16, ulong2(8, 0));  // out2[0:8, 8:16] = 2 m
  simdgroup_load(q, src + 128, 16);                 // src[8:16, 0:8]
  simdgroup_multiply_accumulate(p, m, q, two);      // m @ q + 2 I into p
  simdgroup_store(p, out + 256 + 128, 16);          // out2[8:16, 0:8]
}""",
}


@pytest.fixture(scope="module")
def dev():
  return Metal.MTLCreateSystemDefaultDevice()


@pytest.fixture(scope="module")
def queue(dev):
  return dev.newCommandQueue()


@pytest.fixture(scope="module")
def psos(dev):
  """All test libraries, compiled in parallel (the disk cache makes reruns fast)."""
  with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
    datas = dict(zip(SOURCES, ex.map(compiler.compile_library, SOURCES.values())))
  out = {}
  for data in datas.values():
    lib, err = dev.newLibraryWithData_error_(data, None)
    assert err is None, err
    for name in lib.functionNames():
      pso, err = dev.newComputePipelineStateWithFunction_error_(lib.newFunctionWithName_(name), None)
      out[name] = pso if err is None else err
  return out


def new_buffer(dev, arr):
  arr = np.ascontiguousarray(arr)
  b = dev.newBufferWithLength_options_(arr.nbytes, Metal.MTLResourceStorageModeShared)
  view(b, arr.dtype)[:] = arr.ravel()
  return b


def view(b, dtype):
  return np.frombuffer(b.contents().as_buffer(b.length()), dtype)


def encode(queue, pso, args, groups, tg, threads=False):
  cb = queue.commandBuffer()
  enc = cb.computeCommandEncoder()
  enc.setComputePipelineState_(pso)
  for i, a in enumerate(args):
    if isinstance(a, bytes): enc.setBytes_length_atIndex_(a, len(a), i)
    else: enc.setBuffer_offset_atIndex_(a, 0, i)
  size = enc.dispatchThreads_threadsPerThreadgroup_ if threads else enc.dispatchThreadgroups_threadsPerThreadgroup_
  size(Metal.MTLSizeMake(*groups), Metal.MTLSizeMake(*tg))
  enc.endEncoding()
  return cb


def run(queue, pso, args, groups, tg, threads=False, check=True):
  cb = encode(queue, pso, args, groups, tg, threads)
  cb.commit()
  cb.waitUntilCompleted()
  if check:
    assert cb.error() is None, cb.error()
    assert cb.status() == Metal.MTLCommandBufferStatusCompleted
  return cb


def rand(rng, *shape):
  x = rng.uniform(-2, 2, size=shape).astype(np.float32)
  x[x == 0] = 0.5
  return x


def test_elementwise_float4_with_tail(dev, queue, psos):
  rng = np.random.default_rng(0)
  n = 1003
  a, b = rand(rng, n), rand(rng, n)
  out = new_buffer(dev, np.zeros(n, np.float32))
  cb = run(queue, psos["E_ew"], [out, new_buffer(dev, a), new_buffer(dev, b), np.int32(n).tobytes()],
           (-(-n // 256), 1, 1), (64, 1, 1))
  c = np.tile(np.array([1, 2, 3, 0], np.float32), n // 4 + 1)[:n]
  c[3::4] = b[3::4]
  c[1000:] = [1, 2, 3]
  ref = a * 2 + np.maximum(b, 0) * np.tanh(a) - c / 8
  np.testing.assert_allclose(view(out, np.float32), ref, rtol=2e-6, atol=1e-6)
  assert cb.GPUEndTime() >= cb.GPUStartTime() > 0


@pytest.mark.parametrize("order", ["forward", "reverse", "shuffled"])
def test_threadgroup_row_sum(dev, queue, psos, order):
  rng = np.random.default_rng(1)
  rows, n = 50, 300
  x = rand(rng, rows, n)
  out = new_buffer(dev, np.zeros(rows, np.float32))
  with Metal.options(order=order, poison=True, strict=True):
    run(queue, psos["r_rows"], [out, new_buffer(dev, x), np.int32(n).tobytes()], (rows, 1, 1), (64, 1, 1))
  np.testing.assert_allclose(view(out, np.float32), x.sum(1), rtol=1e-5, atol=1e-5)
  assert psos["r_rows"].staticThreadgroupMemoryLength() == 256


def test_simd_sum_and_max(dev, queue, psos):
  rng = np.random.default_rng(2)
  rows, n = 40, 1000
  x = rand(rng, rows, n)
  s, m = new_buffer(dev, np.zeros(rows, np.float32)), new_buffer(dev, np.zeros(rows, np.float32))
  with Metal.options(order="shuffled", strict=True):
    run(queue, psos["r_simd"], [s, m, new_buffer(dev, x), np.int32(n).tobytes()], (rows, 1, 1), (64, 1, 1))
  np.testing.assert_allclose(view(s, np.float32), x.sum(1), rtol=1e-5, atol=2e-5)
  np.testing.assert_array_equal(view(m, np.float32), x.max(1))


def test_simd_shuffles(dev, queue, psos):
  n = 48  # a full simdgroup and a partial one
  out = new_buffer(dev, np.zeros(n * 6, np.int32))
  run(queue, psos["simd_misc"], [out], (1, 1, 1), (n, 1, 1))
  o = view(out, np.int32).reshape(n, 6)
  v = np.arange(n) * 3 + 1
  for t in range(n):
    base, size, lane = t // 32 * 32, min(32, n - t // 32 * 32), t % 32
    assert o[t, 0] == (v[t + 1] if lane + 1 < size else v[t])
    assert o[t, 1] == (v[base + (lane ^ 5)] if (lane ^ 5) < size else v[t])
    assert o[t, 2] == v[base:t].sum()
    assert o[t, 3] == v[base + 7]
    assert o[t, 4] == (lane == 0)
    assert o[t, 5] == (t // 32) * 100 + lane


def bf16_round(x):
  u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16).view(np.float32)


def test_half_and_bfloat(dev, queue, psos):
  rng = np.random.default_rng(3)
  n = 256
  h1, h2 = rand(rng, n).astype(np.float16), rand(rng, n).astype(np.float16)
  b1 = bf16_round(rand(rng, n))
  b1_bits = (b1.view(np.uint32) >> 16).astype(np.uint16)
  oh, ob, of = (new_buffer(dev, np.zeros(n, t)) for t in (np.float16, np.uint16, np.float32))
  run(queue, psos["hb"], [oh, ob, of, new_buffer(dev, h1), new_buffer(dev, h2), new_buffer(dev, b1_bits)],
      (n // 4, 1, 1), (1, 1, 1))
  ref_h = (h1 * h2) + np.float16(0.5)  # NumPy float16 rounds after every operation, like g++'s _Float16
  got_h = view(oh, np.float16)
  ulp = np.abs(got_h.view(np.int16).astype(np.int32) - ref_h.view(np.int16).astype(np.int32))
  assert ulp.max() <= 1
  ref_b = bf16_round(bf16_round(b1 * 2) + 1)
  got_b = (view(ob, np.uint16).astype(np.uint32) << 16).view(np.float32)
  np.testing.assert_array_equal(got_b, ref_b)
  ref_f = b1 + h1.astype(np.float32) + (h1.view(np.uint16) & 1)
  np.testing.assert_allclose(view(of, np.float32), ref_f, rtol=1e-6)


def test_integer_kernel(dev, queue, psos):
  rng = np.random.default_rng(4)
  n = 200
  a = rng.integers(-100000, 100000, n).astype(np.int32)
  b = rng.integers(-300, 300, n).astype(np.int32)
  b[b == 0] = 7
  u = rng.integers(1, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)
  oi, ou = new_buffer(dev, np.zeros(n * 4, np.int32)), new_buffer(dev, np.zeros(n * 4, np.uint32))
  oc, os_, ol = new_buffer(dev, np.zeros(n, np.int8)), new_buffer(dev, np.zeros(n, np.uint16)), \
      new_buffer(dev, np.zeros(n, np.int64))
  run(queue, psos["ints"], [oi, ou, oc, os_, ol, new_buffer(dev, a), new_buffer(dev, b), new_buffer(dev, u)],
      (n, 1, 1), (1, 1, 1))
  q = np.trunc(a / b).astype(np.int32)  # C division truncates toward zero
  r = (a - q * b).astype(np.int32)
  gi = view(oi, np.int32).reshape(n, 4)
  np.testing.assert_array_equal(gi[:, 0], q + r)
  np.testing.assert_array_equal(gi[:, 1], ((a >> 3) ^ (b & 0xff)) | (a << 2))
  np.testing.assert_array_equal(gi[:, 2], np.maximum(a, b) - np.minimum(a, b) + np.abs(a))
  np.testing.assert_array_equal(gi[:, 3], np.where(a > 0, np.clip(a, -5, 100000), np.where(b < 0, -b, b)))
  gu = view(ou, np.uint32).reshape(n, 4)
  clz = np.array([32 - int(x).bit_length() for x in u], np.uint32)
  np.testing.assert_array_equal(gu[:, 0], clz)
  np.testing.assert_array_equal(gu[:, 1], [bin(int(x)).count("1") for x in u])
  np.testing.assert_array_equal(gu[:, 2], (u.astype(np.uint64) * 2654435761) >> 32)
  np.testing.assert_array_equal(gu[:, 3], (u.astype(np.uint64) * 2654435761 + a.astype(np.uint32)).astype(np.uint32))
  np.testing.assert_array_equal(view(oc, np.int8), a.astype(np.int8))
  np.testing.assert_array_equal(view(os_, np.uint16), (u >> 7).astype(np.uint16))
  np.testing.assert_array_equal(view(ol, np.int64), a.astype(np.int64) * b.astype(np.int64))


def test_scalar_args_via_set_bytes(dev, queue, psos):
  import ctypes
  x = rand(np.random.default_rng(5), 100)
  out = new_buffer(dev, np.zeros(100, np.float32))
  cb = queue.commandBuffer()
  enc = cb.computeCommandEncoder()
  enc.setComputePipelineState_(psos["scal"])
  enc.setBuffer_offset_atIndex_(out, 0, 0)
  enc.setBuffer_offset_atIndex_(new_buffer(dev, x), 0, 1)
  enc.setBytes_length_atIndex_(np.float32(1.5).tobytes(), 4, 2)
  enc.setBytes_length_atIndex_(ctypes.c_uint32(90), 4, 3)  # ctypes objects work, as with PyObjC
  enc.setBytes_length_atIndex_(np.int32(-3), 4, 4)
  enc.dispatchThreads_threadsPerThreadgroup_(Metal.MTLSizeMake(100, 1, 1), Metal.MTLSizeMake(32, 1, 1))
  enc.endEncoding()
  cb.commit()
  cb.waitUntilCompleted()
  assert cb.error() is None
  got = view(out, np.float32)
  np.testing.assert_allclose(got[:90], x[:90] * 1.5 - 3, rtol=1e-6)
  assert (got[90:] == 0).all()


def test_missing_barrier_caught_by_order_and_poison(dev, queue, psos):
  x = rand(np.random.default_rng(6), 4 * 64)
  ref = x.reshape(4, 64)[:, (np.arange(64) + 1) % 64].ravel()
  out = new_buffer(dev, np.zeros(4 * 64, np.float32))
  with Metal.options(order="shuffled", poison=True):
    run(queue, psos["withbar"], [out, new_buffer(dev, x)], (4, 1, 1), (64, 1, 1))
    np.testing.assert_array_equal(view(out, np.float32), ref)
    run(queue, psos["nobar"], [out, new_buffer(dev, x)], (4, 1, 1), (64, 1, 1))
  got = view(out, np.float32)
  wrong = ~(got == ref)
  assert wrong.sum() >= 32 and np.isnan(got).sum() >= 32  # unwritten threadgroup memory reads as NaN


def test_strict_mode_divergent_barrier(dev, queue, psos):
  out = new_buffer(dev, np.zeros(64, np.float32))
  run(queue, psos["divbar"], [out], (1, 1, 1), (64, 1, 1))  # tolerated outside strict mode
  assert (view(out, np.float32)[:48] == 1).all()
  with Metal.options(strict=True):
    cb = run(queue, psos["divbar"], [out], (1, 1, 1), (64, 1, 1), check=False)
  assert cb.status() == Metal.MTLCommandBufferStatusError
  assert isinstance(cb.error(), Metal.MetalExecutionError)
  assert "divbar" in str(cb.error()) and "divergent barrier" in str(cb.error())


def test_division_by_zero_crash_is_isolated(dev, queue, psos):
  a = np.arange(1, 65, dtype=np.int32)
  b = np.ones(64, np.int32)
  b[17] = 0
  out = new_buffer(dev, np.zeros(64, np.int32))
  run(queue, psos["add1"], [new_buffer(dev, np.zeros(4, np.float32)), new_buffer(dev, np.ones(4, np.float32))],
      (4, 1, 1), (1, 1, 1))
  pid = Metal.worker_pid()
  cb = run(queue, psos["idiv"], [out, new_buffer(dev, a), new_buffer(dev, b)], (2, 1, 1), (32, 1, 1), check=False)
  assert cb.status() == Metal.MTLCommandBufferStatusError
  err = cb.error()
  assert isinstance(err, Metal.MetalKernelCrash)
  assert "kernel 'idiv'" in str(err) and "SIGFPE" in str(err)
  with pytest.raises(Metal.MetalKernelCrash, match="idiv"):
    raise err
  # later work runs on a fresh worker
  b[17] = 1
  run(queue, psos["idiv"], [out, new_buffer(dev, a), new_buffer(dev, b)], (2, 1, 1), (32, 1, 1))
  np.testing.assert_array_equal(view(out, np.int32), a)
  assert Metal.worker_pid() != pid


def test_limits(dev, queue, psos):
  pso = psos["scal"]
  cb = queue.commandBuffer()
  enc = cb.computeCommandEncoder()
  enc.setComputePipelineState_(pso)
  with pytest.raises(Metal.MetalLimitError, match="setBytes"):
    enc.setBytes_length_atIndex_(bytes(4096), 4096, 0)
  with pytest.raises(Metal.MetalLimitError, match="at most 31"):
    enc.setBuffer_offset_atIndex_(new_buffer(dev, np.zeros(4, np.float32)), 0, 31)
  for i in range(5): enc.setBytes_length_atIndex_(bytes(4), 4, i)
  with pytest.raises(Metal.MetalLimitError, match="1025 threads"):
    enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(1, 1, 1), Metal.MTLSizeMake(1025, 1, 1))
  enc2 = queue.commandBuffer().computeCommandEncoder()
  enc2.setComputePipelineState_(pso)
  enc2.setBytes_length_atIndex_(bytes(4), 4, 0)
  with pytest.raises(Metal.MetalValidationError, match="index 1 is not bound"):
    enc2.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(1, 1, 1), Metal.MTLSizeMake(1, 1, 1))
  err = psos["bigtg"]
  assert isinstance(err, Metal.MetalLimitError) and "32768" in str(err) and "36000" in str(err)
  assert pso.maxTotalThreadsPerThreadgroup() == 1024 and pso.threadExecutionWidth() == 32


def test_indirect_command_buffer_replays_dependent_dispatches(dev, queue, psos):
  n = 100
  b = rand(np.random.default_rng(7), n)
  bb, a, c, d = (new_buffer(dev, z) for z in (b, np.zeros(n, np.float32), np.zeros(n, np.float32),
                                               np.zeros(n, np.float32)))
  desc = Metal.MTLIndirectCommandBufferDescriptor.new()
  desc.setCommandTypes_(Metal.MTLIndirectCommandTypeConcurrentDispatch)
  desc.setInheritBuffers_(False)
  desc.setInheritPipelineState_(False)
  desc.setMaxKernelBufferBindCount_(31)
  icb = dev.newIndirectCommandBufferWithDescriptor_maxCommandCount_options_(desc, 3, Metal.MTLResourceOptions(0))
  for i, (name, bufs) in enumerate([("add1", [a, bb]), ("mul2", [c, a]), ("sub3", [d, c, a])]):
    cmd = icb.indirectComputeCommandAtIndex_(i)
    cmd.setComputePipelineState_(psos[name])
    for j, buf in enumerate(bufs): cmd.setKernelBuffer_offset_atIndex_(buf, 0, j)
    cmd.concurrentDispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(n, 1, 1), Metal.MTLSizeMake(1, 1, 1))
    cmd.setBarrier()
  for scale in (1.0, -3.0):
    view(bb, np.float32)[:] = b * scale
    cb = queue.commandBuffer()
    enc = cb.computeCommandEncoder()
    enc.useResources_count_usage_([bb, a, c, d], 4, Metal.MTLResourceUsageRead | Metal.MTLResourceUsageWrite)
    enc.executeCommandsInBuffer_withRange_(icb, Metal.NSMakeRange(0, 3))
    enc.endEncoding()
    cb.commit()
    cb.waitUntilCompleted()
    assert cb.error() is None
    x = b * scale + 1
    np.testing.assert_allclose(view(d, np.float32), x * 2 - 3 * x, rtol=1e-6, atol=1e-6)


def test_compile_error(dev):
  src = HEADER + "kernel void broken(device float* a, uint i [[thread_position_in_grid]]) {\n  a[i] = b;\n}\n"
  lib, err = dev.newLibraryWithSource_options_error_(src, Metal.MTLCompileOptions.new(), None)
  assert lib is None and isinstance(err, Metal.MetalCompileError) and isinstance(err, RuntimeError)
  assert "kernel.metal:4" in str(err) and "'b' was not declared" in str(err)
  assert err.source == src and "error" in err.log
  with pytest.raises(Metal.MetalCompileError):
    compiler.compile_library(src)


def test_disk_cache_and_library_data(dev, queue, monkeypatch):
  src = SOURCES["scal"] + f"\n// {uuid.uuid4()}\n"
  before = dict(compiler.compile_stats)
  data = compiler.compile_library(src)
  assert compiler.compile_stats["compiles"] == before["compiles"] + 1
  assert data[:4] == compiler.LIB_MAGIC
  calls = []
  monkeypatch.setattr(compiler.subprocess, "run", lambda *a, **k: calls.append(a))
  assert compiler.compile_library(src) == data  # served from disk: the compiler does not run
  assert calls == [] and compiler.compile_stats["cache_hits"] == before["cache_hits"] + 1
  lib, err = dev.newLibraryWithData_error_(data, None)
  assert err is None and lib.functionNames() == ["scal"] and lib.newFunctionWithName_("nope") is None
  lib, err = dev.newLibraryWithData_error_(b"MTLB" + data[4:], None)
  assert lib is None and "magic" in str(err)


def test_dispatch_threads_nonuniform(dev, queue, psos):
  out = new_buffer(dev, np.zeros(10 * 6 * 3, np.uint32))
  run(queue, psos["nonuni"], [out], (10, 6, 1), (4, 4, 1), threads=True)
  o = view(out, np.uint32).reshape(6, 10, 3)
  ax = np.where(np.arange(10) >= 8, 2, 4)
  ay = np.where(np.arange(6) >= 4, 2, 4)
  np.testing.assert_array_equal(o[:, :, 0], ay[:, None] * ax[None, :])
  assert (o[:, :, 1] == 16).all() and (o[:, :, 2] == 60).all()


def test_atomics_and_async_order(dev, queue, psos):
  rng = np.random.default_rng(8)
  n = 4096
  x = rng.integers(0, 1000, n).astype(np.uint32)
  w = rng.integers(1, 5, n).astype(np.float32)
  hist, total = new_buffer(dev, np.zeros(8, np.uint32)), new_buffer(dev, np.zeros(1, np.float32))
  cbs = [encode(queue, psos["atom"], [hist, total, new_buffer(dev, x), new_buffer(dev, w)], (n // 64, 1, 1),
                (64, 1, 1)) for _ in range(3)]
  for cb in cbs: cb.commit()  # asynchronous; executed in commit order
  cbs[-1].waitUntilCompleted()
  assert all(cb.status() == Metal.MTLCommandBufferStatusCompleted for cb in cbs)
  np.testing.assert_array_equal(view(hist, np.uint32), 3 * np.bincount(x % 8, minlength=8))
  assert view(total, np.float32)[0] == 3 * w.sum()


def test_device_surface(dev):
  assert dev.name() == "Apple7 (software)"
  assert dev.supportsFamily_(Metal.MTLGPUFamilyApple7) and not dev.supportsFamily_(Metal.MTLGPUFamilyApple8)
  assert tuple(dev.maxThreadsPerThreadgroup()) == (1024, 1024, 1024)
  assert (Metal.MTLCommandBufferStatusCompleted, Metal.MTLCommandBufferStatusError) == (4, 5)
  buf = dev.newBufferWithLength_options_(64, Metal.MTLResourceStorageModeShared)
  mv = buf.contents().as_buffer(64)
  mv[:4] = b"abcd"
  assert buf.length() == 64 and bytes(buf.contents().as_buffer(4)) == b"abcd" and buf.gpuAddress() != 0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_simdgroup_matrix_matmul(dev, queue, psos, dtype):
  rng = np.random.default_rng(9)
  M, N, K = 16, 32, 24
  a, b = rand(rng, M, K).astype(dtype), rand(rng, K, N).astype(dtype)
  c = new_buffer(dev, np.zeros((M, N), np.float32))
  name = "mm_f32" if dtype == np.float32 else "mm_f16"
  with Metal.options(order="shuffled", strict=True):
    run(queue, psos[name], [c, new_buffer(dev, a), new_buffer(dev, b), np.uint32(K).tobytes(),
                            np.uint32(N).tobytes()], (N // 16, M // 8, 1), (64, 1, 1))
  ref = a.astype(np.float32) @ b.astype(np.float32)
  np.testing.assert_allclose(view(c, np.float32).reshape(M, N), ref, rtol=1e-5, atol=1e-5)


def test_simdgroup_matrix_semantics(dev, queue, psos):
  # MSL's simdgroup_load/store(matrix, memory, elements_per_row, origin (x: column, y: row), transpose): the 8 x 8 block
  # at the origin, the transposed one where asked; simdgroup_matrix(v): v on the diagonal; d = a @ b + c
  rng = np.random.default_rng(4)
  src = rand(rng, 16, 16)
  out = new_buffer(dev, np.zeros(512, np.float32))
  with Metal.options(order="shuffled", strict=True):
    run(queue, psos["sg_semantics"], [out, new_buffer(dev, src)], (1, 1, 1), (32, 1, 1))
  got = view(out, np.float32).reshape(2, 16, 16)
  m = src[0:8, 8:16].T
  np.testing.assert_array_equal(got[0, 0:8, 0:8], m)
  np.testing.assert_array_equal(got[0, 8:16, 8:16], m.T)
  np.testing.assert_array_equal(got[1, 0:8, 8:16], 2 * m)
  np.testing.assert_allclose(got[1, 8:16, 0:8], m.astype(np.float64) @ src[8:16, 0:8] + 2 * np.eye(8), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("source", ["runtime.cpp", "shim/mtl_shim.h"])
def test_cxx_sources_compile_without_warnings(tmp_path, source):
  """The C++ runtime (built with -Wall -Wextra) and the shim every kernel includes stay free of warnings."""
  import subprocess
  if source.endswith(".h"):  # the shim as a kernel sees it: through the include path, with the kernel flags
    (tmp_path / "t.cpp").write_text("#include <mtl_shim.h>\n")
    flags = [f for f in compiler.KERNEL_FLAGS if f != "-shared"]
    cmd = [compiler.compiler(), *flags, "-fsyntax-only", "-I", str(compiler.SHIM_DIR), str(tmp_path / "t.cpp")]
  else:
    cmd = [compiler.compiler(), *compiler.RUNTIME_FLAGS, "-o", str(tmp_path / "rt.so"), str(compiler.HERE / source), "-ldl"]
  r = subprocess.run([*cmd, "-Wall", "-Wextra", "-Werror"], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr

def test_many_buffers_do_not_run_out_of_descriptors():
  """Each software buffer holds a memfd: the device raises the soft descriptor limit, and the allocator keeps few of
  them cached, so buffers of many distinct sizes (each cached apart) stay within a 1024-descriptor process."""
  import resource
  import alloy
  from alloy.runtime.metal.allocator import SOFTWARE_CACHED_BUFFERS
  dev = alloy.get_device("METAL")
  if not dev.software: pytest.skip("a hardware Metal device")
  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  assert soft == hard or soft >= 1 << 20 or hard == resource.RLIM_INFINITY
  for i in range(3 * SOFTWARE_CACHED_BUFFERS):
    x = alloy.Tensor(np.full(1000 + i, 1.5, np.float32), device="METAL")
    del x
  assert dev.allocator.cached_buffers <= SOFTWARE_CACHED_BUFFERS

def test_running_out_of_descriptors_is_a_clear_error():
  """Past the process's hard limit on descriptors, a new buffer raises MetalLimitError naming the limit (not Python's
  bare 'Too many open files' from deep in the device)."""
  import subprocess, sys, textwrap
  import alloy
  if not alloy.get_device("METAL").software: pytest.skip("a hardware Metal device")
  code = textwrap.dedent("""
    import resource, numpy as np
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    import alloy
    held = []
    try:
      for i in range(400): held.append(alloy.Tensor(np.full(8, float(i), np.float32), device="METAL").realize())
    except Exception as e: print(type(e).__name__, e)
    else: print("no error")
  """)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
  assert "MetalLimitError" in out.stdout and "ulimit -n" in out.stdout and "256" in out.stdout, out.stdout + out.stderr
