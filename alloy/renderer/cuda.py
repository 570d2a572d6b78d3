"""CUDA C for NVRTC: one thread per output element, 16-bit floats stored natively and computed in float."""
from __future__ import annotations
from alloy.dtype import DType
from alloy.ir import symbolic as sym
from alloy.codegen.program import LinearProgram
from alloy.renderer.cstyle import CStyleRenderer, integer_helpers

CUDA_PRELUDE = r"""#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t; typedef long long int64_t; typedef unsigned long long uint64_t;
__device__ inline long long alloy_f2i(double x) {
  return x != x ? 0 : x <= -9223372036854775808.0 ? (-9223372036854775807ll - 1) : x >= 9223372036854775807.0 ? 9223372036854775807ll : (long long)x;
}
__device__ inline float alloy_float16_to_float(__half x) { return __half2float(x); }
__device__ inline __half alloy_float_to_float16(float x) { return __float2half_rn(x); }
__device__ inline float alloy_bfloat16_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline __nv_bfloat16 alloy_float_to_bfloat16(float x) { return __float2bfloat16_rn(x); }
template <class D, class S> __device__ inline D alloy_bitcast(S s) { D d; memcpy(&d, &s, sizeof(D)); return d; }
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
""" + integer_helpers("__device__ inline")

class CUDARenderer(CStyleRenderer):
  language = "cuda"
  type_names = {"bool": "bool", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
                "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
                "float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double"}
  compute_in_float = {"float16", "bfloat16"}

  def preamble(self, prog: LinearProgram) -> list[str]: return [CUDA_PRELUDE]
  def signature(self, name: str, params: list[str], prog: LinearProgram) -> str:
    return f'extern "C" __global__ void __launch_bounds__({prog.meta.local_size[0]}) {name}({", ".join(params)})'
  def param_decl(self, slot: int, d: DType, written: bool) -> str:
    return f"{'' if written else 'const '}{self.tname(d)}* __restrict__ data{slot}"
  def special(self, var: sym.Var, local: int) -> str: return "(int)(blockIdx.x*blockDim.x+threadIdx.x)"
  def func(self, name: str, d: DType, args: list[str]) -> str:
    suffix = "f" if d.name in ("float32", "float16", "bfloat16") else ""
    return f"{name}{suffix}({', '.join(args)})"
  def bitcast(self, v: str, src: DType, dst: DType) -> str:
    return self.from_storage(f"alloy_bitcast<{self.tname(dst)}>({self.to_storage(v, src)})", dst)
