"""The GPU heuristics' vector lanes for elementwise kernels (codegen/opts.py, _narrow_upcasts): 16 bytes of outputs a
thread, 8 16-bit ones (2 along the last axis x 4 along the one before) or 4 32-bit ones along the last axis; none
where the axis does not divide, for other widths, or where too few threads would remain. The values they compute
are checked by every op test on the software Metal device, whose caps launch threads."""
import numpy as np
import pytest
from alloy import Tensor
from alloy.codegen.opts import choose_opts
from alloy.codegen.transforms import local, upcast
from alloy.runtime.cuda import CUDADevice
from alloy.schedule.fusion import schedule

def opts_of(t: Tensor) -> list:
  (_, ast, _, _), = schedule([t.node], threads=True)
  return choose_opts(ast, CUDADevice.caps)

def pair(shape, dtype):
  return [Tensor(np.ones(shape, dtype)) for _ in range(2)]

def test_sixteen_bit_outputs_take_two_by_four():
  a, b = pair((8, 1024, 768), np.float16)
  assert opts_of(a + b)[1:] == [upcast(2, 2), upcast(1, 4)]

def test_thirty_two_bit_outputs_take_four_along_the_last_axis():
  a, b = pair((8, 1024, 768), np.float32)
  assert opts_of(a + b)[1:] == [upcast(2, 4)]
  x = Tensor(np.ones((8, 1024, 12, 64), np.float32))
  assert opts_of(x.permute(0, 2, 1, 3).contiguous())[1:] == [upcast(3, 4)]   # a head transpose: the stores are whole

@pytest.mark.parametrize("shape,dtype", [((1000, 1001), np.float32),   # the last axis not a multiple of 4
                                         ((4096, 1024), np.float64),   # 8-byte values: one a thread
                                         ((64, 256), np.float32)])      # too few threads would remain
def test_no_lanes(shape, dtype):
  a, b = pair(shape, dtype)
  opts = opts_of(a + b)
  assert opts == [local(opts[0].arg)]
