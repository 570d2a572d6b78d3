"""alloy.data: DataLoader and TensorDataset, batching NumPy arrays, tuples of arrays or any indexable dataset into
alloy Tensors.

A dataset is anything with __len__ and __getitem__ (an int index gives one sample: an array, a number, or a tuple,
list or dict of them); NumPy arrays and tuples of equal-length arrays are taken directly and batched by fancy
indexing (one copy per batch, not one per sample). Shuffling draws a permutation per epoch from a NumPy Generator
seeded by `seed` (or the `generator` given), so a seed repeats the order.
"""
from __future__ import annotations
from collections.abc import Mapping
import numpy as np
from alloy.tensor import Tensor

class TensorDataset:
  """Samples are tuples of the rows of equal-length Tensors or arrays (torch.utils.data.TensorDataset)."""
  def __init__(self, *tensors):
    if not tensors: raise ValueError("TensorDataset needs at least one tensor")
    lengths = {len(t) for t in tensors}
    if len(lengths) != 1: raise ValueError(f"TensorDataset: all tensors must have the same first dimension, got {[len(t) for t in tensors]}")
    self.tensors = tuple(t.numpy() if isinstance(t, Tensor) else np.asarray(t) for t in tensors)
  def __len__(self): return len(self.tensors[0])
  def __getitem__(self, i): return tuple(t[i] for t in self.tensors)

def _to_tensor(x, device):
  if isinstance(x, Tensor): return x.to(device) if device is not None else x
  arr = np.asarray(x)
  if arr.dtype.kind not in "biuf": raise TypeError(f"DataLoader: cannot batch samples of mixed or non-numeric types into a tensor (got {arr.dtype})")
  return Tensor(np.ascontiguousarray(arr), device=device)

def default_collate(samples: list, device=None):
  """A list of samples -> one batch: arrays and numbers stack on a new first axis; tuples, lists and dicts collate
  field by field."""
  first = samples[0]
  if isinstance(first, Mapping): return {k: default_collate([s[k] for s in samples], device) for k in first}
  if isinstance(first, (tuple, list)):
    if any(len(s) != len(first) for s in samples): raise ValueError("DataLoader: every sample must have the same number of fields")
    return type(first)(default_collate(list(field), device) for field in zip(*samples)) if isinstance(first, tuple) \
      else [default_collate(list(field), device) for field in zip(*samples)]
  if isinstance(first, Tensor): return _to_tensor(np.stack([s.numpy() for s in samples]), device)
  if isinstance(first, (bool, int, float)):   # Python numbers take alloy's default dtypes, as Tensor([...]) does
    if not all(isinstance(s, (bool, int, float)) for s in samples):
      raise TypeError("DataLoader: cannot batch samples of mixed or non-numeric types into a tensor")
    return Tensor(samples, device=device)
  return _to_tensor(np.stack([np.asarray(s) for s in samples]), device)

class DataLoader:
  """Iterates a dataset in batches of `batch_size` samples collated into Tensors on `device`.

  dataset: a NumPy array, a tuple of equal-length arrays, or any object with __len__ and __getitem__.
  shuffle: a new order each epoch, from `generator` (a numpy.random.Generator) or one seeded by `seed`.
  drop_last: leave out the last batch when it is short. collate_fn: list of samples -> batch (default_collate)."""
  def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool = False, drop_last: bool = False, seed: int | None = None,
               generator: np.random.Generator | None = None, collate_fn=None, device=None):
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0):
      raise ValueError(f"DataLoader: batch_size must be a positive int or None, got {batch_size!r}")
    if isinstance(dataset, tuple) and all(isinstance(a, (np.ndarray, Tensor)) for a in dataset): dataset = TensorDataset(*dataset)
    if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
      raise TypeError(f"DataLoader: the dataset must be indexable and have a length, got {type(dataset).__name__}")
    if generator is not None and not isinstance(generator, np.random.Generator):
      raise TypeError(f"DataLoader: generator must be a numpy.random.Generator, got {type(generator).__name__}")
    self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
    self.generator = generator if generator is not None else np.random.default_rng(seed)
    self.collate_fn, self.device = collate_fn, device

  def __len__(self) -> int:
    n = len(self.dataset)
    if self.batch_size is None: return n
    return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

  def batches(self) -> list[np.ndarray]:
    """The sample indices of each batch of the next epoch (draws the shuffle)."""
    n = len(self.dataset)
    order = self.generator.permutation(n) if self.shuffle else np.arange(n)
    size = self.batch_size or 1
    stop = n - n % size if self.drop_last else n
    return [order[i:i + size] for i in range(0, stop, size)]

  def __iter__(self):
    for idx in self.batches():
      if self.batch_size is None: yield self._batch_of_arrays(idx[0]) if self._array_backed() else self._one(int(idx[0]))
      elif self.collate_fn is None and self._array_backed(): yield self._batch_of_arrays(idx)
      else: yield (self.collate_fn or default_collate)([self.dataset[int(i)] for i in idx], *(() if self.collate_fn else (self.device,)))

  def _array_backed(self) -> bool: return isinstance(self.dataset, (np.ndarray, TensorDataset))
  def _batch_of_arrays(self, idx):
    if isinstance(self.dataset, np.ndarray): return _to_tensor(self.dataset[idx], self.device)
    return tuple(_to_tensor(a[idx], self.device) for a in self.dataset.tensors)
  def _one(self, i):
    s = self.dataset[i]
    if isinstance(s, (tuple, list)): return type(s)(_to_tensor(x, self.device) for x in s)
    return _to_tensor(s, self.device)
