"""The C renderer has the C compiler unroll a loop of at most SHORT_LOOP iterations whole (a 2x2 pooling window),
which -O2 leaves rolled to keep code small; the kernel's result stays NumPy's."""
import re
import numpy as np
import alloy
from alloy import Tensor
import alloy.nn.functional as F
from alloy.codegen.lower import lower
from alloy.renderer.c import SHORT_LOOP, CRenderer
from alloy.schedule.fusion import schedule

def c_sources(t: Tensor) -> list[str]:
  caps = alloy.get_device("CPU").caps
  return [CRenderer().render(lower(item[1], caps)) for item in schedule([t.node])]

def test_short_loops_are_unrolled_whole_and_long_ones_are_not(rng):
  x = Tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), device="CPU").requires_grad_()
  g = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
  (F.max_pool2d(x, 2) * Tensor(g, device="CPU")).sum().backward()
  src = "\n".join(c_sources(x.grad))
  loops = re.findall(r"(#pragma GCC unroll (\d+)\n\s*)?for \(int (\w+) = 0; \3 < (\d+);", src)
  assert loops, src
  for pragma, n, _, count in loops:
    assert bool(pragma) == (int(count) <= SHORT_LOOP) and (not pragma or n == count), (pragma, count)
  assert any(pragma for pragma, *_ in loops) and any(not pragma for pragma, *_ in loops)
  # each input element gets the output gradient where it is its window's (first) maximum
  xs = x.detach().numpy().reshape(4, 3, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(4, 3, 4, 4, 4)
  first = xs.argmax(-1)
  want = np.zeros_like(xs)
  np.put_along_axis(want, first[..., None], g[..., None], -1)
  want = want.reshape(4, 3, 4, 4, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(4, 3, 8, 8)
  np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)
