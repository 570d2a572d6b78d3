"""Module forward hooks and pre-hooks with PyTorch's semantics: the order they run in (prepend), a hook's return
replacing the input or the output, with_kwargs, removal by handle or a with block; a hook that collects features
from a model's layers; and the full backward hooks and pre-hooks against torch's (what they see, what their returns
replace)."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn

def test_forward_hooks_order_replace_and_remove():
  layer = nn.Linear(3, 2)
  seen = []
  h1 = layer.register_forward_pre_hook(lambda m, args: seen.append("pre1"))
  layer.register_forward_pre_hook(lambda m, args: (seen.append("pre0"), (args[0] * 0,))[1], prepend=True)
  layer.register_forward_hook(lambda m, args, out: seen.append(("post", tuple(out.shape))))
  h4 = layer.register_forward_hook(lambda m, args, out: out + 1)
  x = Tensor(np.ones((4, 3), np.float32))
  y = layer(x)
  assert seen == ["pre0", "pre1", ("post", (4, 2))]
  np.testing.assert_allclose(y.numpy(), np.broadcast_to(layer.bias.numpy() + 1, (4, 2)), rtol=1e-6)   # the input zeroed, the output + 1
  h1.remove(); h4.remove()
  seen.clear()
  layer._forward_pre_hooks.clear(), layer._forward_hooks.clear()
  np.testing.assert_allclose(layer(x).numpy(), (x @ layer.weight.T + layer.bias).numpy())
  assert seen == []

def test_with_kwargs_and_context_manager():
  class Scale(nn.Module):
    def forward(self, x, factor=1.0): return x * factor
  m = Scale()
  def pre(mod, args, kwargs): return args, {**kwargs, "factor": 3.0}
  def post(mod, args, kwargs, out): return out + kwargs["factor"]
  with m.register_forward_pre_hook(pre, with_kwargs=True), m.register_forward_hook(post, with_kwargs=True):
    np.testing.assert_allclose(m(Tensor(np.ones(2, np.float32)), factor=2.0).numpy(), [6.0, 6.0])
  np.testing.assert_allclose(m(Tensor(np.ones(2, np.float32)), factor=2.0).numpy(), [2.0, 2.0])

def test_feature_extraction():
  alloy.manual_seed(0)
  model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
  features = {}
  handles = [m.register_forward_hook(lambda mod, args, out, name=name: features.__setitem__(name, out)) for name, m in model.named_children()]
  x = Tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
  out = model(x)
  assert sorted(features) == ["0", "1", "2"]
  np.testing.assert_allclose(features["1"].numpy(), np.maximum(features["0"].numpy(), 0))
  np.testing.assert_allclose(features["2"].numpy(), out.numpy())
  for h in handles: h.remove()

def _backward_run(lib, arrays, weights, requires_grad=True):
  """A chain of two Linear layers with a backward pre-hook (doubling grad_output) and full hooks (adding 1 to
  grad_input), in alloy or torch: what each hook saw, in order, and the gradients that came out."""
  T = Tensor if lib is alloy else lib.tensor
  first, second = lib.nn.Linear(4, 3), lib.nn.Linear(3, 2)
  for layer, (w, b) in zip((first, second), weights):
    if lib is alloy: layer.load_state_dict({"weight": Tensor(w), "bias": Tensor(b)})
    else:
      with lib.no_grad(): layer.weight.copy_(lib.from_numpy(w)); layer.bias.copy_(lib.from_numpy(b))
  seen = []
  def arrays_of(gs): return [None if g is None else g.numpy().copy() for g in gs]
  def pre(m, grad_output):
    seen.append(("pre", arrays_of(grad_output)))
    return (grad_output[0] * 2,)
  def full(m, grad_input, grad_output):
    seen.append(("full", arrays_of(grad_input), arrays_of(grad_output)))
    return (grad_input[0] + 1,) if grad_input[0] is not None else None
  second.register_full_backward_pre_hook(pre)
  second.register_full_backward_hook(full)
  first.register_full_backward_hook(full)
  x = T(arrays[0], requires_grad=requires_grad)
  (second(first(x)) * T(arrays[1])).sum().backward()
  return seen, (x.grad.numpy() if requires_grad else None), first.weight.grad.numpy()

@pytest.mark.filterwarnings("ignore:Full backward hook is firing")   # torch's, for the input that does not require grad
@pytest.mark.parametrize("requires_grad", [True, False])
def test_full_backward_hooks_match_torch(requires_grad):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(0)
  arrays = [rng.standard_normal(s).astype(np.float32) for s in ((5, 4), (5, 2))]
  weights = [tuple(rng.standard_normal(s).astype(np.float32) for s in shapes) for shapes in (((3, 4), (3,)), ((2, 3), (2,)))]
  ours, theirs = _backward_run(alloy, arrays, weights, requires_grad), _backward_run(torch, arrays, weights, requires_grad)
  assert [e[0] for e in ours[0]] == [e[0] for e in theirs[0]] == ["pre", "full", "full"]
  for a, t in zip(ours[0], theirs[0]):   # grad_input holds None for an input that does not require grad, in both
    for xs, ys in zip(a[1:], t[1:]):
      assert [x is None for x in xs] == [y is None for y in ys]
      for x, y in zip(xs, ys):
        if x is not None: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  if requires_grad: np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)

def test_backward_hooks_with_two_inputs_and_removal():
  # Bilinear takes two tensors: its hook sees both gradients at once, final, whichever order backward reaches them
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(1)
  ours, theirs = nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2)
  ours.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  a, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
  def go(lib, layer):
    seen = []
    handle = layer.register_full_backward_hook(lambda m, gi, go: seen.append([g.numpy().copy() for g in gi]))
    T = Tensor if lib is alloy else torch.tensor
    x1, x2 = T(a, requires_grad=True), T(b, requires_grad=True)
    (layer(x1, x2 * 2) ** 2).sum().backward()   # the second input reaches the layer through an op
    handle.remove()
    (layer(x1, x2) ** 2).sum().backward()   # removed: nothing more seen
    return seen
  got, want = go(alloy, ours), go(torch, theirs)
  assert len(got) == len(want) == 1
  for x, y in zip(got[0], want[0]): np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
