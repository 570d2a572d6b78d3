"""Every transform's effect on a real kernel, on every present device: the transformed kernel computes what the
untransformed one (an empty list) computes, and both match NumPy, on random non-zero data."""
import math, numpy as np, pytest
from alloy import Tensor
from alloy.runtime.registry import get_device
from alloy.schedule.fusion import schedule
from alloy.codegen.lower import lower
from alloy.codegen.plan import check
from alloy.codegen.transforms import upcast, unroll, local, group, thread, swap, stage, pad
from alloy.engine.search_worker import time_kernel
from conftest import rand_np, assert_close

def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)

# name: (input shapes, alloy function, NumPy function)
KERNELS = {
  "matmul": ([(64, 48), (48, 40)], lambda a, b: a @ b, lambda a, b: a.astype(np.float64) @ b),
  "rowsum": ([(64, 300)], lambda a: a.sum(1), lambda a: a.astype(np.float64).sum(1)),
  "softmax": ([(32, 203)], lambda a: a.softmax(-1), lambda a: _softmax(a.astype(np.float64))),
  "colsum": ([(300, 256)], lambda a: a.sum(0), lambda a: a.astype(np.float64).sum(0)),
  "elementwise": ([(50, 70), (70,)], lambda a, b: a * b + 1, lambda a, b: a * b + 1),
  "tiny": ([(3, 4)], lambda a: a.sum(1), lambda a: a.sum(1)),
}

EFFECTS = [
  ("matmul", [upcast(1, 8)]), ("matmul", [upcast(0, 4), upcast(1, 4)]), ("matmul", [upcast(1, 16)]),   # 16 overlaps 40's end
  ("matmul", [upcast(0, 8), upcast(1, 8), unroll(4)]), ("rowsum", [unroll(8)]), ("rowsum", [unroll(7)]),   # 7: a remainder loop
  ("rowsum", [upcast(0, 4), unroll(8, 0)]), ("softmax", [upcast(1, 8), unroll(16)]),   # CPU: the stash, a remainder loop
  ("colsum", [upcast(0, 64)]), ("colsum", [group(0, 64)]), ("elementwise", [upcast(1, 4), upcast(0, 2)]), ("tiny", [upcast(0, 3), unroll(0)]),
  ("matmul", [local(64)]), ("matmul", [local(32), upcast(0, 4), upcast(1, 4)]), ("elementwise", [local(128), upcast(1, 4)]),
  ("rowsum", [group(1, 64)]), ("softmax", [group(1, 128)]), ("colsum", [group(1, 32)]), ("rowsum", [group(0, 256)]),
  ("matmul", [thread(0)]), ("elementwise", [thread(0), upcast(0, 2)]), ("matmul", [swap(0, 1), thread(1)]),
  ("matmul", [swap(0, 1), upcast(0, 8), upcast(1, 8), stage(1), thread(1)]), ("matmul", [upcast(0, 8), upcast(1, 8), stage(0)]),
  # PAD: 40 columns as 48 or 64, 203 as 208, 70 as 72 (a thread or loop past the end stores nothing), 3 rows as one tile of 4
  ("matmul", [pad(1, 16), upcast(1, 16)]), ("matmul", [upcast(0, 2), pad(1, 32), upcast(1, 32)]), ("softmax", [pad(1, 8), upcast(1, 8)]),
  ("elementwise", [pad(1, 8), upcast(1, 8), thread(0)]), ("elementwise", [pad(1, 4)]), ("tiny", [pad(0, 4), upcast(0, 4)]),
  ("matmul", [pad(0, 24), upcast(0, 3), pad(1, 16), upcast(1, 16)]),
]

def _run(device: str, ast, inputs, opts) -> np.ndarray:
  dev = get_device(device)
  prog = lower(ast, dev.caps, opts)
  binary = dev.compiler.compile_cached(dev.renderer.render(prog))
  kernel = (prog.meta.name, binary, prog.meta.global_size, prog.meta.local_size)
  _, out = time_kernel(device, inputs, (ast.root.dtype.name, math.prod(ast.root.shape)), kernel, (), 0, math.inf)
  return np.frombuffer(out, ast.root.dtype.np).reshape(ast.root.shape)

@pytest.mark.parametrize("name, opts", EFFECTS, ids=[f"{n}-{' '.join(map(repr, o))}" for n, o in EFFECTS])
def test_transform_effect(device, rng, name, opts):
  shapes, fn, ref = KERNELS[name]
  arrays = [rand_np(rng, s, low=-1, high=1) for s in shapes]
  tensors = [Tensor(a, device=device).realize() for a in arrays]
  ((node, ast, inputs, _),) = schedule([fn(*tensors).node])
  caps = get_device(device).caps
  if (why := check(ast, caps, opts)) is not None:   # a transform of the other kind of device: refused, saying so
    assert "CPU only" in why or "GPU only" in why or "GPU shared-memory staging is not built" in why, why
    pytest.skip(why)
  buffers = [n.arg for n in inputs[1:]]
  plain, transformed = _run(device, ast, buffers, []), _run(device, ast, buffers, opts)
  want = ref(*arrays).reshape(ast.root.shape)
  assert_close(plain, want, atol=1e-4, rtol=1e-4)
  assert_close(transformed, want, atol=1e-4, rtol=1e-4)
  assert_close(transformed, plain, atol=1e-4, rtol=1e-4)
