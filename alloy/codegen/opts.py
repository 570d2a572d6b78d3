"""How a kernel's logical shape maps onto a launch: the heuristics that choose global/local sizes."""
from __future__ import annotations
from dataclasses import dataclass
from alloy.helpers import prod
from alloy.schedule.kernel import KernelAST

@dataclass(frozen=True)
class DeviceCaps:
  """What codegen needs to know of a device."""
  threads: bool            # GPU-style launch: a grid of threads instead of loops
  max_local: int = 1024
  default_local: int = 256

@dataclass(frozen=True)
class KernelOpts:
  threads: bool
  global_size: tuple
  local_size: tuple
  parallel: bool = False
  applied: tuple = ()

PARALLEL_MIN_WORK = 1 << 15   # elements; below this, threads cost more than they save

def choose_opts(ast: KernelAST, caps: DeviceCaps) -> KernelOpts:
  n = prod(ast.root.shape)
  if caps.threads:
    local = min(caps.default_local, max(32, 1 << (max(n, 1) - 1).bit_length()))
    blocks = max(1, -(-n // local))
    return KernelOpts(True, (blocks, 1, 1), (local, 1, 1), applied=(("LOCAL", 0, local),))
  outer = next((s for s in ast.root.shape if s > 1), 1)
  work = sum(m.shape[0] for m in ast.root.toposort() if m.op.name == "INPUT") + n
  parallel = work >= PARALLEL_MIN_WORK and outer > 1
  return KernelOpts(False, (outer if parallel else 1, 1, 1), (1, 1, 1), parallel, (("PARALLEL", 0, outer),) if parallel else ())
