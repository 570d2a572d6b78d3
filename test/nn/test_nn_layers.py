"""The layers over nn.functional against torch.nn with the same weights (torch's state dict loaded into alloy's
module): outputs, input gradients and parameter gradients, on every present device; running statistics of batch
norm through train and eval; default parameter shapes, names and initial values; the errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn
from conftest import assert_close

torch = pytest.importorskip("torch")

def _pair(mine, theirs, device):
  mine.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
  return mine.to(device)

def _check(mine, theirs, x, device, grads=True, atol=1e-4, rtol=1e-4, **kw):
  """Same output, and the same gradients of a weighted sum of it for the input and every parameter."""
  xt = torch.tensor(x, requires_grad=grads)
  xa = Tensor(x, device=device, requires_grad=grads)
  yt, ya = theirs(xt, **kw), mine(xa, **kw)
  if isinstance(yt, tuple): yt, ya = yt[0], ya[0]
  if grads:   # backward before the output is read (main's autograd loses an output's op once it is realized)
    w = np.random.default_rng(9).standard_normal(tuple(yt.shape)).astype(np.float32)
    (yt * torch.tensor(w)).sum().backward()
    (ya * Tensor(w, device=device)).sum().backward()
  assert_close(ya.numpy(), yt.detach().numpy(), atol=atol, rtol=rtol)
  if not grads: return
  assert_close(xa.grad.numpy(), xt.grad.numpy(), atol=atol, rtol=rtol)
  theirs_params = dict(theirs.named_parameters())
  for name, p in mine.named_parameters():
    assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), atol=atol, rtol=rtol)

def _x(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

CONVS = [
  ("Conv1d", dict(in_channels=3, out_channels=4, kernel_size=3, padding=1), (2, 3, 9)),
  ("Conv2d", dict(in_channels=3, out_channels=6, kernel_size=3, stride=2, padding=1, groups=3), (2, 3, 8, 7)),
  ("Conv2d", dict(in_channels=2, out_channels=4, kernel_size=(3, 2), dilation=2, bias=False, padding="same"), (1, 2, 7, 6)),
  ("ConvTranspose2d", dict(in_channels=4, out_channels=2, kernel_size=3, stride=2, padding=1, output_padding=1), (2, 4, 5, 5)),
  ("ConvTranspose1d", dict(in_channels=2, out_channels=3, kernel_size=4, stride=2), (2, 2, 6)),
]

@pytest.mark.parametrize("name,kw,shape", CONVS)
def test_convolutions_match_torch(device, name, kw, shape):
  torch.manual_seed(0)
  theirs = getattr(torch.nn, name)(**kw)
  mine = _pair(getattr(nn, name)(**kw), theirs, device)
  assert [k for k, _ in mine.named_parameters()] == [k for k, _ in theirs.named_parameters()]
  _check(mine, theirs, _x(*shape), device)

def test_conv_default_init_bounds():
  alloy.manual_seed(0)
  c = nn.Conv2d(16, 32, 3)
  bound = 1 / np.sqrt(16 * 9)
  w = c.weight.numpy()
  assert c.weight.shape == (32, 16, 3, 3) and np.abs(w).max() <= bound and abs(w.std() - bound / np.sqrt(3)) < 0.05 * bound
  assert np.abs(c.bias.numpy()).max() <= bound
  assert nn.ConvTranspose2d(4, 6, 3, groups=2).weight.shape == (4, 3, 3, 3)
  with pytest.raises(ValueError, match="divisible by groups"): nn.Conv2d(3, 4, 3, groups=2)
  assert nn.Conv2d(3, 4, 3, padding_mode="reflect").padding_mode == "reflect"   # the modes' values: test_more_layers.py

@pytest.mark.parametrize("name,args,shape", [("LayerNorm", (6,), (3, 4, 6)), ("LayerNorm", ((4, 6),), (2, 4, 6)),
                                             ("GroupNorm", (2, 6), (3, 6, 5)), ("RMSNorm", (6,), (3, 6)),
                                             ("BatchNorm1d", (6,), (5, 6)), ("BatchNorm1d", (6,), (4, 6, 3)), ("BatchNorm2d", (3,), (4, 3, 5, 5))])
def test_norms_match_torch(device, name, args, shape):
  theirs = getattr(torch.nn, name)(*args)
  with torch.no_grad():   # non-trivial affine parameters
    for p in theirs.parameters(): p.copy_(torch.randn_like(p))
  mine = _pair(getattr(nn, name)(*args), theirs, device)
  _check(mine, theirs, _x(*shape) * 3 + 1, device)

def test_batchnorm_running_stats_and_eval(device):
  theirs, mine = torch.nn.BatchNorm2d(3, momentum=0.3), nn.BatchNorm2d(3, momentum=0.3).to(device)
  for step in range(3):
    x = _x(4, 3, 5, 5, seed=step) * (step + 1) + step
    assert_close(mine(Tensor(x, device=device)).numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-4, rtol=1e-4)
  for k in ("running_mean", "running_var"): assert_close(getattr(mine, k).numpy(), getattr(theirs, k).numpy(), atol=1e-5, rtol=1e-5)
  assert mine.num_batches_tracked.item() == 3 and mine.state_dict()["num_batches_tracked"].dtype is alloy.int64
  mine.eval(); theirs.eval()
  x = _x(2, 3, 5, 5, seed=7)
  assert_close(mine(Tensor(x, device=device)).numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-4, rtol=1e-4)
  # a cumulative average (momentum=None) and no running statistics at all
  for kw in (dict(momentum=None), dict(track_running_stats=False)):
    theirs, mine = torch.nn.BatchNorm1d(4, **kw), nn.BatchNorm1d(4, **kw).to(device)
    for step in range(3):
      x = _x(6, 4, seed=step) + step
      assert_close(mine(Tensor(x, device=device)).numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-4, rtol=1e-4)
    if kw.get("momentum", 0.1) is None: assert_close(mine.running_var.numpy(), theirs.running_var.numpy(), atol=1e-5, rtol=1e-5)
    else: assert "running_mean" not in mine.state_dict()
  with pytest.raises(ValueError, match="expected a 4D input"): nn.BatchNorm2d(3)(Tensor(_x(2, 3)))

def test_embedding_and_dropout(device):
  theirs = torch.nn.Embedding(10, 4, padding_idx=2)
  mine = _pair(nn.Embedding(10, 4, padding_idx=2), theirs, device)
  idx = np.array([[1, 2, 9], [2, 0, 1]])
  yt, ya = theirs(torch.tensor(idx)), mine(Tensor(idx, device=device))
  w = _x(2, 3, 4)
  (yt * torch.tensor(w)).sum().backward(); (ya * Tensor(w, device=device)).sum().backward()
  assert_close(ya.numpy(), yt.detach().numpy())
  assert_close(mine.weight.grad.numpy(), theirs.weight.grad.numpy())
  alloy.manual_seed(0)
  fresh = nn.Embedding(50, 8, padding_idx=3)
  v = fresh.weight.numpy()
  assert np.all(v[3] == 0) and abs(v.std() - 1) < 0.15
  frozen = nn.Embedding.from_pretrained(Tensor(_x(5, 3)))
  assert not frozen.weight.requires_grad and frozen.weight.shape == (5, 3)
  drop = nn.Dropout(0.25).to(device)
  x = Tensor(np.ones((200, 50), np.float32), device=device)
  y = drop(x).numpy()
  assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)} and abs((y == 0).mean() - 0.25) < 0.02
  drop.eval()
  assert drop(x) is x
  with pytest.raises(ValueError, match="between 0 and 1"): nn.Dropout(1.5)

POOLS = [("MaxPool2d", dict(kernel_size=2), (2, 3, 6, 6)), ("MaxPool2d", dict(kernel_size=3, stride=2, padding=1), (1, 2, 7, 7)),
         ("AvgPool2d", dict(kernel_size=2), (2, 3, 6, 6)),
         ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False), (1, 2, 7, 7)),
         ("AdaptiveAvgPool2d", dict(output_size=(1, 1)), (2, 3, 5, 5)), ("AdaptiveAvgPool2d", dict(output_size=3), (2, 3, 7, 8)),
         ("MaxPool1d", dict(kernel_size=2), (2, 3, 8)), ("AvgPool1d", dict(kernel_size=3), (2, 3, 9))]

@pytest.mark.parametrize("name,kw,shape", POOLS)
def test_pools_match_torch(device, name, kw, shape):
  _check(getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), _x(*shape), device)

@pytest.mark.parametrize("name,kw", [("LeakyReLU", dict(negative_slope=0.2)), ("ELU", {}), ("SELU", {}), ("Softplus", dict(beta=2.0)),
                                     ("Hardtanh", {}), ("ReLU6", {}), ("Mish", {}), ("Hardswish", {}), ("Hardsigmoid", {})])
def test_functional_activations_match_torch(device, name, kw):
  x = np.random.default_rng(1).uniform(-8, 8, (4, 7)).astype(np.float32)
  _check(getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), x, device, atol=1e-5, rtol=1e-4)

@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(device, batch_first):
  torch.manual_seed(0)
  theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
  mine = _pair(nn.MultiheadAttention(8, 2, batch_first=batch_first), theirs, device)
  assert [k for k, _ in mine.named_parameters()] == [k for k, _ in theirs.named_parameters()]
  x = _x(3, 5, 8)
  for kw in (dict(need_weights=True), dict(need_weights=False)):
    xt, xa = torch.tensor(x), Tensor(x, device=device)
    (ot, wt), (oa, wa) = theirs(xt, xt, xt, **kw), mine(xa, xa, xa, **kw)
    assert_close(oa.numpy(), ot.detach().numpy(), atol=1e-5, rtol=1e-4)
    if wt is not None: assert_close(wa.numpy(), wt.detach().numpy(), atol=1e-5, rtol=1e-4)
    else: assert wa is None
  n, l = (3, 5) if batch_first else (5, 3)
  causal = np.triu(np.ones((l, l), bool), 1)
  padding = np.zeros((n, l), bool); padding[0, -1] = True
  xt, xa = torch.tensor(x, requires_grad=True), Tensor(x, device=device, requires_grad=True)
  (ot, wt) = theirs(xt, xt, xt, attn_mask=torch.tensor(causal), key_padding_mask=torch.tensor(padding), average_attn_weights=False)
  (oa, wa) = mine(xa, xa, xa, attn_mask=Tensor(causal, device=device), key_padding_mask=Tensor(padding, device=device), average_attn_weights=False)
  ot.sum().backward(); oa.sum().backward()
  assert_close(oa.numpy(), ot.detach().numpy(), atol=1e-5, rtol=1e-4)
  assert_close(wa.numpy(), wt.detach().numpy(), atol=1e-5, rtol=1e-4)
  assert_close(xa.grad.numpy(), xt.grad.numpy(), atol=1e-4, rtol=1e-4)
  assert_close(mine.in_proj_weight.grad.numpy(), theirs.in_proj_weight.grad.numpy(), atol=1e-4, rtol=1e-4)
  unbatched = _x(4, 8)
  assert_close(mine(Tensor(unbatched, device=device), Tensor(unbatched, device=device), Tensor(unbatched, device=device))[0].numpy(),
               theirs(torch.tensor(unbatched), torch.tensor(unbatched), torch.tensor(unbatched))[0].detach().numpy(), atol=1e-5, rtol=1e-4)
  with pytest.raises(ValueError, match="positive multiple of num_heads"): nn.MultiheadAttention(10, 3)

@pytest.mark.parametrize("extra", [dict(add_bias_kv=True), dict(add_zero_attn=True), dict(add_bias_kv=True, add_zero_attn=True)])
def test_multihead_attention_extra_keys_match_torch(device, extra):
  torch.manual_seed(1)
  theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True, **extra)
  mine = _pair(nn.MultiheadAttention(8, 2, batch_first=True, **extra), theirs, device)
  assert [k for k, _ in mine.named_parameters()] == [k for k, _ in theirs.named_parameters()]
  x, kv = _x(2, 3, 8), _x(2, 4, 8) * 0.5
  padding = np.zeros((2, 4), bool); padding[1, 0] = True
  causal = np.triu(np.ones((3, 4), bool), 1)
  masked = dict(attn_mask=causal, key_padding_mask=padding, average_attn_weights=False)
  for kw in (dict(), masked, dict(key_padding_mask=padding, need_weights=False)):
    xt, kt = torch.tensor(x, requires_grad=True), torch.tensor(kv)
    xa, ka = Tensor(x, device=device, requires_grad=True), Tensor(kv, device=device)
    ot, wt = theirs(xt, kt, kt, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    oa, wa = mine(xa, ka, ka, **{k: Tensor(v, device=device) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    (ot * ot).sum().backward(); (oa * oa).sum().backward()
    assert_close(oa.numpy(), ot.detach().numpy(), atol=1e-5, rtol=1e-4)
    if wt is not None: assert_close(wa.numpy(), wt.detach().numpy(), atol=1e-5, rtol=1e-4)
    assert_close(xa.grad.numpy(), xt.grad.numpy(), atol=1e-4, rtol=1e-4)
    if mine.bias_k is not None: assert_close(mine.bias_k.grad.numpy(), theirs.bias_k.grad.numpy(), atol=1e-4, rtol=1e-4)
    mine.zero_grad(); theirs.zero_grad()
  alloy.manual_seed(0)
  fresh = nn.MultiheadAttention(64, 4, add_bias_kv=True)
  drawn = np.concatenate([fresh.bias_k.numpy().ravel(), fresh.bias_v.numpy().ravel()])
  assert fresh.bias_k.shape == (1, 1, 64) and 0.09 < drawn.std() < 0.16   # xavier-normal: std sqrt(2 / (64 + 64))

def test_multihead_attention_init():
  alloy.manual_seed(0)
  m = nn.MultiheadAttention(64, 4)
  bound = np.sqrt(6 / (64 + 192))
  w = m.in_proj_weight.numpy()
  assert m.in_proj_weight.shape == (192, 64) and np.abs(w).max() <= bound and np.all(m.in_proj_bias.numpy() == 0)
  assert np.all(m.out_proj.bias.numpy() == 0)

@pytest.mark.parametrize("name,kw", [("CrossEntropyLoss", {}), ("CrossEntropyLoss", dict(label_smoothing=0.1, reduction="sum")), ("NLLLoss", {}),
                                     ("MSELoss", {}), ("L1Loss", dict(reduction="none")), ("SmoothL1Loss", dict(beta=0.5)), ("HuberLoss", {}),
                                     ("BCEWithLogitsLoss", {}), ("KLDivLoss", dict(reduction="batchmean"))])
def test_loss_modules_match_torch(name, kw):
  x = _x(4, 5)
  classes = name in ("CrossEntropyLoss", "NLLLoss")
  target = np.array([1, 0, 4, 2]) if classes else (np.random.default_rng(2).uniform(0, 1, (4, 5)).astype(np.float32))
  if name == "KLDivLoss": x = np.log(np.abs(x) + 0.1).astype(np.float32)
  if name == "NLLLoss": x = torch.log_softmax(torch.tensor(x), -1).numpy()
  if kw.get("reduction") == "batchmean": pytest.skip("reduction='batchmean' goes through nn.functional.kl_div")
  got = getattr(nn, name)(**kw)(Tensor(x), Tensor(target)).numpy()
  want = getattr(torch.nn, name)(**kw)(torch.tensor(x), torch.tensor(target)).numpy()
  assert_close(got, want, atol=1e-5, rtol=1e-5)
  with pytest.raises(ValueError, match="reduction must be"): nn.MSELoss(reduction="avg")

IN_PLACE = [("ReLU", {}), ("SiLU", {}), ("LeakyReLU", dict(negative_slope=0.2)), ("ELU", dict(alpha=0.7)), ("CELU", dict(alpha=1.3)),
            ("SELU", {}), ("Hardtanh", dict(min_val=-0.5, max_val=0.8)), ("ReLU6", {}), ("Threshold", dict(threshold=0.3, value=-2.0)),
            ("Mish", {}), ("Hardswish", {}), ("Hardsigmoid", {})]

@pytest.mark.parametrize("name,kw", IN_PLACE)
def test_in_place_activation_modules_match_torch(device, name, kw):
  """inplace=True: the module returns its input changed, and gradients flow through the change as in PyTorch."""
  x, w = np.random.default_rng(2).uniform(-8, 8, (4, 7)).astype(np.float32), _x(4, 7, seed=3)
  mine, theirs = getattr(nn, name)(**kw, inplace=True), getattr(torch.nn, name)(**kw, inplace=True)
  assert repr(mine) == repr(theirs)
  xa, xt = Tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
  ta, tt = xa * 1.5, xt * 1.5                 # non-leaves: in place is allowed
  assert mine(ta) is ta and theirs(tt) is tt
  (ta * Tensor(w, device=device)).sum().backward()
  (tt * torch.tensor(w)).sum().backward()
  assert_close(ta.numpy(), tt.detach().numpy(), atol=1e-5, rtol=1e-4)
  assert_close(xa.grad.numpy(), xt.grad.numpy(), atol=1e-5, rtol=1e-4)
  plain = getattr(nn, name)(**kw)             # without inplace the input keeps its value
  t = Tensor(x, device=device)
  assert plain(t) is not t
  np.testing.assert_array_equal(t.numpy(), x)

@pytest.mark.parametrize("name,kw", [("ReLU", {}), ("LeakyReLU", {}), ("Hardtanh", {}), ("Threshold", dict(threshold=0.0, value=1.0))])
def test_in_place_activation_module_on_a_leaf_is_refused(device, name, kw):
  xa, xt = Tensor(np.ones(4, np.float32), device=device, requires_grad=True), torch.ones(4, requires_grad=True)
  with pytest.raises(RuntimeError, match="a leaf tensor that requires grad"): getattr(nn, name)(**kw, inplace=True)(xa)
  with pytest.raises(RuntimeError, match="leaf Variable that requires grad"): getattr(torch.nn, name)(**kw, inplace=True)(xt)
  with alloy.no_grad(): getattr(nn, name)(**kw, inplace=True)(xa)   # allowed without grad mode, as in PyTorch

def test_sequential_with_in_place_relu_trains_as_torch(device):
  """Linear -> ReLU(inplace=True) -> Linear: the in-place ReLU changes the first Linear's output (a non-leaf), and every
  parameter's gradient is PyTorch's."""
  torch.manual_seed(0)
  theirs = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(inplace=True), torch.nn.Linear(8, 3))
  mine = _pair(nn.Sequential(nn.Linear(6, 8), nn.ReLU(inplace=True), nn.Linear(8, 3)), theirs, device)
  _check(mine, theirs, _x(5, 6), device)
