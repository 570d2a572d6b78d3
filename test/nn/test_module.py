"""nn.Module and the layers without nn.functional: the tree (parameters, buffers, children, modules, names), modes,
state_dict and load_state_dict with named errors, to(), zero_grad, the containers, and Linear / activations /
Flatten against torch.nn with copied weights (forward and gradients), on every present device."""
import math
import numpy as np, pytest
import alloy
from alloy import Tensor, nn
from conftest import assert_close

torch = pytest.importorskip("torch")

class Block(nn.Module):
  def __init__(self):
    super().__init__()
    self.fc = nn.Linear(4, 3)
    self.act = nn.Tanh()
    self.register_buffer("scale", Tensor(np.full(3, 2.0, np.float32)))
    self.register_buffer("scratch", Tensor(np.zeros(2, np.float32)), persistent=False)
  def forward(self, x): return self.act(self.fc(x)) * self.scale

class Net(nn.Module):
  def __init__(self):
    super().__init__()
    self.blocks = nn.ModuleList([Block(), Block()])
    self.head = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    self.shared = self.head[0]   # the same module twice: listed once
  def forward(self, x):
    return self.head(self.blocks[0](x) + self.blocks[1](x))

def test_tree_names_and_counts():
  net = Net()
  names = [k for k, _ in net.named_parameters()]
  assert names == ["blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.fc.weight", "blocks.1.fc.bias",
                   "head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias"]
  assert len(list(net.parameters())) == 8
  assert [k for k, _ in net.named_buffers()] == ["blocks.0.scale", "blocks.0.scratch", "blocks.1.scale", "blocks.1.scratch"]
  assert [k for k, _ in net.named_children()] == ["blocks", "head", "shared"]   # head.0 again, but a direct child
  assert [k for k, _ in net.named_modules()] == ["", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.act", "blocks.1", "blocks.1.fc",
                                                 "blocks.1.act", "head", "head.0", "head.1", "head.2"]
  sd = net.state_dict()
  assert "blocks.0.scratch" not in sd and "blocks.0.scale" in sd and "shared.weight" in sd   # state_dict keeps aliases, as torch
  assert all(p.requires_grad for p in net.parameters()) and not any(t.requires_grad for t in sd.values())
  assert net.get_submodule("blocks.1.fc") is net.blocks[1].fc
  with pytest.raises(AttributeError, match="no submodule 'nope'"): net.get_submodule("blocks.nope")

def test_setattr_registration_and_errors():
  m = nn.Module()
  m.w = nn.Parameter(Tensor.ones(2))
  m.sub = nn.Linear(2, 2)
  m.plain = 3
  assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"] and m.plain == 3
  with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'w'"): m.w = Tensor.ones(2)
  m.w = None
  assert list(m.parameters()) == list(m.sub.parameters())
  del m.sub
  assert not list(m.children())
  with pytest.raises(AttributeError, match="no attribute 'missing'"): _ = m.missing
  class Early(nn.Module):
    def __init__(self): self.fc = nn.Linear(1, 1)
  with pytest.raises(AttributeError, match=r"before Module.__init__\(\)"): Early()
  with pytest.raises(KeyError, match="without '.'"): m.register_buffer("a.b", Tensor.ones(1))
  with pytest.raises(TypeError, match="must be a Parameter"): m.register_parameter("p", Tensor.ones(1))
  with pytest.raises(NotImplementedError, match="no forward"): nn.Module()(1)

def test_train_eval_and_zero_grad():
  net = Net()
  assert all(m.training for m in net.modules())
  assert net.eval() is net and not any(m.training for m in net.modules())
  net.train()
  assert all(m.training for m in net.modules())
  x = Tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
  net(x).sum().backward()
  assert all(p.grad is not None for p in net.parameters())
  net.zero_grad(set_to_none=False)
  assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
  net.zero_grad()
  assert all(p.grad is None for p in net.parameters())

def _copy_from_torch(mine: nn.Module, theirs) -> None:
  mine.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})

def test_state_dict_round_trip_and_errors():
  a, b = Net(), Net()
  b.load_state_dict(a.state_dict())
  for (k, p), (k2, q) in zip(a.state_dict().items(), b.state_dict().items()):
    assert k == k2
    np.testing.assert_array_equal(p.numpy(), q.numpy())
  weight = b.head[0].weight
  sd = a.state_dict()
  b.load_state_dict(sd)
  assert b.head[0].weight is weight, "loading keeps the parameter objects (the optimizer's handles)"
  partial = {k: v for k, v in sd.items() if k != "head.2.bias"}
  with pytest.raises(RuntimeError, match=r"Missing key\(s\) in state_dict: 'head.2.bias'"): b.load_state_dict(partial)
  with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: 'extra'"): b.load_state_dict({**sd, "extra": np.zeros(1)})
  res = b.load_state_dict({**partial, "extra": np.zeros(1)}, strict=False)
  assert res.missing_keys == ["head.2.bias"] and res.unexpected_keys == ["extra"]
  bad = {**sd, "head.0.weight": np.zeros((3, 3), np.float32)}
  with pytest.raises(RuntimeError, match=r"size mismatch for head.0.weight: copying a value of shape \(3, 3\), the shape in this module is \(5, 3\)"):
    b.load_state_dict(bad, strict=False)
  with pytest.raises(TypeError, match="expected a mapping"): b.load_state_dict([1, 2])

