"""alloy.nn.functional normalization, dropout, attention, activations, linear and the shape helpers (pad,
pixel_shuffle) against PyTorch on every device (values and gradients), finite differences (float64, CPU),
batch_norm's running statistics, and the errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor
import alloy.nn.functional as F
from alloy.realize_tensors import realize
from functional_check import rand, against_torch, finite_differences

torch = pytest.importorskip("torch")
TF = torch.nn.functional

def test_layer_norm(device):
  rng = np.random.default_rng(1)
  x, w, b = rand(rng, 3, 4, 5), rand(rng, 4, 5), rand(rng, 4, 5)
  against_torch(lambda x, w, b: F.layer_norm(x, (4, 5), w, b), lambda x, w, b: TF.layer_norm(x, (4, 5), w, b), [x, w, b], device, tol=1e-4)
  against_torch(lambda x: F.layer_norm(x, 5, eps=1e-3), lambda x: TF.layer_norm(x, (5,), eps=1e-3), [x], device, tol=1e-4)

def test_rms_norm(device):
  rng = np.random.default_rng(2)
  x, w = rand(rng, 3, 6), rand(rng, 6)
  against_torch(lambda x, w: F.rms_norm(x, (6,), w), lambda x, w: TF.rms_norm(x, (6,), w), [x, w], device, tol=1e-4)
  against_torch(lambda x: F.rms_norm(x, 6, eps=0.1), lambda x: TF.rms_norm(x, (6,), eps=0.1), [x], device, tol=1e-4)

def test_group_norm(device):
  rng = np.random.default_rng(3)
  x, w, b = rand(rng, 2, 6, 3, 2), rand(rng, 6), rand(rng, 6)
  against_torch(lambda x, w, b: F.group_norm(x, 3, w, b), lambda x, w, b: TF.group_norm(x, 3, w, b), [x, w, b], device, tol=1e-4)
  against_torch(lambda x: F.group_norm(x, 6), lambda x: TF.group_norm(x, 6), [x], device, tol=1e-4)
  against_torch(lambda x: F.instance_norm(x), lambda x: TF.instance_norm(x), [x], device, tol=1e-4)

@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 4, 3)])
def test_batch_norm_training_updates_running_stats(shape, device):
  rng = np.random.default_rng(4)
  x, w, b = rand(rng, *shape), rand(rng, shape[1]), rand(rng, shape[1])
  rm, rv = rand(rng, shape[1]), rng.uniform(0.5, 2, shape[1]).astype(np.float32)
  trm, trv = torch.tensor(rm), torch.tensor(rv)
  arm, arv = Tensor(rm, device=device), Tensor(rv, device=device)
  against_torch(lambda x, w, b: F.batch_norm(x, arm, arv, w, b, training=True, momentum=0.3),
                lambda x, w, b: TF.batch_norm(x, trm, trv, w, b, training=True, momentum=0.3), [x, w, b], device, tol=1e-4)
  np.testing.assert_allclose(arm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(arv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)
  # eval: the running statistics normalize
  against_torch(lambda x, w, b: F.batch_norm(x, arm, arv, w, b), lambda x, w, b: TF.batch_norm(x, trm, trv, w, b), [x, w, b], device, tol=1e-4)

def test_batch_norm_without_running_stats(device):
  rng = np.random.default_rng(5)
  against_torch(lambda x: F.batch_norm(x, None, None, training=True), lambda x: TF.batch_norm(x, None, None, training=True),
                [rand(rng, 5, 3)], device, tol=1e-4)

@pytest.mark.parametrize("fn, grads", [
  (lambda x, w, b: F.layer_norm(x, (3,), w, b), [0, 1, 2]),
  (lambda x, w, b: F.group_norm(x.reshape(2, 3, 2), 3, w, b), [0, 1, 2]),
  (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [0, 1, 2]),
  (lambda x, w, b: F.rms_norm(x, (3,), w), [0, 1])])
def test_norm_finite_differences(fn, grads):
  rng = np.random.default_rng(6)
  finite_differences(fn, [rand(rng, 4, 3, dtype=np.float64), rand(rng, 3, dtype=np.float64), rand(rng, 3, dtype=np.float64)], grads, tol=1e-5)

def test_dropout(device):
  alloy.manual_seed(3)
  x = Tensor(np.ones((64, 64), np.float32), device=device, requires_grad=True)
  y = F.dropout(x, 0.25)
  v = y.numpy()
  kept = v != 0
  assert 0.7 < kept.mean() < 0.8
  np.testing.assert_allclose(v[kept], 1 / 0.75, rtol=1e-6)
  y.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), kept / 0.75, rtol=1e-6)   # the gradient passes where the value did
  alloy.manual_seed(3)
  np.testing.assert_array_equal(F.dropout(x, 0.25).numpy(), v)   # the same seed, the same mask
  assert F.dropout(x, 0.5, training=False) is x
  np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), 0)
  with pytest.raises(ValueError, match="between 0 and 1"): F.dropout(x, 1.5)

@pytest.mark.parametrize("variant", ["plain", "causal", "bool_mask", "float_mask", "scale", "cross", "gqa"])
def test_scaled_dot_product_attention(variant, device):
  rng = np.random.default_rng(7)
  q, k, v = rand(rng, 2, 4, 5, 8), rand(rng, 2, 4, 7 if variant == "cross" else 5, 8), rand(rng, 2, 4, 7 if variant == "cross" else 5, 6)
  if variant == "gqa": k, v = k[:, :2], v[:, :2]
  s = k.shape[2]
  mask = None
  if variant == "bool_mask": mask = rng.random((5, s)) > 0.3; mask[:, 0] = True
  if variant == "float_mask": mask = rand(rng, 2, 1, 5, s)
  kw = dict(is_causal=variant == "causal", scale=0.3 if variant == "scale" else None, enable_gqa=variant == "gqa")
  against_torch(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, **kw),
                lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, m, **kw), [q, k, v, mask], device, grads=[0, 1, 2], tol=1e-4)

def test_attention_finite_differences():
  rng = np.random.default_rng(8)
  finite_differences(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                     [rand(rng, 1, 3, 4, dtype=np.float64), rand(rng, 1, 3, 4, dtype=np.float64), rand(rng, 1, 3, 2, dtype=np.float64)], [0, 1, 2])

ACTIVATIONS = [("relu", {}), ("relu6", {}), ("leaky_relu", dict(negative_slope=0.2)), ("elu", dict(alpha=0.7)), ("selu", {}),
               ("celu", dict(alpha=1.3)), ("gelu", {}), ("gelu", dict(approximate="tanh")), ("silu", {}), ("mish", {}),
               ("sigmoid", {}), ("tanh", {}), ("hardtanh", dict(min_val=-0.5, max_val=1.5)), ("hardsigmoid", {}),
               ("hardswish", {}), ("softplus", dict(beta=2.0, threshold=3.0)), ("logsigmoid", {}), ("softsign", {}),
               ("tanhshrink", {}), ("threshold", dict(threshold=0.3, value=-1.0)), ("softmax", dict(dim=1)),
               ("log_softmax", dict(dim=0)), ("softmin", dict(dim=-1)), ("glu", dict(dim=-1)), ("normalize", {}),
               ("normalize", dict(p=1.0, dim=0))]

@pytest.mark.parametrize("name, kw", ACTIVATIONS, ids=[f"{n}{i}" for i, (n, _) in enumerate(ACTIVATIONS)])
def test_activations(name, kw, device):
  rng = np.random.default_rng(9)
  fn, tfn = getattr(F, name), getattr(TF, name)
  against_torch(lambda x: fn(x, **kw), lambda x: tfn(x, **kw), [rand(rng, 3, 6, low=-8, high=8)], device, tol=1e-5)

def test_activation_finite_differences():
  rng = np.random.default_rng(10)
  def chain(x): return F.mish(x) + F.elu(x) + F.softplus(x, 2.0) + F.logsigmoid(x) + F.hardswish(x) + F.gelu(x, "tanh") + F.softsign(x)
  finite_differences(chain, [rand(rng, 2, 5, dtype=np.float64)], [0])

def test_softmax_implicit_dim(device):
  x = rand(np.random.default_rng(11), 2, 3, 4)
  np.testing.assert_allclose(F.softmax(Tensor(x, device=device)).numpy(), TF.softmax(torch.tensor(x), dim=0).numpy(), rtol=1e-5)

@pytest.mark.parametrize("call, err, match", [
  (lambda x: F.layer_norm(x, (3,)), ValueError, "normalized_shape"),
  (lambda x: F.layer_norm(x, (4,), Tensor(np.ones(3, np.float32))), ValueError, "weight must have shape"),
  (lambda x: F.group_norm(x, 3), ValueError, "num_groups"),
  (lambda x: F.batch_norm(x, None, None), ValueError, "running_mean and running_var"),
  (lambda x: F.batch_norm(x[:1, :, :1], None, None, training=True), ValueError, "more than 1 value per channel"),
  (lambda x: F.relu(x.requires_grad_(), inplace=True), RuntimeError, "a leaf tensor that requires grad"),
  (lambda x: F.gelu(x, approximate="fast"), ValueError, "approximate"),
  (lambda x: F.hardtanh(x, 1.0, 0.0), ValueError, "min_val"),
  (lambda x: F.scaled_dot_product_attention(x, x, x, Tensor(np.ones((2, 2), bool)), is_causal=True), ValueError, "either attn_mask or is_causal"),
  (lambda x: F.scaled_dot_product_attention(x, x[..., :2], x), ValueError, "embedding size"),
  (lambda x: F.scaled_dot_product_attention(x, x, x, Tensor(np.ones((2, 2), bool), device="CPU:1")), ValueError, "attn_mask is on CPU:1, query on "),
  (lambda x: F.scaled_dot_product_attention(x, x, x, Tensor(np.ones((3, 5), bool))), ValueError, "cannot be broadcast")])
def test_norm_errors(call, err, match):
  x = Tensor(np.ones((2, 2, 4), np.float32))
  with pytest.raises(err, match=match): call(x)

def test_linear(device):
  rng = np.random.default_rng(12)
  x, w, b = rand(rng, 2, 3, 5), rand(rng, 4, 5), rand(rng, 4)
  against_torch(F.linear, TF.linear, [x, w, b], device, tol=1e-4)
  against_torch(F.linear, TF.linear, [x, w, None], device, tol=1e-4)
  with pytest.raises(ValueError, match="in_features"): F.linear(Tensor(x), Tensor(w[:, :3]))

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode, device):
  x = rand(np.random.default_rng(13), 2, 3, 5, 4)
  for p, t in (((1, 2), x[0]), ((2, 1, 0, 3), x), ((1, 1, 2, 2), x), ((3, 0), x[:, 0])):
    against_torch(lambda x: F.pad(x, p, mode=mode), lambda x: TF.pad(x, p, mode=mode), [t], device)
  if mode == "constant":
    against_torch(lambda x: F.pad(x, (1, -2, -1, 2), value=0.5), lambda x: TF.pad(x, (1, -2, -1, 2), value=0.5), [x], device)

def test_pixel_shuffle_and_similarity(device):
  rng = np.random.default_rng(14)
  x = rand(rng, 2, 8, 3, 5)
  against_torch(lambda x: F.pixel_shuffle(x, 2), lambda x: TF.pixel_shuffle(x, 2), [x], device)
  against_torch(lambda x: F.pixel_unshuffle(x, 3), lambda x: TF.pixel_unshuffle(x, 3), [rand(rng, 1, 2, 6, 9)], device)
  a, b = rand(rng, 4, 6), rand(rng, 4, 6)
  against_torch(F.cosine_similarity, TF.cosine_similarity, [a, b], device)
  against_torch(F.pairwise_distance, TF.pairwise_distance, [a, b], device)

def test_pad_and_linear_finite_differences():
  rng = np.random.default_rng(15)
  finite_differences(lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect") + F.pad(x, (2, 1, 1, 2), mode="replicate"),
                     [rand(rng, 1, 1, 3, 4, dtype=np.float64)], [0])
  finite_differences(F.linear, [rand(rng, 2, 3, dtype=np.float64), rand(rng, 4, 3, dtype=np.float64), rand(rng, 4, dtype=np.float64)], [0, 1, 2])

def test_layer_norm_gradients_realized_together(device):
  """The optimizer realizes every gradient in one schedule: there layer_norm's input gradient is one row kernel with
  two reductions, whose vector code once broadcast a scalar before it was defined (codegen/vectorize.py)."""
  rng = np.random.default_rng(16)
  x, w, b, probe = rand(rng, 64, 32), rand(rng, 32), rand(rng, 32), rand(rng, 64, 32)
  xs = [Tensor(a, device=device, requires_grad=True) for a in (x, w, b)]
  (F.layer_norm(xs[0], (32,), xs[1], xs[2]) * Tensor(probe, device=device)).sum().backward()
  realize([t.grad for t in xs])
  ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
  (TF.layer_norm(ts[0], (32,), ts[1], ts[2]) * torch.tensor(probe)).sum().backward()
  for a, t in zip(xs, ts): np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)
