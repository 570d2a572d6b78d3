"""The C renderer has the C compiler unroll a loop of at most SHORT_LOOP iterations whole (a 2x2 pooling window),
which -O2 leaves rolled to keep code small, where every loop inside it is short too; the kernel's result stays
NumPy's. A short loop around a longer one stays rolled: GCC 12 miscompiled one such nest (a padded copy)."""
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

def _loops(src: str) -> list:
  """(indentation, pragma or "", the pragma's count, the loop's count) of each serial loop, in order."""
  out, pragma = [], None
  for line in src.splitlines():
    if (m := re.match(r"\s*#pragma GCC unroll (\d+)", line)): pragma = m
    elif (m := re.match(r"( *)for \(int (\w+) = 0; \2 < (\d+);", line)):
      out.append((len(m.group(1)), pragma.group(0).strip() if pragma else "", int(pragma.group(1)) if pragma else 0, int(m.group(3))))
      pragma = None
  return out

def _nested(loops: list, k: int) -> list:
  """The loops inside loop k: those after it, more indented, up to the first that is not."""
  out = []
  for loop in loops[k + 1:]:
    if loop[0] <= loops[k][0]: break
    out.append(loop)
  return out

def test_short_loops_are_unrolled_whole_and_long_ones_are_not(rng):
  x = Tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), device="CPU").requires_grad_()
  g = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
  (F.max_pool2d(x, 2) * Tensor(g, device="CPU")).sum().backward()
  src = "\n".join(c_sources(x.grad))
  loops = _loops(src)
  assert loops, src
  for k, (_, pragma, n, count) in enumerate(loops):
    inner = [c for *_, c in _nested(loops, k)]
    assert bool(pragma) == (count <= SHORT_LOOP and all(c <= SHORT_LOOP for c in inner)) and (not pragma or n == count), (pragma, count)
  assert any(pragma for _, pragma, *_ in loops) and any(not pragma for _, pragma, *_ in loops)
  # each input element gets the output gradient where it is its window's (first) maximum
  xs = x.detach().numpy().reshape(4, 3, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(4, 3, 4, 4, 4)
  first = xs.argmax(-1)
  want = np.zeros_like(xs)
  np.put_along_axis(want, first[..., None], g[..., None], -1)
  want = want.reshape(4, 3, 4, 4, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(4, 3, 8, 8)
  np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)

def test_a_short_loop_around_a_longer_one_stays_rolled(rng):
  """GCC 12 (-O2 -ftree-vectorize, AVX2 or AVX-512) miscompiled a 2-iteration loop unrolled around the vectorized
  loops of a padded copy: a 2x2x2 tensor padded by 2 on both sides of its middle axis came out 0 where it was copied."""
  h = rng.standard_normal((2, 2, 2)).astype(np.float32)
  t = F.pad(Tensor(h, device="CPU"), (0, 0, 2, 2), value=0.5)
  loops = _loops("\n".join(c_sources(t)))
  assert loops[0][3] == 2 and not loops[0][1] and any(c > SHORT_LOOP for *_, c in _nested(loops, 0)), loops
  np.testing.assert_array_equal(t.numpy(), np.pad(h, ((0, 0), (2, 2), (0, 0)), constant_values=0.5))
