"""linear (x @ weight^T + bias) with PyTorch's signature, and the shape helpers models call through torch.nn.functional:
pad (constant, reflect, replicate, circular), pixel_shuffle / pixel_unshuffle."""
from __future__ import annotations

def linear(input, weight, bias=None):
  if weight.ndim not in (1, 2): raise ValueError(f"linear: weight must be 1-D or 2-D, got shape {weight.shape}")
  if input.shape[-1:] != weight.shape[-1:]:
    raise ValueError(f"linear: input's last dim {input.shape[-1:]} does not match the weight's in_features {weight.shape[-1]}")
  out = input @ (weight.T if weight.ndim == 2 else weight)
  return out if bias is None else out + bias

PAD_MODES = ("constant", "reflect", "replicate", "circular")

def pad(input, pad, mode="constant", value=None):
  """PyTorch's F.pad: pad = (last dim's before, after, the dim before it's before, after, ...); negative sizes crop
  (constant mode)."""
  from alloy.tensor import cat
  if mode not in PAD_MODES: raise ValueError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
  pad = tuple(pad)
  if len(pad) % 2 or len(pad) // 2 > input.ndim:
    raise ValueError(f"pad: the padding must hold a (before, after) pair per dim, at most {input.ndim} pairs, got {pad}")
  pairs = [(0, 0)] * (input.ndim - len(pad) // 2) + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2))]
  from alloy.functional.window import computed, pad_spatial
  # a stored value: a padded view of a computed one reads out of its buffers at the padding (README, known bugs)
  if mode == "constant": return pad_spatial(computed(input), tuple(pairs), 0.0 if value is None else value)
  if value not in (None, 0): raise ValueError(f"pad: value is only for mode 'constant', got value={value} with mode {mode!r}")
  out = computed(input)
  for axis, (b, a) in enumerate(pairs):
    if b == 0 and a == 0: continue
    n = out.shape[axis]
    if b < 0 or a < 0: raise ValueError(f"pad: mode {mode!r} takes no negative padding, got {pad}")
    if mode == "reflect" and (b >= n or a >= n):
      raise ValueError(f"pad: reflect padding ({b}, {a}) must be smaller than the dim's size {n}")
    if mode == "circular" and (b > n or a > n): raise ValueError(f"pad: circular padding ({b}, {a}) must be at most the dim's size {n}")
    def part(lo, hi): return out.shrink(tuple((lo, hi) if i == axis else (0, s) for i, s in enumerate(out.shape)))
    if mode == "reflect": before, after = part(1, b + 1).flip(axis), part(n - 1 - a, n - 1).flip(axis)
    elif mode == "circular": before, after = part(n - b, n), part(0, a)
    else:
      def edge(at, k):
        e = part(at, at + 1)
        return e.expand(tuple(k if i == axis else s for i, s in enumerate(e.shape)))
      before, after = edge(0, b), edge(n - 1, a)
    out = computed(cat([t for t, k in ((before, b), (out, n), (after, a)) if k], axis))
  return out

def pixel_shuffle(input, upscale_factor: int):
  """(*, C * r^2, H, W) -> (*, C, H * r, W * r)."""
  r = upscale_factor
  *lead, c, h, w = input.shape
  if c % (r * r): raise ValueError(f"pixel_shuffle: the {c} channels must be divisible by upscale_factor^2 = {r * r}")
  t = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
  k = len(lead)
  return t.permute(tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2)).reshape(tuple(lead) + (c // (r * r), h * r, w * r))

def channel_shuffle(input, groups: int):
  """(N, g * k, ...) -> its channels regrouped: (N, g, k, ...) transposed to (N, k, g, ...), as ShuffleNet mixes them."""
  if input.ndim < 3: raise ValueError(f"channel_shuffle: expected an input of at least 3 dimensions (N, C, ...), got {tuple(input.shape)}")
  n, c, *rest = input.shape
  if groups <= 0 or c % groups: raise ValueError(f"channel_shuffle: the {c} channels must be divisible by groups ({groups})")
  return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)

def pixel_unshuffle(input, downscale_factor: int):
  """(*, C, H * r, W * r) -> (*, C * r^2, H, W)."""
  r = downscale_factor
  *lead, c, h, w = input.shape
  if h % r or w % r: raise ValueError(f"pixel_unshuffle: the spatial sizes {(h, w)} must be divisible by downscale_factor {r}")
  t = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
  k = len(lead)
  return t.permute(tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3)).reshape(tuple(lead) + (c * r * r, h // r, w // r))

def cosine_similarity(x1, x2, dim=1, eps=1e-8):
  """The sum along dim of x1 / max(||x1||, eps) times x2 / max(||x2||, eps), as PyTorch computes it."""
  def unit(x): return x / (x * x).sum(dim, keepdim=True).sqrt().maximum(eps)
  return (unit(x1) * unit(x2)).sum(dim)

def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
  d = (x1 - x2 + eps).abs()
  return d.pow(p).sum(-1, keepdim=keepdim).pow(1.0 / p)
