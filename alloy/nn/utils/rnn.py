"""torch.nn.utils.rnn: pad_sequence (variable-length sequences stacked into one tensor, padded at the end or the start)
and unpad_sequence; PackedSequence with pack_padded_sequence, pad_packed_sequence, pack_sequence and unpack_sequence,
which alloy's RNN, LSTM and GRU take as PyTorch's do. The packing layout (batch_sizes) is made on the host from the
lengths, which PyTorch also keeps on the CPU; the data moves by one read at computed rows."""
from __future__ import annotations
from typing import NamedTuple
from alloy import dtype as dt
from alloy.tensor import Tensor, stack

def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
  """(L, B, *) or (B, L, *) with batch_first: each sequence (L_i, *) padded with padding_value up to the longest."""
  seqs = list(sequences)
  if not seqs: raise ValueError("pad_sequence: expected a non-empty list of tensors")
  if padding_side not in ("right", "left"): raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
  trailing = tuple(seqs[0].shape[1:])
  for s in seqs:
    if tuple(s.shape[1:]) != trailing: raise ValueError(f"pad_sequence: every sequence must have trailing dims {trailing}, got {tuple(s.shape)}")
  longest = max(s.shape[0] for s in seqs)
  def padded(s):
    extra = longest - s.shape[0]
    where_pad = (0, extra) if padding_side == "right" else (extra, 0)
    return s.pad((where_pad,) + ((0, 0),) * len(trailing), padding_value) if extra else s
  out = stack([padded(s) for s in seqs], 0)
  return out if batch_first else out.transpose(0, 1)

def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
  """The sequences pad_sequence padded (right-padded), each cut to its length."""
  batch = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
  counts = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
  return [batch[i, :int(n)] for i, n in enumerate(counts)]

class PackedSequence(NamedTuple):
  """Sequences of different lengths packed time step by time step: data holds step 0 of every sequence (longest
  first), then step 1 of those that have one, ...; batch_sizes (a list of ints, on the host) counts each step's rows;
  sorted_indices orders the batch longest first and unsorted_indices undoes it (None where it was sorted already)."""
  data: Tensor
  batch_sizes: list
  sorted_indices: Tensor | None = None
  unsorted_indices: Tensor | None = None

def _host_lengths(lengths) -> list:
  return [int(v) for v in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]

def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True) -> PackedSequence:
  """Pack a padded batch (T, B, *) (or (B, T, *)) of sequences of the given lengths (read on the host, as PyTorch
  requires lengths on the CPU). enforce_sorted: the lengths must already be in decreasing order."""
  counts = _host_lengths(lengths)
  x = input.transpose(0, 1) if batch_first else input
  if len(counts) != x.shape[1]: raise ValueError(f"pack_padded_sequence: {len(counts)} lengths for a batch of {x.shape[1]}")
  if any(n <= 0 or n > x.shape[0] for n in counts): raise ValueError(f"pack_padded_sequence: lengths must be in 1..{x.shape[0]}, got {counts}")
  order = sorted(range(len(counts)), key=lambda i: -counts[i])
  if enforce_sorted and order != list(range(len(counts))) and counts != sorted(counts, reverse=True):
    raise ValueError("pack_padded_sequence: lengths must be sorted in decreasing order with enforce_sorted=True")
  if enforce_sorted: order = list(range(len(counts)))
  sorted_counts = [counts[i] for i in order]
  batch_sizes = [sum(1 for n in sorted_counts if n > t) for t in range(sorted_counts[0])]
  rows = [t * x.shape[1] + order[b] for t, size in enumerate(batch_sizes) for b in range(size)]   # (t, b) in packing order
  data = x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])[Tensor(rows, device=x.device)]
  if enforce_sorted: return PackedSequence(data, batch_sizes)
  inverse = [0] * len(order)
  for k, i in enumerate(order): inverse[i] = k
  return PackedSequence(data, batch_sizes, Tensor(order, device=x.device), Tensor(inverse, device=x.device))

def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length=None) -> tuple:
  """(the padded batch (T, B, *) or (B, T, *), in the original batch order; the lengths, int64 on the CPU)."""
  sizes = sequence.batch_sizes
  batch, steps = sizes[0], len(sizes)
  if total_length is not None:
    if total_length < steps: raise ValueError(f"pad_packed_sequence: total_length {total_length} is less than the longest sequence, {steps}")
    steps = total_length
  padded = padded_in_packing_order(sequence, steps, padding_value)
  lengths = [sum(1 for s in sizes if s > b) for b in range(batch)]
  if sequence.unsorted_indices is not None:
    padded = padded[:, sequence.unsorted_indices]
    order = sequence.sorted_indices.tolist()
    lengths = [lengths[order.index(i)] for i in range(batch)]
  return (padded.transpose(0, 1) if batch_first else padded), Tensor(lengths, dtype=dt.int64)

def padded_in_packing_order(sequence: PackedSequence, steps: int | None = None, padding_value: float = 0.0) -> Tensor:
  """The packed data as (steps, B, *) with the batch in its packing (longest first) order, padding_value past each
  sequence's end."""
  data, sizes = sequence.data, sequence.batch_sizes
  starts = [sum(sizes[:t]) for t in range(len(sizes))]
  sentinel = data.shape[0]   # a row of padding_value after the data
  rows = [[starts[t] + b if t < len(sizes) and b < sizes[t] else sentinel for b in range(sizes[0])] for t in range(steps or len(sizes))]
  return data.cat(data[:1].full_like(padding_value), dim=0)[Tensor(rows, device=data.device)]

def packed_like(sequence: PackedSequence, steps: Tensor) -> PackedSequence:
  """(T, B, *) values laid out as sequence's packing (its batch order, its lengths), packed the same way."""
  rows = [t * steps.shape[1] + b for t, size in enumerate(sequence.batch_sizes) for b in range(size)]
  data = steps.reshape(steps.shape[0] * steps.shape[1], *steps.shape[2:])[Tensor(rows, device=steps.device)]
  return PackedSequence(data, sequence.batch_sizes, sequence.sorted_indices, sequence.unsorted_indices)

def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
  return pack_padded_sequence(pad_sequence(sequences), [s.shape[0] for s in sequences], enforce_sorted=enforce_sorted)

def unpack_sequence(packed_sequences: PackedSequence) -> list:
  padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
  return unpad_sequence(padded, lengths, batch_first=True)
