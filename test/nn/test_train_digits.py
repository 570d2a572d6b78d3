"""examples/train_digits.py's model trains on every present device: a few AdamW steps on scikit-learn's digits make
the loss fall (the full run's accuracy is the example's own figure: python examples/train_digits.py)."""
import importlib.util, pathlib, sys
import numpy as np, pytest
import alloy
from alloy import optim
from alloy.data import DataLoader

pytest.importorskip("sklearn")
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"

def _example():
  spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
  mod = importlib.util.module_from_spec(spec)
  sys.modules.setdefault("train_digits", mod)
  spec.loader.exec_module(mod)
  return mod

def test_loss_falls(device):
  ex = _example()
  import alloy.nn.functional as F
  alloy.manual_seed(0)
  x, y, _, _ = ex.digits(0)
  model = ex.DigitsCNN(width=8).to(device)
  opt = optim.AdamW(model.parameters(), lr=1e-2)
  losses = []
  for xb, yb in (DataLoader((x[:512], y[:512]), batch_size=64, shuffle=True, seed=0, device=device)):
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(loss.item())
  assert len(losses) == 8 and np.isfinite(losses).all()
  assert np.mean(losses[-3:]) < 0.7 * np.mean(losses[:2]), losses
