"""Module forward hooks and pre-hooks with PyTorch's semantics: the order they run in (prepend), a hook's return
replacing the input or the output, with_kwargs, removal by handle or a with block; a hook that collects features
from a model's layers."""
import numpy as np
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
