"""einsum (torch.einsum's equations and broadcasting), lowered to views, sums and batched matmuls.

An equation is terms of letters [a-zA-Z] (at most one '...' each), comma-separated, with an optional '->' output;
without one the output is '...' then the letters used once, in alphabetical order. Each operand is first reduced to
distinct letters (a letter repeated in one term takes the diagonal, a view), its letters used nowhere else are
summed away, and a size-1 dim broadcasts against its letter's size elsewhere. The operands are then combined left
to right, each pair as one batched matmul: letters in both that a later operand or the output needs are the batch,
those needed by neither are contracted. Ellipsis dims broadcast like any letters, right-aligned; ellipsis dims left
out of the output are summed, as in PyTorch.
"""
from __future__ import annotations
from alloy.helpers import prod
from alloy.tensor import Tensor

def _error(msg: str) -> ValueError: return ValueError(f"einsum(): {msg}")

def _parse_term(term: str, where: str) -> list:
  """['a', 'b', '...'] for 'ab...'; letters only, at most one ellipsis."""
  out, k = [], 0
  while k < len(term):
    if term.startswith("...", k):
      if "..." in out: raise _error(f"more than one ellipsis in {where} '{term}'")
      out.append("..."); k += 3
    elif term[k].isascii() and term[k].isalpha(): out.append(term[k]); k += 1
    else: raise _error(f"invalid subscript {term[k]!r} in {where} '{term}': subscripts must be in [a-zA-Z] (or '...')")
  return out

def _diagonal(t: Tensor, p: int, q: int) -> Tensor:
  """The diagonal of axes p < q (equal sizes), put at p; a view: the two axes flattened, read every (s+1)th."""
  s = t.shape[p]
  order = [a for a in range(t.ndim) if a not in (p, q)] + [p, q]
  u = t.permute(order).reshape(tuple(t.shape[a] for a in order[:-2]) + (s * s,))
  u = u.pad(((0, 0),) * (u.ndim - 1) + ((0, s),)).reshape(u.shape[:-1] + (s, s + 1))[..., 0]
  back = list(range(u.ndim - 1))
  back.insert(p, u.ndim - 1)
  return u.permute(back)

def _prepare(t: Tensor, labels: list, sizes: dict) -> tuple[Tensor, list]:
  """t with distinct labels (diagonals taken), each dim broadcast to its label's size."""
  while len(set(labels)) < len(labels):
    p = next(k for k, a in enumerate(labels) if labels.count(a) > 1)
    q = labels.index(labels[p], p + 1)
    t = _diagonal(t, p, q)
    labels = labels[:q] + labels[q + 1:]
  target = tuple(sizes[a] for a in labels)
  return (t.expand(target) if t.shape != target else t), labels

def _contract(a: Tensor, la: list, b: Tensor, lb: list, keep: set) -> tuple[Tensor, list]:
  """a and b combined: shared labels in keep are the batch, other shared ones are summed, the rest stay."""
  batch = [x for x in la if x in lb and x in keep]
  inner = [x for x in la if x in lb and x not in keep]
  a_only, b_only = [x for x in la if x not in lb], [x for x in lb if x not in la]
  size = dict(zip(la, a.shape)) | dict(zip(lb, b.shape))
  def shaped(t, labels, order): return t.permute([labels.index(x) for x in order]) if order != labels else t
  bs, m, k, n = (prod(size[x] for x in g) for g in (batch, a_only, inner, b_only))
  x = shaped(a, la, batch + a_only + inner).reshape(bs, m, k)
  y = shaped(b, lb, batch + inner + b_only).reshape(bs, k, n)
  out = (x @ y).reshape(tuple(size[x] for x in batch + a_only + b_only))
  return out, batch + a_only + b_only

def einsum(equation: str, *operands) -> Tensor:
  """torch.einsum(equation, *operands); operands may also be one list or tuple of tensors."""
  if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
  if not isinstance(equation, str): raise TypeError(f"einsum(): the equation must be a str, got {type(equation).__name__}")
  for t in operands:
    if not isinstance(t, Tensor): raise TypeError(f"einsum(): operands must be Tensors, got {type(t).__name__}")
  if not operands: raise _error("at least one operand is required")
  eq = equation.replace(" ", "")
  if eq.count("->") > 1: raise _error(f"more than one '->' in '{equation}'")
  lhs, arrow, rhs = eq.partition("->")
  terms = [_parse_term(s, "operand subscripts") for s in lhs.split(",")]
  if len(terms) != len(operands):
    raise _error(f"the equation '{equation}' has {len(terms)} operand terms, but {len(operands)} operands were given")
  # ellipsis: right-aligned dims named '.0', '.1', ... (the last ellipsis dim is the last name)
  n_ell = 0
  for k, (term, t) in enumerate(zip(terms, operands)):
    letters = len([x for x in term if x != "..."])
    if ("..." in term and t.ndim < letters) or ("..." not in term and t.ndim != letters):
      raise _error(f"operand {k} has {t.ndim} dims, but its subscripts '{lhs.split(',')[k]}' name {letters}")
    if "..." in term: n_ell = max(n_ell, t.ndim - letters)
  ell = [f".{i}" for i in range(n_ell)]
  def expand_ellipsis(term, ndim):
    if "..." not in term: return term
    i, m = term.index("..."), ndim - (len(term) - 1)
    return term[:i] + ell[n_ell - m:] + term[i + 1:]
  labels = [expand_ellipsis(term, t.ndim) for term, t in zip(terms, operands)]
  if arrow:
    out = _parse_term(rhs, "output subscripts")
    seen = [x for term in terms for x in term]
    for x in out:
      if x != "..." and x not in seen: raise _error(f"output subscript {x} does not appear in the equation for any input operand")
      if out.count(x) > 1: raise _error(f"output subscript {x} appears more than once in the output")
    out = [y for x in out for y in (ell if x == "..." else [x])]
  else:
    counts = [x for term in terms for x in term if x != "..."]
    out = ell + sorted({x for x in counts if counts.count(x) == 1})
  sizes: dict = {}
  for lab, t in zip(labels, operands):
    for x, s in zip(lab, t.shape):
      if (r := t.shape[lab.index(x)]) != s:
        raise _error(f"subscript {x} is repeated for an operand but the sizes don't match, {r} != {s}")
      if s != 1 and sizes.get(x, 1) not in (1, s):
        raise _error(f"operands do not broadcast: subscript {'...' if x[0] == '.' else x} has sizes {sizes[x]} and {s}")
      if s != 1 or x not in sizes: sizes[x] = s
  prepared = [_prepare(t, list(lab), sizes) for t, lab in zip(operands, labels)]
  def needed(i):   # labels still used after operand i: by later operands or the output
    return set(out).union(*[set(lb) for _, lb in prepared[i + 1:]])
  def sum_unused(t, lab, keep):
    axes = [k for k, x in enumerate(lab) if x not in keep]
    return (t.sum(tuple(axes)) if axes else t), [x for x in lab if x in keep]
  acc, lab = sum_unused(*prepared[0], needed(0) | set(prepared[1][1]) if len(prepared) > 1 else needed(0))
  for i in range(1, len(prepared)):
    keep = needed(i)
    b, lb = sum_unused(*prepared[i], keep | set(lab))
    acc, lab = _contract(acc, lab, b, lb, keep)
  acc, lab = sum_unused(acc, lab, set(out))
  return acc.permute([lab.index(x) for x in out]) if lab != out else acc
