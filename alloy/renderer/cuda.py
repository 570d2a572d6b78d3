"""CUDA C for NVRTC: one thread per output element, 16-bit floats stored natively and computed in float."""
from __future__ import annotations
from alloy.dtype import DType
from alloy.codegen.program import Kind, LinearProgram
from alloy.renderer.cstyle import CStyleRenderer, floor_division_helpers, integer_helpers
from alloy.helpers import prod
from alloy.ir import symbolic as sym
from alloy.codegen.tensor_core import STAGE_PAD, WGMMA, grid, tile_origin, wgmma_gemm
from alloy.renderer.cuda_mma import mma_call, prelude
from alloy.renderer.cuda_wgmma import (ARCH_SPECIFIC, MAINLOOP, PERSISTENT, TENSOR_MAPS_SYMBOL, device_helpers, mainloop, persistent,
                                       tensor_maps)

CUDA_PRELUDE = r"""typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t; typedef long long int64_t; typedef unsigned long long uint64_t;
__device__ inline long long alloy_f2i(double x) {
  return x != x ? 0 : x <= -9223372036854775808.0 ? (-9223372036854775807ll - 1) : x >= 9223372036854775807.0 ? 9223372036854775807ll : (long long)x;
}
template <class D, class S> __device__ inline D alloy_bitcast(S s) { D d; memcpy(&d, &s, sizeof(D)); return d; }
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
""" + integer_helpers("__device__ inline") + floor_division_helpers("__device__ inline", ["float", "double"])

# the 16-bit float headers are large: NVRTC parses them only for kernels that use the types
CUDA_HALF_PRELUDE = r"""#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ inline float alloy_float16_to_float(__half x) { return __half2float(x); }
__device__ inline __half alloy_float_to_float16(float x) { return __float2half_rn(x); }
__device__ inline float alloy_bfloat16_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline __nv_bfloat16 alloy_float_to_bfloat16(float x) { return __float2bfloat16_rn(x); }
struct __align__(8) alloy_half4 { __half v[4]; }; struct __align__(16) alloy_half8 { __half v[8]; };
struct __align__(8) alloy_bfloat4 { __nv_bfloat16 v[4]; }; struct __align__(16) alloy_bfloat8 { __nv_bfloat16 v[8]; };
"""

def mma(r, t, ins):
  """The tensor-core tile (renderer/cuda_mma.py; a WGMMA tile: renderer/cuda_wgmma.py's main loop, which zeroes them
  itself) into a zeroed array of accumulators."""
  spec, tile = ins.arg
  if tile.persistent:   # every tile's main loop; the epilogue threads come back with the staged tile's address
    staged = t.new("staged")
    return t.named(ins, staged, f"{r.tname(ins.dtype)}* {staged} = {PERSISTENT}({MAPS_PARAM});")
  acc = t.new("acc")
  if tile.instruction == WGMMA:
    *_, m0, n0, batch = t.args(ins)
    return t.named(ins, acc, f"float {acc}[{tile.accumulators}];", f"{MAINLOOP}({MAPS_PARAM}, {m0}, {n0}, {batch}, {acc});")
  t.named(ins, acc, f"float {acc}[{tile.accumulators}];", f"for (int i = 0; i < {tile.accumulators}; i++) {acc}[i] = 0.0f;",
          mma_call(spec, tile, *t.args(ins), acc))

def barrier(r, t, ins):
  """__syncthreads, or where only some threads reach it (a WGMMA tile's consumers: the producer has left) a named
  barrier counting those."""
  t.emit(r.barrier if ins.arg is None else f'asm volatile("bar.sync 1, {ins.arg};" ::: "memory");')

def handoff(r, t, ins):
  """A persistent WGMMA tile's epilogue waiting for a staged tile, or handing its memory back (renderer/cuda_wgmma.py)."""
  t.emit(f"alloy_staged_wait({t[ins.src[1]]});" if ins.arg == "wait" else "alloy_staged_release();")

def persistent_routine(prog: LinearProgram, spec, tile, gemm) -> str:
  """cuda_wgmma.persistent for this kernel: its tiles, its grid, and tensor_core.tile_origin as C expressions of t."""
  tiles = prod(grid(spec, tile))
  origin = tuple(c_index(e) for e in tile_origin(spec, tile, sym.Var("t", 0, tiles - 1)))
  return persistent(gemm, tiles, prog.meta.global_size[0], origin, spec.rounded.dtype.name, STAGE_PAD)

def c_index(e: sym.Expr) -> str:
  """An index expression of non-negative terms as C (whose / and % then floor, as the expression's do)."""
  return repr(e).replace("//", "/")

MAPS_PARAM = "alloy_maps"
MAP_DTYPES = ("float16", "bfloat16")   # codes in TENSOR_MAPS_SYMBOL's entries

def tensor_map_symbol(gemm, operands) -> str:
  """The module's description of a WGMMA tile's two tensor maps, read by the runtime at load (runtime/cuda/program.py):
  per map, its dtype's code, dims, strides, box, then the operand's buffer slot and byte offset."""
  words = [w for m, (slot, offset) in zip(tensor_maps(gemm), operands)
           for w in (MAP_DTYPES.index(m.dtype), *m.dims, *m.strides, *m.box, slot, offset)]
  return f'extern "C" __device__ long long {TENSOR_MAPS_SYMBOL}[{len(words)}] = {{{", ".join(map(str, words))}}};'

