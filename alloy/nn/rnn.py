"""torch.nn's recurrent layers: RNN (tanh or relu), LSTM (with proj_size) and GRU over several layers, either
direction, batch_first or not, unbatched inputs, dropout between layers; and their one-step cells RNNCell, LSTMCell,
GRUCell. Parameter names, gate orders (LSTM i, f, g, o; GRU r, z, n) and the uniform(-1/sqrt(hidden), 1/sqrt(hidden))
initialization are PyTorch's, so its state dicts load as they are.

A layer projects the whole input sequence at once (one matmul for every time step), then steps through time: each
step is one matmul of the hidden state and the gates' elementwise work. The steps build one lazy graph; it is
computed every REALIZE_EVERY steps, so a long sequence neither deepens the graph without bound nor waits to the end
to start. Gradients flow through every step (backpropagation through time). A PackedSequence input runs padded,
each sequence's state held past its end (so the reverse direction starts at its own last step), and comes back packed."""
from __future__ import annotations
import math
from alloy.tensor import Tensor, cat, stack, where
from alloy.nn.utils.rnn import PackedSequence, packed_like, padded_in_packing_order
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter
from alloy.nn import init, functional as F

REALIZE_EVERY = 16

def _uniform(module: Module, hidden_size: int) -> None:
  bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
  for p in module.parameters(): init.uniform_(p, -bound, bound)

def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
  y = x @ w.T
  return y if b is None else y + b

def _lstm_step(gates: Tensor, c: Tensor) -> tuple:
  i, f, g, o = gates.chunk(4, -1)
  c = f.sigmoid() * c + i.sigmoid() * g.tanh()
  return o.sigmoid() * c.tanh(), c

def _gru_step(xg: Tensor, hg: Tensor, h: Tensor) -> Tensor:
  xr, xz, xn = xg.chunk(3, -1)
  hr, hz, hn = hg.chunk(3, -1)
  r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
  n = (xn + r * hn).tanh()
  return n + z * (h - n)   # (1 - z) * n + z * h, one multiply