def test_torch_state_dict_loads_and_matches(device):
  rng = np.random.default_rng(1)
  tnet = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 3),
                             torch.nn.Sigmoid(), torch.nn.Flatten(0))
  anet = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 3), nn.Sigmoid(), nn.Flatten(0)).to(device)
  _copy_from_torch(anet, tnet)
  x = rng.standard_normal((4, 6)).astype(np.float32)
  xt = torch.tensor(x, requires_grad=True)
  xa = Tensor(x, device=device, requires_grad=True)
  yt, ya = tnet(xt), anet(xa)
  assert_close(ya.numpy(), yt.detach().numpy(), atol=1e-5, rtol=1e-5)
  w = rng.standard_normal(yt.shape).astype(np.float32)
  (yt * torch.tensor(w)).sum().backward()
  (ya * Tensor(w, device=device)).sum().backward()
  assert_close(xa.grad.numpy(), xt.grad.numpy(), atol=1e-5, rtol=1e-4)
  for (name, p), (_, q) in zip(anet.named_parameters(), tnet.named_parameters()):
    assert_close(p.grad.numpy(), q.grad.numpy(), atol=1e-5, rtol=1e-4), name

@pytest.mark.parametrize("mod,ref", [("ReLU", {}), ("Tanh", {}), ("Sigmoid", {}), ("SiLU", {}), ("GELU", {"approximate": "tanh"}),
                                     ("Softmax", {"dim": 1}), ("LogSoftmax", {"dim": -1}), ("Identity", {})])
def test_activation_modules(device, mod, ref):
  x = np.random.default_rng(2).uniform(-3, 3, (3, 5)).astype(np.float32)
  got = getattr(nn, mod)(**ref)(Tensor(x, device=device)).numpy()
  assert_close(got, getattr(torch.nn, mod)(**ref)(torch.tensor(x)).numpy(), atol=1e-5, rtol=1e-5)

def test_linear_default_init_follows_torch():
  """kaiming_uniform(a=sqrt(5)) is uniform(+-1/sqrt(fan_in)), the bias too: the bounds hold, and the spread is
  the uniform's (std = bound / sqrt(3)), as torch's."""
  alloy.manual_seed(0)
  fan_in = 64
  lin = nn.Linear(fan_in, 512)
  w, b = lin.weight.numpy(), lin.bias.numpy()
  bound = 1 / math.sqrt(fan_in)
  assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
  assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound and abs(w.mean()) < 0.02 * bound
  tw = torch.nn.Linear(fan_in, 512).weight.detach().numpy()
  assert abs(w.std() - tw.std()) < 0.03 * bound
  assert lin.weight.dtype is alloy.float32 and lin.weight.shape == (512, 64) and lin.bias.shape == (512,)
  assert nn.Linear(3, 2, bias=False).bias is None
  with pytest.raises(ValueError, match="in_features must be a non-negative int"): nn.Linear(-1, 2)
  with pytest.raises(ValueError, match="last dimension must be in_features=3"): nn.Linear(3, 2)(Tensor.ones(2, 4))

def test_init_functions():
  alloy.manual_seed(1)
  t = nn.Parameter(Tensor.empty(300, 200))
  for fn, std in ((lambda: nn.init.xavier_uniform_(t), math.sqrt(2 / 500)), (lambda: nn.init.xavier_normal_(t), math.sqrt(2 / 500)),
                  (lambda: nn.init.kaiming_normal_(t, nonlinearity="relu"), math.sqrt(2 / 200)),
                  (lambda: nn.init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), math.sqrt(2 / 300)),
                  (lambda: nn.init.normal_(t, 1.0, 0.5), 0.5), (lambda: nn.init.trunc_normal_(t, std=1.0), 0.8796)):
    assert fn() is t and t.requires_grad
    assert abs(t.numpy().std() - std) < 0.03 * std
  assert np.abs(t.numpy()).max() <= 2   # trunc_normal_ keeps within [a, b] = [-2, 2]
  nn.init.uniform_(t, -0.1, 0.3)
  v = t.numpy()
  assert v.min() >= -0.1 and v.max() <= 0.3 and abs(v.mean() - 0.1) < 0.005
  nn.init.constant_(t, 0.25)
  assert np.all(t.numpy() == 0.25)
  nn.init.zeros_(t); nn.init.ones_(t)
  assert np.all(t.numpy() == 1)
  assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04) and nn.init.calculate_gain("tanh") == 5 / 3
  assert nn.init.calculate_fan_in_and_fan_out(Tensor.empty(8, 4, 3, 3)) == (36, 72)
  with pytest.raises(ValueError, match="at least 2 dimensions"): nn.init.xavier_uniform_(Tensor.empty(3))
  # orthogonal_: orthonormal rows (wide) or columns (tall) times the gain, the rest of the dims flattened
  for shape in ((4, 6), (6, 4), (3, 2, 5)):
    w = nn.Parameter(Tensor.empty(*shape))
    assert nn.init.orthogonal_(w, gain=2.0) is w and w.requires_grad
    m = w.numpy().reshape(shape[0], -1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4 * np.eye(len(gram)), atol=1e-5)
  with pytest.raises(ValueError, match="orthogonal_: only tensors with 2 or more dimensions"): nn.init.orthogonal_(Tensor.empty(3))
  with pytest.raises(ValueError, match="unsupported nonlinearity"): nn.init.calculate_gain("swish")

