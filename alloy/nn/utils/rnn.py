"""torch.nn.utils.rnn's padding helpers: pad_sequence (variable-length sequences stacked into one tensor, padded at
the end or the start) and unpad_sequence (its inverse, given the lengths). Packed sequences are not supported: alloy's
RNN layers take padded batches."""
from __future__ import annotations
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