class _RNNBase(Module):
  mode: str          # "RNN_TANH", "RNN_RELU", "LSTM" or "GRU"
  gates = 1

  def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True, batch_first: bool = False,
               dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
    super().__init__()
    name = type(self).__name__
    for what, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
      if isinstance(v, bool) or not isinstance(v, int) or v < 1: raise ValueError(f"{name}: {what} must be a positive int, got {v!r}")
    if not 0 <= dropout <= 1: raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
    if proj_size < 0 or (proj_size and self.mode != "LSTM"): raise ValueError(f"{name}: proj_size must be 0 (non-negative for LSTM), got {proj_size}")
    if proj_size >= hidden_size and proj_size: raise ValueError(f"{name}: proj_size ({proj_size}) must be smaller than hidden_size ({hidden_size})")
    self.input_size, self.hidden_size, self.num_layers, self.bias = input_size, hidden_size, num_layers, bias
    self.batch_first, self.dropout, self.bidirectional, self.proj_size = batch_first, dropout, bidirectional, proj_size
    kw = dict(device=device, dtype=dtype)
    out = proj_size or hidden_size
    self._names: list = []
    for layer in range(num_layers):
      for suffix in ("", "_reverse") if bidirectional else ("",):
        width = input_size if layer == 0 else out * (2 if bidirectional else 1)
        names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
        setattr(self, names[0], Parameter(Tensor.empty(self.gates * hidden_size, width, **kw)))
        setattr(self, names[1], Parameter(Tensor.empty(self.gates * hidden_size, out, **kw)))
        if bias:
          names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
          for n in names[2:]: setattr(self, n, Parameter(Tensor.empty(self.gates * hidden_size, **kw)))
        if proj_size:
          names.append(f"weight_hr_l{layer}{suffix}")
          setattr(self, names[-1], Parameter(Tensor.empty(proj_size, hidden_size, **kw)))
        self._names.append(names)
    self.reset_parameters()

  def reset_parameters(self) -> None: _uniform(self, self.hidden_size)

  def _weights(self, k: int) -> tuple:
    names = self._names[k]
    w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
    b_ih, b_hh = (getattr(self, names[2]), getattr(self, names[3])) if self.bias else (None, None)
    w_hr = getattr(self, names[-1]) if self.proj_size else None
    return w_ih, w_hh, b_ih, b_hh, w_hr

  def _direction(self, x: Tensor, k: int, h: Tensor, c: Tensor | None, reverse: bool, valid: list | None = None) -> tuple:
    """One layer in one direction over x (L, N, width) from state h (and c): the outputs (L, N, out), the last state.
    valid: per step, which rows (N, 1) have a step there (a packed batch's); the others keep their state."""
    w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(k)
    projected = _linear(x, w_ih, b_ih)   # every time step's input projection in one matmul
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outs = []
    for n, t in enumerate(steps):
      hg = _linear(h, w_hh, b_hh)
      c_new = None
      if self.mode == "LSTM":
        h_new, c_new = _lstm_step(projected[t] + hg, c)
        if w_hr is not None: h_new = h_new @ w_hr.T
      elif self.mode == "GRU": h_new = _gru_step(projected[t], hg, h)
      else: h_new = (projected[t] + hg).tanh() if self.mode == "RNN_TANH" else (projected[t] + hg).relu()
      if valid is not None:
        h = where(valid[t], h_new, h)
        if c is not None: c = where(valid[t], c_new, c)
      else: h = h_new
      if c is not None and valid is None: c = c_new
      outs.append(h)
      if (n + 1) % REALIZE_EVERY == 0:
        h.realize()
        if c is not None: c.realize()
    if reverse: outs.reverse()
    return stack(outs, 0), h, c

  def forward(self, input, hx=None):
    if isinstance(input, PackedSequence): return self._packed(input, hx)
    name = type(self).__name__
    if input.ndim not in (2, 3): raise ValueError(f"{name}: expected a 2-D (unbatched) or 3-D input, got shape {tuple(input.shape)}")
    unbatched = input.ndim == 2
    x = input.unsqueeze(1) if unbatched else input.transpose(0, 1) if self.batch_first else input
    return self._layers(x, hx, unbatched)

  def _packed(self, packed: PackedSequence, hx):
    """A packed batch: run over its steps padded (longest first), each row's state held past its end; the outputs
    packed back, the states in the batch's own order."""
    x = padded_in_packing_order(packed)
    rows = Tensor.arange(x.shape[1], device=x.device).unsqueeze(-1)
    valid = [rows < size for size in packed.batch_sizes]
    if hx is not None and packed.sorted_indices is not None:   # the caller's states are in the batch's own order
      hx = tuple(h[:, packed.sorted_indices] for h in hx) if self.mode == "LSTM" else hx[:, packed.sorted_indices]
    output, state = self._layers(x, hx, False, valid)
    undo = (lambda h: h[:, packed.unsorted_indices]) if packed.unsorted_indices is not None else (lambda h: h)
    state = tuple(undo(h) for h in state) if self.mode == "LSTM" else undo(state)
    return packed_like(packed, output), state

  def _layers(self, x: Tensor, hx, unbatched: bool, valid: list | None = None):
    """Every layer over x (L, N, input_size), from hx: (the last layer's outputs in the input's layout, the states)."""
    name = type(self).__name__
    if x.shape[-1] != self.input_size: raise ValueError(f"{name}: input.size(-1) must be {self.input_size}, got {x.shape[-1]}")
    dirs, n, out = 2 if self.bidirectional else 1, x.shape[1], self.proj_size or self.hidden_size
    lstm = self.mode == "LSTM"
    h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
    if h0 is None: h0 = Tensor.zeros(self.num_layers * dirs, n, out, dtype=x.dtype, device=x.device)
    elif unbatched: h0 = h0.unsqueeze(1)
    if lstm:
      if c0 is None: c0 = Tensor.zeros(self.num_layers * dirs, n, self.hidden_size, dtype=x.dtype, device=x.device)
      elif unbatched: c0 = c0.unsqueeze(1)
    if h0.shape != (self.num_layers * dirs, n, out):
      raise ValueError(f"{name}: expected hidden size {(self.num_layers * dirs, n, out)}, got {tuple(h0.shape)}")
    h_last, c_last = [], []
    for layer in range(self.num_layers):
      results = [self._direction(x, layer * dirs + d, h0[layer * dirs + d], c0[layer * dirs + d] if lstm else None, d == 1, valid)
                 for d in range(dirs)]
      x = results[0][0] if dirs == 1 else cat([r[0] for r in results], -1)
      h_last += [r[1] for r in results]
      c_last += [r[2] for r in results]
      if self.dropout and self.training and layer < self.num_layers - 1: x = F.dropout(x, self.dropout, True)
    output = x.squeeze(1) if unbatched else x.transpose(0, 1) if self.batch_first and valid is None else x
    h_n = stack(h_last, 0)
    h_n = h_n.squeeze(1) if unbatched else h_n
    if not lstm: return output, h_n
    c_n = stack(c_last, 0)
    return output, (h_n, c_n.squeeze(1) if unbatched else c_n)

  def extra_repr(self):
    s = f"{self.input_size}, {self.hidden_size}"
    if self.proj_size: s += f", proj_size={self.proj_size}"
    if self.num_layers != 1: s += f", num_layers={self.num_layers}"
    for k, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
      if getattr(self, k) != default: s += f", {k}={getattr(self, k)}"
    return s

