"""einsum against NumPy (and PyTorch): contractions, batches, outer products, diagonals, '...', implicit output,
size-1 broadcasting; gradients; bad equations raise errors naming the problem."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from conftest import rand_np, assert_close
from op_grads import check_grads

try: import torch
except ImportError: torch = None

CASES = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
         ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("i,j->ij", [(3,), (4,)]),
         ("ijk->kji", [(2, 3, 4)]), ("iij->ji", [(3, 3, 2)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("i,i", [(4,), (4,)]),
         ("...ij->ij", [(2, 3, 4)]), ("ij...->ij", [(2, 3, 4)]), ("ij,jk", [(2, 1), (3, 4)]), ("", [()]), ("ab,cd->", [(2, 3), (4, 5)]),
         ("bii,bjj->bij", [(2, 3, 3), (2, 4, 4)]), ("i,i,i->i", [(3,), (3,), (3,)]), ("aab->", [(2, 2, 3)]), ("ij,ij->ij", [(0, 3), (0, 3)]),
         ("...", [(2, 3)]), ("a...b,b...->...a", [(2, 3, 4), (4, 3)]), (" i j , j k -> k i ", [(2, 3), (3, 2)]), ("Ab,bC->CA", [(2, 3), (3, 4)]),
         ("ij,j->i", [(3, 0), (0,)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)])]

def _named_ellipsis_einsum(eq: str, xs: list):
  """NumPy's einsum of an explicit equation with '...' spelled out as letters (right-aligned, as broadcasting
  aligns them), so ellipsis dims the output leaves out are summed as PyTorch sums them; None for implicit outputs."""
  eq = eq.replace(" ", "")
  if "->" not in eq: return None
  ins, out = eq.split("->")
  specs = ins.split(",")
  dims = [x.ndim - (len(sp) - 3) if "..." in sp else 0 for sp, x in zip(specs, xs)]
  letters = "".join(c for c in "ZYXWVUTSRQPONM" if c not in eq)[:max(dims)]
  specs = [sp.replace("...", letters[len(letters) - d:]) for sp, d in zip(specs, dims)]
  return np.einsum(",".join(specs) + "->" + out.replace("...", letters), *xs)

@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] or "scalar" for c in CASES])
def test_einsum(device, rng, eq, shapes):
  xs = [rand_np(rng, s) for s in shapes]
  got = alloy.einsum(eq, *[Tensor(x, device=device) for x in xs])
  try: want = np.einsum(eq.replace(" ", ""), *xs)
  except ValueError: want = _named_ellipsis_einsum(eq, xs)   # NumPy does not sum ellipsis dims left out of the output
  if want is not None: assert_close(got.numpy(), want, atol=1e-5, rtol=1e-5)
  if torch is not None: assert_close(got.numpy(), torch.einsum(eq, *[torch.tensor(x) for x in xs]).numpy(), atol=1e-5, rtol=1e-5)
  assert want is not None or torch is not None

def test_einsum_list_and_ints(device, rng):
  a, b = rand_np(rng, (3, 4), "int32"), rand_np(rng, (4,), "int32")
  got = alloy.einsum("ij,j->i", [Tensor(a, device=device), Tensor(b, device=device)])
  assert got.dtype == alloy.int32
  np.testing.assert_array_equal(got.numpy(), a @ b)

GRAD_CASES = {
  "matmul": ("ij,jk->ik", [(2, 3), (3, 4)]), "diag": ("ii->i", [(3, 3)]), "trace_batch": ("bii->b", [(2, 3, 3)]),
  "ellipsis": ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), "outer": ("i,j->ji", [(3,), (2,)]),
  "three": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), "broadcast1": ("ij,jk", [(2, 1), (3, 4)]), "sum_out": ("ab,cd->a", [(2, 3), (4, 2)]),
}

@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grads(case, device, rng):
  eq, shapes = GRAD_CASES[case]
  lib = lambda *ts: (torch if torch is not None and isinstance(ts[0], torch.Tensor) else alloy).einsum(eq, *ts)
  check_grads(lambda *ts: (lib(*ts) ** 2).sum(), [rand_np(rng, s, "float64") for s in shapes], device)

@pytest.mark.parametrize("eq,shapes,match", [
  ("ij,jk", [(2, 3)], "2 operand terms, but 1 operands"),
  ("i2", [(2, 2)], "invalid subscript '2'"),
  ("ij->k", [(2, 2)], "output subscript k does not appear"),
  ("i->ii", [(2,)], "output subscript i appears more than once"),
  ("ii", [(2, 3)], "subscript i is repeated for an operand but the sizes don't match, 2 != 3"),
  ("ij,jk", [(2, 3), (4, 5)], "subscript j has sizes 3 and 4"),
  ("ijk", [(2, 3)], "operand 0 has 2 dims, but its subscripts 'ijk' name 3"),
  ("i......", [(2, 3)], "more than one ellipsis"),
  ("i->j->k", [(2,)], "more than one '->'"),
])
def test_bad_equations(device, eq, shapes, match):
  with pytest.raises(ValueError, match=match): alloy.einsum(eq, *[Tensor(np.ones(s, np.float32), device=device) for s in shapes])

def test_bad_operands():
  with pytest.raises(TypeError, match="equation must be a str"): alloy.einsum(3, Tensor([1.0]))
  with pytest.raises(TypeError, match="operands must be Tensors"): alloy.einsum("i", [1.0])
