"""The matmul recogniser (codegen/matmul.py): which kernels are a matmul with an elementwise epilogue, and the
operand layouts it reads off their views. Pure AST analysis: runs everywhere."""
import numpy as np
import pytest
import alloy
from alloy import Tensor
from alloy.ir.ops import Op
from alloy.schedule.fusion import schedule
from alloy.codegen.matmul import match_matmul

def _asts(t: Tensor) -> list:
  return [item[1] for item in schedule([t.node])]

def _one(t: Tensor):
  """The spec of the kernel that holds the reduction (a view copy before or after it is a kernel of its own)."""
  asts = [a for a in _asts(t) if any(n.op is Op.REDUCE for n in a.root.toposort())]
  assert len(asts) == 1
  return match_matmul(asts[0])

def _t(*shape, dtype=np.float16):
  return Tensor(np.random.default_rng(0).standard_normal(shape).astype(dtype))

@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_plain_matmul(dtype):
  a, b = _t(64, 32, dtype=dtype), _t(32, 48, dtype=dtype)
  s = _one(a @ b)
  assert (s.M, s.N, s.K, s.batch, s.out_axes) == (64, 48, 32, (), ("m", "n"))
  assert (s.a.slot, s.a.stride, s.a.k_stride, s.a.offset) == (1, 32, 1, 0) and s.a.k_major
  assert (s.b.slot, s.b.stride, s.b.k_stride) == (2, 1, 48) and not s.b.k_major
  assert s.acc_dtype == alloy.float32 and s.mul_dtype == alloy.float32
  assert s.out_dtype == (alloy.float16 if dtype == np.float16 else alloy.float32)
  assert s.epilogue_ops == ((Op.CAST,) if dtype == np.float16 else ())
  assert s.operand_dtype == (alloy.float16 if dtype == np.float16 else alloy.float32)
  assert s.flops == 2 * 64 * 48 * 32

def test_bfloat16_casts():
  a, b = _t(16, 8), _t(8, 24)
  a, b = a.bfloat16().contiguous().realize(), b.bfloat16().contiguous().realize()
  s = _one(a @ b)
  assert s.a.casts == (alloy.float32,) and s.operand_dtype == alloy.bfloat16 and s.acc_dtype == alloy.float32

def test_transposed_operands():
  a, b = _t(32, 64), _t(48, 32)   # a.T: (64, 32) read down columns; b.T: (32, 48), nn.Linear's weight layout
  s = _one(a.T @ b.T)
  assert (s.M, s.N, s.K) == (64, 48, 32)
  assert (s.a.stride, s.a.k_stride) == (1, 64) and (s.b.stride, s.b.k_stride) == (32, 1) and s.b.k_major

def test_batched_and_broadcast():
  x, w = _t(3, 5, 64, 32), _t(32, 16)
  s = _one(x @ w)
  assert (s.M, s.N, s.K, s.batch, s.out_axes) == (64, 16, 32, (3, 5), ("b0", "b1", "m", "n"))
  assert s.a.batch_strides == (5 * 64 * 32, 64 * 32) and s.b.batch_strides == (0, 0)
  q, k = _t(6, 128, 64), _t(6, 128, 64)
  s = _one(q @ k.transpose(1, 2))   # attention's scores
  assert (s.M, s.N, s.K, s.batch) == (128, 128, 64, (6,))
  assert s.a.k_major and s.b.k_major and s.b.batch_strides == (128 * 64,)

def test_offset_view():
  a, b = _t(10, 40), _t(32, 24)
  s = _one(a[2:6, 8:] @ b)
  assert (s.M, s.K) == (4, 32) and s.a.offset == 2 * 40 + 8 and s.a.stride == 40

def test_epilogue():
  a, b, bias, res = _t(64, 32), _t(32, 48), _t(48), _t(64, 48)
  s = _one((a @ b + bias).gelu() + res)
  assert s is not None and Op.ERF in s.epilogue_ops and Op.ADD in s.epilogue_ops
  assert s.epilogue_inputs == (3, 4)
  s = _one((a @ b).relu())
  assert s is not None and (Op.MAX in s.epilogue_ops or Op.WHERE in s.epilogue_ops)

def test_transposed_output_kernel():
  a, b = _t(64, 32), _t(32, 48)
  s = _one(a @ b)
  assert s.out_axes == ("m", "n")

@pytest.mark.parametrize("make", [
  lambda: _t(64, 32).float().sum(1),                              # a reduction of one operand
  lambda: _t(64, 32).float().softmax(-1),                         # two reductions
  lambda: _t(64, 32).float().max(1).values,                            # not a sum
  lambda: _t(64, 32).pad(((0, 0), (1, 1))) @ _t(34, 48),        # a masked (padded) operand
])
def test_not_a_matmul(make):
  for ast in _asts(make()): assert match_matmul(ast) is None

def test_computed_operand_is_not_a_matmul(monkeypatch):
  # the schedule gives a computed operand its own kernel (schedule.fusion._computed_operand); where it did not, the
  # recogniser refuses it: a matrix engine takes loads only
  from alloy.schedule import fusion
  monkeypatch.setattr(fusion, "_computed_operand", lambda x: None)
  monkeypatch.setattr(fusion, "_schedules", {})
  asts = _asts(_t(64, 32).float().exp() @ _t(32, 48).float())
  assert len(asts) == 1 and match_matmul(asts[0]) is None

def test_reduction_read_at_another_element():
  # c + c.T reads each accumulator at two elements: the schedule cuts the matmul into a kernel of its own (a plain
  # matmul, stored as its cast to float16 past the reshape that drops the reduced axis) and the sum into another
  a = _t(32, 32)
  c = a @ a
  specs = [match_matmul(ast) for ast in _asts(c + c.T)]
  assert [s is not None for s in specs] == [True, False] and specs[0].out_axes == ("m", "n") and specs[0].out_dtype.name == "float16"

def test_rounded_matmul():
  """MatmulSpec.rounded: the one 16-bit CAST every epilogue path reads the reduction through (what a persistent WGMMA
  tile stages), or None where some path reads the float32 sum itself."""
  a, b, bias = _t(64, 32), _t(32, 48), _t(48)
  for t in (a @ b, (a @ b + bias).gelu(), (a @ b).relu().float(), (a @ b) * (a @ b)):
    s = _one(t)
    assert s.rounded is not None and s.rounded.op is Op.CAST and s.rounded.dtype == alloy.float16
  bf = _one(a.bfloat16().contiguous().realize() @ b.bfloat16().contiguous().realize())
  assert bf.rounded is not None and bf.rounded.dtype == alloy.bfloat16
  wide = a.float() @ b.float()
  assert _one(wide).rounded is None   # float32 products, never rounded
  assert _one(wide.half() + wide).rounded is None   # one path rounds, the other reads the sum
  assert _one(_t(64, 32, dtype=np.float32) @ _t(32, 48, dtype=np.float32)).rounded is None
