"""alloy.data: DataLoader over NumPy arrays, tuples of arrays, TensorDataset and any indexable dataset: batch sizes,
the short last batch and drop_last, a seeded shuffle (the same seed the same order, each epoch a new one, every
sample once), collation of tuples and dicts into Tensors on the device, and the errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.data import DataLoader, TensorDataset, default_collate

X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10, dtype=np.int64)

class Squares:
  """An indexable dataset of (x, x**2) pairs, read one sample at a time."""
  def __init__(self, n): self.n = n
  def __len__(self): return self.n
  def __getitem__(self, i):
    if not 0 <= i < self.n: raise IndexError(i)
    return np.array([i], np.float32), i * i

def test_batches_in_order_and_drop_last(device):
  batches = list(DataLoader((X, Y), batch_size=4, device=device))
  assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (2, 3)] and len(DataLoader((X, Y), batch_size=4)) == 3
  assert all(isinstance(t, Tensor) and t.device == device for b in batches for t in b)
  np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), X)
  assert batches[0][1].dtype is alloy.int64
  dropped = list(DataLoader((X, Y), batch_size=4, drop_last=True))
  assert len(dropped) == 2 == len(DataLoader((X, Y), batch_size=4, drop_last=True))
  single = list(DataLoader(X, batch_size=5))
  assert len(single) == 2 and isinstance(single[0], Tensor) and single[0].shape == (5, 3)

def test_seeded_shuffle_repeats_and_covers():
  def epoch_order(loader): return np.concatenate([y.numpy() for _, y in loader])
  a, b = DataLoader((X, Y), batch_size=3, shuffle=True, seed=5), DataLoader((X, Y), batch_size=3, shuffle=True, seed=5)
  first, again = epoch_order(a), epoch_order(b)
  np.testing.assert_array_equal(first, again)
  assert sorted(first) == list(range(10)) and list(first) != list(range(10))
  second = epoch_order(a)
  assert sorted(second) == list(range(10)) and list(second) != list(first), "each epoch draws a new order"
  gen = np.random.default_rng(5)
  np.testing.assert_array_equal(epoch_order(DataLoader((X, Y), batch_size=3, shuffle=True, generator=gen)), first)
  for xb, yb in DataLoader((X, Y), batch_size=3, shuffle=True, seed=1):   # rows stay paired
    np.testing.assert_array_equal(xb.numpy(), X[yb.numpy()])

def test_indexable_dataset_and_collation(device):
  batches = list(DataLoader(Squares(7), batch_size=3, device=device))
  assert len(batches) == 3
  x, y = batches[1]
  np.testing.assert_array_equal(x.numpy(), np.array([[3], [4], [5]], np.float32))
  np.testing.assert_array_equal(y.numpy(), [9, 16, 25])
  assert x.device == device
  d = default_collate([{"a": np.ones(2, np.float32), "b": (1, 2.5)}, {"a": np.zeros(2, np.float32), "b": (3, 4.5)}])
  assert d["a"].shape == (2, 2) and d["b"][0].numpy().tolist() == [1, 3] and d["b"][1].dtype is alloy.float32
  assert list(DataLoader(Squares(3), batch_size=2, collate_fn=lambda s: len(s))) == [2, 1]
  unbatched = list(DataLoader(Squares(2), batch_size=None))
  assert len(unbatched) == 2 and unbatched[1][1].item() == 1

def test_tensor_dataset():
  ds = TensorDataset(Tensor(X), Y)
  assert len(ds) == 10 and ds[2][1] == 2
  with pytest.raises(ValueError, match="same first dimension"): TensorDataset(X, Y[:5])
  with pytest.raises(ValueError, match="at least one tensor"): TensorDataset()

def test_errors():
  with pytest.raises(ValueError, match="batch_size must be a positive int"): DataLoader(X, batch_size=0)
  with pytest.raises(TypeError, match="must be indexable and have a length"): DataLoader(iter([1, 2]))
  with pytest.raises(TypeError, match="numpy.random.Generator"): DataLoader(X, generator=3)
  class Mixed:
    def __len__(self): return 2
    def __getitem__(self, i): return "text" if i else 1.0
  with pytest.raises(TypeError, match="cannot batch samples of mixed or non-numeric types"): list(DataLoader(Mixed(), batch_size=2))
  with pytest.raises(ValueError, match="same number of fields"): default_collate([(1, 2), (3,)])
