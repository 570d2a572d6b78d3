"""The CPU heuristics' register tile of 4 columns, for an innermost axis shorter than 8 (a convolution over a
small image: the digits CNN's 4x4 maps), checked on the default build and on the AVX2 one."""
import os, subprocess, sys
import numpy as np
import pytest
import alloy
from alloy import Tensor
import alloy.nn.functional as F
from alloy.codegen.opts import choose_opts, SHORT_TILE_COLS, TILE_ROWS
from alloy.codegen.transforms import upcast
from alloy.schedule.fusion import schedule
from conftest import conv2d_3x3_np

def test_conv_over_4x4_maps_gets_the_short_tile():
  rng = np.random.default_rng(0)
  x, w = rng.standard_normal((64, 16, 4, 4)).astype(np.float32), rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
  y = F.conv2d(Tensor(x, device="CPU"), Tensor(w, device="CPU"), padding=1)
  (ast,) = [k[1] for k in schedule([y.node]) if any(m.op.name == "REDUCE" for m in k[1].root.toposort())]
  opts = choose_opts(ast, alloy.get_device("CPU").caps)
  # columns along the map's row (4, contiguous in the input), rows along the output channels (the weight's axis)
  shape = ast.root.shape
  inner, channels = max(a for a, s in enumerate(shape) if s > 1), shape.index(32)
  assert upcast(inner, SHORT_TILE_COLS) in opts and upcast(channels, TILE_ROWS) in opts, (shape, opts)
  np.testing.assert_allclose(y.numpy(), conv2d_3x3_np(x, w), rtol=1e-4, atol=1e-4)

CODE = """
import sys, numpy as np, alloy
sys.path.insert(0, "test")
from conftest import conv2d_3x3_np
from alloy import Tensor
import alloy.nn.functional as F
dev = alloy.get_device("CPU")
assert dev.target.endswith("+avx2"), dev.target
rng = np.random.default_rng(1)
for shape, oc in (((8, 16, 4, 4), 32), ((3, 5, 4, 12), 24), ((2, 4, 2, 4), 8)):
  x, w = rng.standard_normal(shape).astype(np.float32), rng.standard_normal((oc, shape[1], 3, 3)).astype(np.float32)
  np.testing.assert_allclose(F.conv2d(Tensor(x), Tensor(w), padding=1).numpy(), conv2d_3x3_np(x, w), rtol=1e-4, atol=1e-4)
print("ok")
"""

@pytest.mark.skipif(" avx512f" not in (open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""),
                    reason="the AVX2 build is the default on this CPU, which the test above runs")
def test_short_tile_on_the_avx2_build():
  env = dict(os.environ, ALLOY_CPU_ISA="avx2", DEV="CPU")
  proc = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