class RNN(_RNNBase):
  def __init__(self, *args, nonlinearity: str = "tanh", **kwargs):
    if nonlinearity not in ("tanh", "relu"): raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    self.mode, self.nonlinearity = ("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"), nonlinearity
    super().__init__(*args, **kwargs)

class LSTM(_RNNBase):
  mode, gates = "LSTM", 4

class GRU(_RNNBase):
  mode, gates = "GRU", 3

class _CellBase(Module):
  gates = 1
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
    super().__init__()
    self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
    kw = dict(device=device, dtype=dtype)
    self.weight_ih = Parameter(Tensor.empty(self.gates * hidden_size, input_size, **kw))
    self.weight_hh = Parameter(Tensor.empty(self.gates * hidden_size, hidden_size, **kw))
    self.bias_ih = Parameter(Tensor.empty(self.gates * hidden_size, **kw)) if bias else None
    self.bias_hh = Parameter(Tensor.empty(self.gates * hidden_size, **kw)) if bias else None
    _uniform(self, hidden_size)
  def _state(self, x: Tensor, h):
    if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
      raise ValueError(f"{type(self).__name__}: expected an input of shape (N, {self.input_size}) or ({self.input_size},), got {tuple(x.shape)}")
    return h if h is not None else Tensor.zeros(*x.shape[:-1], self.hidden_size, dtype=x.dtype, device=x.device)
  def extra_repr(self): return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")

class RNNCell(_CellBase):
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device=None, dtype=None):
    if nonlinearity not in ("tanh", "relu"): raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    super().__init__(input_size, hidden_size, bias, device, dtype)
    self.nonlinearity = nonlinearity
  def forward(self, input: Tensor, hx=None) -> Tensor:
    h = self._state(input, hx)
    y = _linear(input, self.weight_ih, self.bias_ih) + _linear(h, self.weight_hh, self.bias_hh)
    return y.tanh() if self.nonlinearity == "tanh" else y.relu()

class LSTMCell(_CellBase):
  gates = 4
  def forward(self, input: Tensor, hx=None) -> tuple:
    h, c = hx if hx is not None else (None, None)
    h, c = self._state(input, h), self._state(input, c)
    return _lstm_step(_linear(input, self.weight_ih, self.bias_ih) + _linear(h, self.weight_hh, self.bias_hh), c)

class GRUCell(_CellBase):
  gates = 3
  def forward(self, input: Tensor, hx=None) -> Tensor:
    h = self._state(input, hx)
    return _gru_step(_linear(input, self.weight_ih, self.bias_ih), _linear(h, self.weight_hh, self.bias_hh), h)
