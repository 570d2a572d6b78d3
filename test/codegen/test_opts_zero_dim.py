"""A 0-d kernel too big for the one-thread path and too short for a threadgroup (a mean of row sums: the loss of a
batch) gets no LOCAL on an axis it does not have, on every device and in the CUDA renderers' check."""
import numpy as np
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import make_plan
from alloy.schedule.fusion import schedule
from conftest import assert_close

def test_mean_of_row_sums(device):
  x = np.random.default_rng(0).standard_normal((64, 10)).astype(np.float32)
  t = Tensor(x, device=device).sum(-1).mean()
  for _, ast, _, _ in schedule([t.node]):
    make_plan(ast, DeviceCaps(threads=True), choose_opts(ast, DeviceCaps(threads=True)))   # raised InvalidOpts: LOCAL(0, 32)
  assert_close(t.numpy(), x.sum(-1).mean(), atol=1e-5, rtol=1e-5)