def test_to_moves_and_casts_keeping_objects(device):
  net = Block()
  w = net.fc.weight
  net.to(device)
  assert net.fc.weight is w and w.device == device and net.scale.device == device
  before = w.numpy()
  net.half()
  assert w.dtype is alloy.float16 and w.requires_grad and net.scale.dtype is alloy.float16
  # the casts are computed by the call, as PyTorch's (a lazy cast would be recomputed by every forward): each parameter
  # and buffer is then a buffer of its own
  from alloy.ir.node import views_a_buffer
  assert all(views_a_buffer(t.node) for t in [*net.parameters(), *net.buffers()])
  np.testing.assert_array_equal(w.numpy(), before.astype(np.float16))
  net.load_state_dict({k: v.float() for k, v in net.state_dict().items()})   # float32 values cast to float16 on load
  assert w.dtype is alloy.float16 and views_a_buffer(w.node)
  net.float()
  assert w.dtype is alloy.float32
  with pytest.raises(TypeError, match="only floating point"): net.to(dtype="int32")

@pytest.mark.parametrize("start", ["CPU", "CPU:1"])
def test_buffers_moved_by_to_take_in_place_updates(device, start):
  """A buffer made as a view (num_batches_tracked) and moved by Module.to is a tensor of its own on the new device:
  an in-place update writes there, not into the base it was a view of on the old one."""
  bn = nn.BatchNorm2d(3).to(start).to(device)
  assert bn.num_batches_tracked.device == device
  bn.num_batches_tracked.copy_(bn.num_batches_tracked + 1)
  bn.running_mean.mul_(2.0).add_(1.0)
  assert int(bn.num_batches_tracked.item()) == 1 and np.allclose(bn.running_mean.numpy(), 1.0)

def test_containers():
  seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
  assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and len(seq[1:]) == 2 and [k for k, _ in seq[1:].named_children()] == ["1", "2"]
  seq.append(nn.Sigmoid())
  assert len(seq) == 4 and isinstance(list(seq)[3], nn.Sigmoid)
  del seq[3]
  assert len(seq) == 3
  with pytest.raises(IndexError, match="out of range"): seq[5]
  from collections import OrderedDict
  named = nn.Sequential(OrderedDict(first=nn.Linear(2, 2), act=nn.ReLU()))
  assert [k for k, _ in named.named_children()] == ["first", "act"]
  ml = nn.ModuleList([nn.Linear(1, 1)])
  ml.append(nn.ReLU()); ml.extend([nn.Tanh()]); ml.insert(0, nn.Identity())
  assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "ReLU", "Tanh"]
  assert [k for k, _ in ml.named_parameters()] == ["1.weight", "1.bias"]
  del ml[0]
  assert [k for k, _ in ml.named_parameters()] == ["0.weight", "0.bias"]
  md = nn.ModuleDict({"enc": nn.Linear(2, 2), "act": nn.ReLU()})
  md["dec"] = nn.Linear(2, 1)
  assert list(md.keys()) == ["enc", "act", "dec"] and "dec" in md and len(md) == 3
  assert [k for k, _ in md.named_parameters()] == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
  assert "Linear(in_features=2, out_features=1, bias=True)" in repr(md)

def test_parameter():
  p = nn.Parameter(Tensor.ones(3))
  assert isinstance(p, Tensor) and p.requires_grad and p.is_leaf
  assert not nn.Parameter(Tensor.ones(2), requires_grad=False).requires_grad
  assert nn.Parameter(np.zeros((2, 2), np.float32)).shape == (2, 2)
  import copy
  q = copy.deepcopy(p)
  assert isinstance(q, nn.Parameter) and q.requires_grad and q is not p and np.all(q.numpy() == 1)
