"""The layers added to alloy.nn beside torch.nn's: each built in both, torch's state dict loaded into alloy's, the
same input through both in eval mode (dropout off), on each device; and what differs in training mode."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn

torch = pytest.importorskip("torch")

def _layers():
  return {
    "PReLU": (lambda m: m.PReLU(), (2, 3, 4)), "PReLU_channels": (lambda m: m.PReLU(3, 0.1), (2, 3, 4)),
    "Softmin": (lambda m: m.Softmin(1), (2, 5)), "Softsign": (lambda m: m.Softsign(), (2, 5)), "Tanhshrink": (lambda m: m.Tanhshrink(), (2, 5)),
    "GLU": (lambda m: m.GLU(1), (2, 6)), "MaxPool3d": (lambda m: m.MaxPool3d(2), (1, 2, 4, 4, 4)),
    "AvgPool3d": (lambda m: m.AvgPool3d(2, 1), (1, 2, 3, 4, 4)), "InstanceNorm1d": (lambda m: m.InstanceNorm1d(3), (2, 3, 7)),
    "InstanceNorm2d_affine": (lambda m: m.InstanceNorm2d(3, affine=True), (2, 3, 4, 5)),
    "Bilinear": (lambda m: m.Bilinear(4, 3, 5), [(6, 4), (6, 3)]),
    "Upsample": (lambda m: m.Upsample(scale_factor=2, mode="nearest"), (1, 2, 3, 3)),
    "Upsample_bilinear": (lambda m: m.Upsample(size=(5, 7), mode="bilinear", align_corners=False), (1, 2, 3, 3)),
    "PixelShuffle": (lambda m: m.PixelShuffle(2), (1, 8, 3, 3)), "PixelUnshuffle": (lambda m: m.PixelUnshuffle(2), (1, 2, 4, 6)),
    "CosineSimilarity": (lambda m: m.CosineSimilarity(1), [(4, 6), (4, 6)]), "PairwiseDistance": (lambda m: m.PairwiseDistance(), [(4, 6), (4, 6)]),
    "Unfold": (lambda m: m.Unfold(2), (1, 2, 4, 4)), "Fold": (lambda m: m.Fold((4, 4), 2), (1, 8, 9)),
    "ZeroPad2d": (lambda m: m.ZeroPad2d((1, 2, 0, 1)), (1, 2, 3, 3)), "ConstantPad1d": (lambda m: m.ConstantPad1d(2, 3.5), (1, 2, 3)),
    "ReflectionPad2d": (lambda m: m.ReflectionPad2d(1), (1, 2, 3, 3)), "ReplicationPad1d": (lambda m: m.ReplicationPad1d((2, 1)), (1, 2, 4)),
    "CircularPad2d": (lambda m: m.CircularPad2d(1), (1, 2, 3, 3)),
    "EncoderLayer": (lambda m: m.TransformerEncoderLayer(8, 2, 16, batch_first=True), (2, 5, 8)),
    "EncoderLayer_norm_first_gelu": (lambda m: m.TransformerEncoderLayer(8, 2, 16, activation="gelu", norm_first=True), (5, 2, 8)),
    "Encoder": (lambda m: m.TransformerEncoder(m.TransformerEncoderLayer(8, 4, 12, batch_first=True), 2, m.LayerNorm(8)), (2, 5, 8)),
    "DecoderLayer": (lambda m: m.TransformerDecoderLayer(8, 2, 16, batch_first=True), [(2, 4, 8), (2, 6, 8)]),
    "Transformer": (lambda m: m.Transformer(8, 2, 1, 2, 16, batch_first=True), [(2, 6, 8), (2, 4, 8)]),
    "LogSigmoid": (lambda m: m.LogSigmoid(), (2, 5)), "Softshrink": (lambda m: m.Softshrink(0.3), (2, 5)),
    "Hardshrink": (lambda m: m.Hardshrink(), (2, 5)), "Softmax2d": (lambda m: m.Softmax2d(), (2, 3, 4, 5)),
    "AdaptiveAvgPool3d": (lambda m: m.AdaptiveAvgPool3d((2, 3, None)), (1, 2, 5, 7, 4)),
    "AdaptiveMaxPool1d": (lambda m: m.AdaptiveMaxPool1d(4), (2, 3, 10)), "AdaptiveMaxPool2d": (lambda m: m.AdaptiveMaxPool2d((3, 4)), (2, 3, 7, 9)),
    "AdaptiveMaxPool3d": (lambda m: m.AdaptiveMaxPool3d(2), (1, 2, 5, 6, 4)),
    "LPPool1d": (lambda m: m.LPPool1d(2, 3, 2), (2, 3, 9)), "LPPool2d": (lambda m: m.LPPool2d(3, (2, 3)), (1, 2, 6, 7)),
    "LocalResponseNorm": (lambda m: m.LocalResponseNorm(3, 0.1, 0.6, 2.0), (2, 6, 4, 5)),
    "ChannelShuffle": (lambda m: m.ChannelShuffle(3), (2, 6, 3, 3)),
    "UpsamplingNearest2d": (lambda m: m.UpsamplingNearest2d(size=(5, 7)), (1, 2, 3, 3)),
    "UpsamplingBilinear2d": (lambda m: m.UpsamplingBilinear2d(scale_factor=2), (1, 2, 3, 4)),
    "RReLU_eval": (lambda m: m.RReLU(0.1, 0.3), (2, 5)), "AlphaDropout_eval": (lambda m: m.AlphaDropout(0.3), (2, 5)),
  }

@pytest.mark.parametrize("name", sorted(_layers()))
def test_layer_matches_torch(device, name):
  make, shapes = _layers()[name]
  torch.manual_seed(0)
  theirs = make(torch.nn).eval()
  mine = make(nn).to(device).eval()
  mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  rng = np.random.default_rng(1)
  xs = [rng.standard_normal(s).astype(np.float32) for s in (shapes if isinstance(shapes, list) else [shapes])]
  got = mine(*[Tensor(x, device=device) for x in xs]).numpy()
  with torch.no_grad(): want = theirs(*[torch.from_numpy(x) for x in xs]).numpy()
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=name)

def test_channel_dropout_and_causal_masks(device):
  alloy.manual_seed(0)
  x = Tensor(np.ones((4, 16, 5, 5), np.float32), device=device)
  y = nn.Dropout2d(0.5)(x).numpy()
  per_channel = y.reshape(4, 16, -1)
  assert set(np.unique(per_channel)) <= {0.0, 2.0} and all(len(np.unique(c)) == 1 for row in per_channel for c in row)   # whole channels
  assert 0.2 < (per_channel[:, :, 0] == 0).mean() < 0.8
  np.testing.assert_array_equal(nn.Dropout1d(0.3).eval()(x[:, :, 0]).numpy(), x[:, :, 0].numpy())
  mask = nn.Transformer.generate_square_subsequent_mask(4).numpy()
  np.testing.assert_array_equal(mask, torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
  torch.manual_seed(0)
  theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
  mine = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).to(device).eval()
  mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  src = np.random.default_rng(2).standard_normal((2, 4, 8)).astype(np.float32)
  pad = np.array([[False, False, False, True], [False, False, False, False]])
  mask = np.isinf(mask)   # a bool mask like the padding mask (torch deprecates mixing the two kinds)
  got = mine(Tensor(src, device=device), src_mask=Tensor(mask, device=device), src_key_padding_mask=Tensor(pad, device=device)).numpy()
  with torch.no_grad(): want = theirs(torch.from_numpy(src), src_mask=torch.from_numpy(mask), src_key_padding_mask=torch.from_numpy(pad)).numpy()
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)

def test_parameter_containers():
  ps = nn.ParameterList([nn.Parameter(Tensor(np.ones(2, np.float32))) for _ in range(3)])
  ps.append(nn.Parameter(Tensor(np.zeros(1, np.float32))))
  assert len(ps) == 4 and [n for n, _ in ps.named_parameters()] == ["0", "1", "2", "3"]
  pd = nn.ParameterDict({"a": nn.Parameter(Tensor(np.ones(2, np.float32)))})
  pd["b"] = nn.Parameter(Tensor(np.ones(3, np.float32)))
  assert list(pd.keys()) == ["a", "b"] and sorted(pd.state_dict()) == ["a", "b"] and "b" in pd
  class M(nn.Module):
    def __init__(self):
      super().__init__()
      self.ws = nn.ParameterList([nn.Parameter(Tensor(np.ones(2, np.float32)))])
  assert list(M().state_dict()) == ["ws.0"]

@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("dims", [1, 2])
def test_instance_norm_running_stats_match_torch(device, momentum, dims):
  # training moves the running statistics as torch's do (the batch's average of the per-instance means and unbiased
  # variances); eval normalizes by them; an unbatched input counts as a batch of one
  rng = np.random.default_rng(5)
  shape = (4, 3, 9) if dims == 1 else (4, 3, 5, 6)
  ours = getattr(nn, f"InstanceNorm{dims}d")(3, momentum=momentum, affine=True, track_running_stats=True).to(device)
  theirs = getattr(torch.nn, f"InstanceNorm{dims}d")(3, momentum=momentum, affine=True, track_running_stats=True)
  with torch.no_grad():
    theirs.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, 3).astype(np.float32)))
    theirs.bias.copy_(torch.from_numpy(rng.uniform(-1, 1, 3).astype(np.float32)))
  ours.load_state_dict({k: Tensor(v.numpy()) for k, v in theirs.state_dict().items()})
  for k in range(3):
    x = (rng.standard_normal(shape) * (k + 1) + k).astype(np.float32)
    x = x[0] if k == 2 else x
    np.testing.assert_allclose(ours(Tensor(x, device=device)).numpy(), theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
  for name in ("running_mean", "running_var", "num_batches_tracked"):
    np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
  ours.eval(); theirs.eval()
  x = rng.standard_normal(shape).astype(np.float32)
  np.testing.assert_allclose(ours(Tensor(x, device=device)).numpy(), theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError, match="running_mean and running_var must be given"):
    nn.functional.instance_norm(Tensor(x, device=device), use_input_stats=False)

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes_match_torch(device, mode):
  # the input padded by F.pad first, as torch does: ints, a tuple and 'same' (an even kernel: the odd one after)
  rng = np.random.default_rng(6)
  for nd, kernel, padding in ((1, 3, 2), (2, 4, "same"), (2, 3, (1, 2)), (3, 3, 1)):
    theirs = getattr(torch.nn, f"Conv{nd}d")(2, 3, kernel, padding=padding, padding_mode=mode)
    ours = getattr(nn, f"Conv{nd}d")(2, 3, kernel, padding=padding, padding_mode=mode).to(device)
    ours.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    assert f"padding_mode={mode}" in repr(ours)
    x = rng.standard_normal((2, 2) + (5,) * nd).astype(np.float32)
    np.testing.assert_allclose(ours(Tensor(x, device=device)).numpy(), theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError, match="padding_mode must be one of"): nn.Conv2d(2, 3, 3, padding_mode="mirror")
  with pytest.raises(ValueError, match='only "zeros" padding mode'): nn.ConvTranspose2d(2, 3, 3, padding_mode=mode)

@pytest.mark.parametrize("nd,shape,out", [(1, (2, 3, 10), 4), (2, (2, 3, 7, 9), (3, 4)), (3, (1, 2, 5, 6, 7), (2, 3, 4))])
def test_adaptive_max_pool_indices_and_gradients_match_torch(device, nd, shape, out):
  # overlapping bins (sizes that do not divide), the flat spatial indices, and the gradient through overlaps
  x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
  xa, xt = Tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
  pool = f"adaptive_max_pool{nd}d"
  (va, ia), (vt, it) = (getattr(lib, pool)(t, out, return_indices=True) for lib, t in ((nn.functional, xa), (torch.nn.functional, xt)))
  np.testing.assert_array_equal(va.numpy(), vt.detach().numpy())
  np.testing.assert_array_equal(ia.numpy(), it.numpy())
  w = np.random.default_rng(4).standard_normal(tuple(vt.shape)).astype(np.float32)
  (va * Tensor(w, device=device)).sum().backward()
  (vt * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)

def test_unpool_losses_and_random_layers(device):
  rng = np.random.default_rng(5)
  x = rng.standard_normal((2, 3, 8, 9)).astype(np.float32)
  for nd, xs in ((1, x[:, :, 0]), (2, x), (3, x[None])):   # max_unpool undoes max_pool's indices
    v, i = getattr(torch.nn.functional, f"max_pool{nd}d")(torch.tensor(xs), 2, return_indices=True)
    unpool = getattr(nn, f"MaxUnpool{nd}d")(2)
    got = unpool(Tensor(v.numpy(), device=device), Tensor(i.numpy(), device=device), output_size=xs.shape[-nd:]).numpy()
    np.testing.assert_array_equal(got, getattr(torch.nn.functional, f"max_unpool{nd}d")(v, i, 2, output_size=xs.shape[-nd:]).numpy())
  v, i = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
  with pytest.raises(IndexError, match=r"max_unpool2d: index \d+ is out of bounds for dimension 2 with size 64"):
    nn.functional.max_unpool2d(Tensor(v.numpy(), device=device), Tensor(i.numpy(), device=device), 2).numpy()   # the default size is 8 x 8
  scores, labels = rng.standard_normal((3, 5)).astype(np.float32), np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4]])
  for reduction in ("mean", "sum", "none"):
    got = nn.MultiLabelMarginLoss(reduction=reduction)(Tensor(scores, device=device), Tensor(labels, device=device)).numpy()
    np.testing.assert_allclose(got, torch.nn.MultiLabelMarginLoss(reduction=reduction)(torch.tensor(scores), torch.tensor(labels)).numpy(), rtol=1e-6)
  w = rng.uniform(0, 0.5, 3).astype(np.float32)
  np.testing.assert_array_equal(nn.functional.prelu(Tensor(x, device=device), Tensor(w, device=device)).numpy(),
                                torch.nn.functional.prelu(torch.tensor(x), torch.tensor(w)).numpy())
  alloy.manual_seed(0)
  r = nn.RReLU(0.1, 0.3)(Tensor(x, device=device)).numpy()   # training: a slope in [lower, upper] per element
  slopes = r[x < 0] / x[x < 0]
  assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and slopes.std() > 0.03 and np.array_equal(r[x >= 0], x[x >= 0])
  big = rng.standard_normal(100000).astype(np.float32)
  a = nn.functional.alpha_dropout(Tensor(big, device=device), 0.2, training=True).numpy()
  assert abs(a.mean()) < 0.02 and abs(a.var() - 1) < 0.03   # a standard input keeps its mean and variance
  scale, saturation = 1 / np.sqrt(0.8 * (1 + 0.2 * 1.7580993408473766 ** 2)), -1.7580993408473766
  dropped = np.isclose(a, scale * saturation * (1 - 0.2), atol=1e-5)   # a * saturation + b, b = -a * saturation * p
  assert abs(dropped.mean() - 0.2) < 0.01
  np.testing.assert_allclose(a[~dropped], scale * big[~dropped] - scale * saturation * 0.2, rtol=1e-5, atol=1e-5)
  c = nn.Dropout2d(0.5)(Tensor(np.ones((4, 8, 3, 3), np.float32), device=device)).numpy()
  assert set(np.unique(c)) <= {0.0, 2.0} and all(len(np.unique(c[n, k])) == 1 for n in range(4) for k in range(8))   # whole channels
  soft = nn.functional.gumbel_softmax(Tensor(np.tile(np.log([0.1, 0.2, 0.7]).astype(np.float32), (20000, 1)), device=device), hard=True).numpy()
  np.testing.assert_allclose(soft.mean(0), [0.1, 0.2, 0.7], atol=0.015)   # argmax of logits + Gumbel noise: a draw from softmax
  assert set(np.unique(soft)) == {0.0, 1.0} and np.all(soft.sum(1) == 1)

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_torch(device, mode):
  torch.manual_seed(0)
  theirs = torch.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2)
  mine = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2).to(device)
  mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  assert not mine.weight.numpy()[2].any()   # the padding row starts at zero
  flat, offsets = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0]), np.array([0, 4, 4, 7])   # an empty bag; a padding entry
  for args in ((flat, offsets), (np.array([[1, 2, 3], [9, 2, 2], [4, 4, 0]]), None)):
    got = mine(*[Tensor(a, device=device) if a is not None else None for a in args])
    want = theirs(*[torch.tensor(a) if a is not None else None for a in args])
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    w = np.random.default_rng(2).standard_normal(tuple(want.shape)).astype(np.float32)
    (got * Tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(mine.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    mine.zero_grad(); theirs.zero_grad()
  last = np.array([0, 4, 4, 7, 10])
  got = nn.functional.embedding_bag(Tensor(flat, device=device), mine.weight, Tensor(last, device=device), mode=mode, include_last_offset=True)
  want = torch.nn.functional.embedding_bag(torch.tensor(flat), theirs.weight, torch.tensor(last), mode=mode, include_last_offset=True)
  np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
  if mode == "sum":
    psw = np.random.default_rng(3).uniform(0, 1, 10).astype(np.float32)
    got = mine(Tensor(flat, device=device), Tensor(offsets, device=device), Tensor(psw, device=device)).numpy()
    np.testing.assert_allclose(got, theirs(torch.tensor(flat), torch.tensor(offsets), torch.tensor(psw)).detach().numpy(), rtol=1e-5, atol=1e-6)
  else:
    weights = Tensor(flat.astype(np.float32), device=device)
    with pytest.raises(ValueError, match="per_sample_weights"): mine(Tensor(flat, device=device), Tensor(offsets, device=device), weights)
  with pytest.raises(IndexError, match="out of bounds"): mine(Tensor(np.array([3, 10]), device=device), Tensor(np.array([0]), device=device)).numpy()

def test_ctc_loss_matches_torch(device):
  rng = np.random.default_rng(6)
  frames, batch, classes = 12, 3, 5
  targets, target_lengths = np.array([[1, 1, 2, 3], [2, 4, 0, 0], [3, 3, 3, 1]]), np.array([4, 2, 4])   # repeats need a blank between
  for input_lengths, zero_infinity in ((np.array([12, 9, 7]), False), (np.array([5, 9, 3]), True)):   # 3 frames cannot hold 3 3 3 1
    for reduction in ("mean", "sum", "none"):
      x = rng.standard_normal((frames, batch, classes)).astype(np.float32)
      xt, xa = torch.tensor(x, requires_grad=True), Tensor(x, device=device, requires_grad=True)
      args = lambda lib: [lib(v) for v in (targets, input_lengths, target_lengths)]
      want = torch.nn.CTCLoss(reduction=reduction, zero_infinity=zero_infinity)(xt.log_softmax(-1), *args(torch.tensor))
      got = nn.CTCLoss(reduction=reduction, zero_infinity=zero_infinity)(xa.log_softmax(-1), *args(lambda v: Tensor(v, device=device)))
      np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, err_msg=f"{reduction} {zero_infinity}")
      w = rng.uniform(0.5, 1.5, tuple(want.shape)).astype(np.float32)
      (want * torch.tensor(w)).sum().backward()
      (got * Tensor(w, device=device)).sum().backward()
      np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=f"{reduction} {zero_infinity}")
  flat = np.concatenate([targets[i, :target_lengths[i]] for i in range(batch)])   # the concatenated form
  lp = torch.tensor(rng.standard_normal((frames, batch, classes)).astype(np.float32)).log_softmax(-1)
  got = nn.functional.ctc_loss(Tensor(lp.numpy(), device=device), Tensor(flat, device=device), [12, 9, 7], [4, 2, 4])
  np.testing.assert_allclose(got.numpy(), torch.nn.functional.ctc_loss(lp, torch.tensor(flat), [12, 9, 7], [4, 2, 4]).numpy(), rtol=1e-5)

def test_triplet_margin_with_distance_loss_matches_torch(device):
  rng = np.random.default_rng(8)
  a, p, n = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(3))
  def cosine_distance(x, y): return 1 - (x * y).sum(-1) / ((x * x).sum(-1) * (y * y).sum(-1)).sqrt()
  for kw in (dict(), dict(distance_function=cosine_distance, margin=0.5, swap=True)):
    for reduction in ("mean", "sum", "none"):
      ta, tp, tn = (torch.tensor(v, requires_grad=True) for v in (a, p, n))
      xa, xp, xn = (Tensor(v, device=device, requires_grad=True) for v in (a, p, n))
      want = torch.nn.TripletMarginWithDistanceLoss(reduction=reduction, **kw)(ta, tp, tn)
      got = nn.TripletMarginWithDistanceLoss(reduction=reduction, **kw)(xa, xp, xn)
      np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
      want.sum().backward(); got.sum().backward()
      for m, t in ((xa, ta), (xp, tp), (xn, tn)): np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)

@pytest.mark.parametrize("name,args,shape", [("LazyLinear", (5,), (3, 7)), ("LazyConv2d", (4, 3), (2, 3, 6, 6)), ("LazyConv1d", (2, 3), (3, 9)),
                                             ("LazyConvTranspose2d", (2, 3), (1, 3, 4, 4)), ("LazyBatchNorm2d", (), (2, 3, 4, 4)),
                                             ("LazyInstanceNorm1d", (), (2, 3, 8))])
def test_lazy_layers_become_their_layer(device, name, args, shape):
  theirs, mine = getattr(torch.nn, name)(*args), getattr(nn, name)(*args).to(device)
  mine.eval(); theirs.eval()   # kept through the first call
  calls = []
  mine.register_forward_hook(lambda m, i, o: calls.append(o.shape))
  x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
  first = mine(Tensor(x, device=device))
  theirs(torch.tensor(x))
  assert type(mine).__name__ == type(theirs).__name__ and not mine.training and calls == [first.shape]
  got_shapes = {k: tuple(v.shape) for k, v in mine.state_dict().items()}
  assert got_shapes == {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
  assert all(p.device == first.device for p in mine.parameters())
  mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  with torch.no_grad(): want = theirs(torch.tensor(x)).numpy()
  np.testing.assert_allclose(mine(Tensor(x, device=device)).numpy(), want, rtol=1e-5, atol=1e-5)