class CUDARenderer(CStyleRenderer):
  language = "cuda"
  type_names = {"bool": "bool", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
                "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
                "float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double"}
  compute_in_float = {"float16", "bfloat16"}

  def preamble(self, prog: LinearProgram) -> list[str]:
    halves = any(d is not None and d.name in self.compute_in_float for d in prog.buffer_dtypes) or \
             any(ins.dtype is not None and ins.dtype.name in self.compute_in_float for ins in prog.instrs)
    mma = next((ins for ins in prog.instrs if ins.op is Kind.MMA), None)
    # a tensor-core tile's pipeline lives in dynamic shared memory, whose size the module declares for the runtime
    tile, first = [], []
    if mma is not None:
      spec, shape = mma.arg
      if shape.instruction == WGMMA:   # the Hopper main loop and its tensor maps, compiled for sm_90a
        gemm, operands = wgmma_gemm(spec, shape)
        routine = persistent_routine(prog, spec, shape, gemm) if shape.persistent else mainloop(gemm)
        first, tile = [ARCH_SPECIFIC], [device_helpers(), routine, tensor_map_symbol(gemm, operands)]
      else: tile = [prelude(shape)]
      tile.append(f'extern "C" __device__ int alloy_dynamic_shared_bytes = {shape.shared_bytes(spec.operand_dtype.itemsize)};')
    return first + ([CUDA_HALF_PRELUDE] if halves else []) + [CUDA_PRELUDE] + tile
  kinds = {**CStyleRenderer.kinds, Kind.MMA: mma, Kind.BARRIER: barrier, Kind.HANDOFF: handoff}
  def extra_params(self, prog: LinearProgram) -> list[str]:
    """A WGMMA tile's tensor maps: one pointer after the buffers (runtime/cuda/tensor_map.py's parameter block)."""
    mma = next((ins for ins in prog.instrs if ins.op is Kind.MMA), None)
    return [f"const alloy_tensor_map* __restrict__ {MAPS_PARAM}"] if mma is not None and mma.arg[1].instruction == WGMMA else []
  def signature(self, name: str, params: list[str], prog: LinearProgram) -> str:
    meta = prog.meta
    return f'extern "C" __global__ void __launch_bounds__({meta.local_size[0]}, {meta.min_blocks}) {name}({", ".join(params)})'
  def param_decl(self, slot: int, d: DType, written: bool) -> str:
    return f"{'' if written else 'const '}{self.tname(d)}* __restrict__ data{slot}"
  def special(self, kind: str, wide: bool = False) -> str:
    if wide and kind == "global": return "((int64_t)blockIdx.x*blockDim.x+threadIdx.x)"   # the product passes 2^32
    return {"global": "(int)(blockIdx.x*blockDim.x+threadIdx.x)", "group": "(int)blockIdx.x", "lane": "(int)threadIdx.x"}[kind]
  def local_decl(self, name: str, d: DType, size: int) -> str: return f"__shared__ {self.tname(d)} {name}[{size}];"
  def tile_memory_decl(self, name: str, d: DType) -> str:   # every extern __shared__ array starts at the dynamic memory's start
    return f"extern __shared__ __align__(128) unsigned char alloy_tile_smem[]; {self.tname(d)}* {name} = ({self.tname(d)}*)alloy_tile_smem;"
  barrier = "__syncthreads();"
  def shuffle_xor(self, value: str, offset: str, d: DType) -> str:
    return f"__shfl_xor_sync(0xffffffffu, {self.shuffle_operand(value, d)}, {offset})"
  def func(self, name: str, d: DType, args: list[str]) -> str:
    suffix = "f" if d.name in ("float32", "float16", "bfloat16") else ""
    return f"{name}{suffix}({', '.join(args)})"
  vector_names = {"float32": "float", "int32": "int", "uint32": "uint"}
  # 16-bit floats: 2 lanes are CUDA's pair types; 4 and 8 (8 and 16 bytes) the prelude's aligned arrays of them
  half_pairs = {"float16": ("__half2", "__halves2half2"), "bfloat16": ("__nv_bfloat162", "__halves2bfloat162")}
  half_arrays = {"float16": "alloy_half", "bfloat16": "alloy_bfloat"}
  def vec_type(self, d: DType, width: int) -> str:
    if d.name in self.half_pairs: return self.half_pairs[d.name][0] if width == 2 else f"{self.half_arrays[d.name]}{width}"
    return f"{self.vector_names[d.name]}{width}"
  def vec_lane(self, v: str, k: int, d: DType, width: int) -> str:
    return f"{v}.v[{k}]" if d.name in self.half_arrays and width > 2 else f"{v}.{'xyzw'[k]}"
  def vec_make(self, vals: list[str], d: DType, width: int) -> str:
    if d.name in self.half_pairs: return f"{self.half_pairs[d.name][1]}({', '.join(vals)})" if width == 2 else \
      f"{self.vec_type(d, width)}{{{{{', '.join(vals)}}}}}"
    return f"make_{self.vec_type(d, width)}({', '.join(vals)})"
  def bitcast(self, v: str, src: DType, dst: DType) -> str:
    return self.from_storage(f"alloy_bitcast<{self.tname(dst)}>({self.to_storage(v, src)})", dst)
