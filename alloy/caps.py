"""What codegen needs to know of a device: each runtime Device declares one as `caps`, and codegen only reads it.

It lives at the bottom of the package, beside dtype.py, so that codegen and the runtime both import it downward and
neither imports the other."""
from dataclasses import dataclass

@dataclass(frozen=True)
class DeviceCaps:
  """What codegen needs to know of a device (each Device declares one as `caps`)."""
  threads: bool            # GPU-style launch: a grid of threads instead of loops
  max_local: int = 1024
  default_local: int = 256
  simd_width: int = 32     # lanes that exchange registers (warp / SIMD-group)
  shuffle_bytes: int = 8   # the widest value they exchange in one shuffle (Metal has no 64-bit shuffles: 4)
  vector_widths: tuple = (4,)   # elements per vector load/store, for the dtypes below
  vector_arithmetic: bool = False   # the language computes on vectors: lane-wise arithmetic becomes vector arithmetic
  vector_dtypes: frozenset = frozenset({"float32", "int32", "uint32"})
  vector_bytes: int = 0    # the widest vector load/store in bytes (a GPU's 16); 0: any of vector_widths
  # what the transform validator (codegen/plan.py) checks a list against
  registers: int = 255     # 32-bit registers one thread may hold (sm_90's limit); half of them may be accumulators
  shared_bytes: int = 48 << 10   # bytes of the fast arrays one kernel may stage: a threadgroup's shared memory on a GPU
                                 # (CUDA's static limit), the kernel thread's stack on the CPU
  codegen_loops: bool = False   # codegen unrolls short innermost loops and steps pointers (its compiler does not: ptxas)
  dynamic_shared_bytes: int = 0   # bytes of shared memory a kernel may ask for at launch (CUDA's opt-in limit), 0: none
  tensor_cores: tuple = ()      # the matrix instructions TENSOR_CORE may use (codegen/tensor_core.py), e.g. "mma.sync.m16n8k16"
  multiprocessors: int = 0     # threadgroups of a persistent kernel, one a multiprocessor (CUDA's SMs); 0: not known
  whole_matmuls: tuple = ()     # operand dtypes whose plain matmuls a kernel rendered whole takes (engine/cpu_bf16.py):
                                # the schedule stores such a matmul as its cast, its epilogue a kernel of its own

  def widths_for(self, itemsize: int) -> tuple:
    """The vector widths, widest first, for elements of `itemsize` bytes."""
    return tuple(w for w in sorted(self.vector_widths, reverse=True) if w > 1 and (not self.vector_bytes or w * itemsize <= self.vector_bytes))
