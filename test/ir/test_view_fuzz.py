"""Hypothesis fuzzing of movement ops: the symbolic index of every view chain matches NumPy."""
import numpy as np
import os
from hypothesis import HealthCheck, example, given, settings, strategies as st
from alloy.ir.view import ShapeTracker
from alloy.ir import symbolic as sym

def materialize(tracker: ShapeTracker, buf: np.ndarray) -> np.ndarray:
  out = np.zeros(tracker.shape, dtype=buf.dtype)
  for idx in np.ndindex(*tracker.shape):
    flat, valid = tracker.index([sym.Const(i) for i in idx])
    ok = not valid.is_false and all((k == "ge" and e.v >= b) or (k == "lt" and e.v < b) for k, e, b in valid.clauses)
    if ok: out[idx] = buf[flat.v]
  return out

@st.composite
def chains(draw, max_dim: int = 4):
  shape = tuple(draw(st.lists(st.integers(1, max_dim), min_size=1, max_size=3)))
  ops = []
  cur = shape
  for _ in range(draw(st.integers(1, 5))):
    kind = draw(st.sampled_from(["permute", "reshape", "pad", "shrink", "stride", "expand"]))
    if kind == "permute":
      order = tuple(draw(st.permutations(range(len(cur))))); ops.append((kind, order)); cur = tuple(cur[i] for i in order)
    elif kind == "reshape":
      n = int(np.prod(cur)); divs = [d for d in range(1, n + 1) if n % d == 0]
      d = draw(st.sampled_from(divs)); new = (d, n // d) if draw(st.booleans()) else (n,)
      ops.append((kind, new)); cur = new
    elif kind == "pad":
      arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in cur); ops.append((kind, arg))
      cur = tuple(s + a + b for s, (a, b) in zip(cur, arg))
    elif kind == "shrink":
      arg = []
      for s in cur:
        b = draw(st.integers(0, s - 1)); e = draw(st.integers(b + 1, s)); arg.append((b, e))
      ops.append((kind, tuple(arg))); cur = tuple(e - b for b, e in arg)
    elif kind == "stride":
      steps = tuple(draw(st.sampled_from([1, 2, -1, -2, 3])) for _ in cur); ops.append((kind, steps))
      cur = tuple((s + abs(k) - 1) // abs(k) for s, k in zip(cur, steps))
    else:
      new = tuple(draw(st.sampled_from([s, 3])) if s == 1 else s for s in cur); ops.append((kind, new)); cur = new
  return shape, ops

def apply_np(x, op, arg):
  if op == "permute": return x.transpose(arg)
  if op == "reshape": return x.reshape(arg)
  if op == "pad": return np.pad(x, arg)
  if op == "shrink": return x[tuple(slice(b, e) for b, e in arg)]
  if op == "stride": return x[tuple(slice(None, None, k) for k in arg)]
  return np.broadcast_to(x, arg)

# CI runs a fixed set of examples so an unrelated commit never fails on a new draw;
# ALLOY_FUZZ=N explores N fresh random examples per test.
FRESH = int(os.environ.get("ALLOY_FUZZ", "0"))
fuzz = settings(max_examples=FRESH or 150, deadline=None, derandomize=not FRESH)

@fuzz
@given(chains())
@example(((1,), [("reshape", (1, 1)), ("pad", ((0, 0), (1, 0))), ("shrink", ((0, 1), (0, 1))), ("reshape", (1,))]))
def test_view_chain_matches_numpy(case):
  shape, ops = case
  buf = np.arange(1, int(np.prod(shape)) + 1)
  ref, tracker = buf.reshape(shape), ShapeTracker.contiguous(shape)
  for op, arg in ops:
    ref = apply_np(ref, op, arg)
    tracker = getattr(tracker, op)(arg)
  assert tracker.shape == ref.shape
  np.testing.assert_array_equal(materialize(tracker, buf), ref)

@settings(fuzz, max_examples=FRESH // 6 or 25)
@given(chains())
def test_view_chain_through_kernels(case):
  from alloy import Tensor
  shape, ops = case
  x = np.random.default_rng(0).uniform(1, 2, shape).astype(np.float32)
  ref, t = x, Tensor(x)
  for op, arg in ops:
    ref = apply_np(ref, op, arg)
    t = t._view(op, arg) if op != "reshape" else t.reshape(arg)
  np.testing.assert_array_equal((t + 1).numpy(), ref + 1)

@settings(fuzz, max_examples=FRESH // 6 or 25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chains(max_dim=300), st.integers(0, 2))
def test_reductions_over_views(device, case, pick):
  # the reduction paths (lanes, vector accumulators, grouped GPU rows, stashed softmax) over arbitrary views
  from alloy import Tensor
  shape, ops = case
  x = np.random.default_rng(1).uniform(-2, 2, shape).astype(np.float32)
  ref, t = x, Tensor(x, device=device)
  for op, arg in ops:
    ref = apply_np(ref, op, arg)
    t = t._view(op, arg) if op != "reshape" else t.reshape(arg)
  axis = pick % ref.ndim
  # float32 sums in another order: the error bound scales with the sum of magnitudes, not the result
  err = np.abs(t.sum(axis).numpy() - ref.astype(np.float64).sum(axis))
  assert np.all(err <= 1e-5 * np.abs(ref.astype(np.float64).sum(axis)) + 1e-6 * np.abs(ref.astype(np.float64)).sum(axis) + 1e-6)
  np.testing.assert_array_equal(t.amax(axis).numpy(), ref.max(axis))
  e = np.exp(ref.astype(np.float64) - ref.max(-1, keepdims=True))
  np.testing.assert_allclose(t.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
