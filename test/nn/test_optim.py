"""alloy.optim against torch.optim: the same parameters, data and loss, several steps, trajectories equal to float64
and float32 tolerances, on every present device; a step is a few kernels (chunks of parameters, not one kernel per
parameter); a learning-rate schedule and Adam's step count compile nothing after the first steps; the errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor, optim
from alloy.engine import compiled
from alloy.engine.watch import OnLaunch, watchers
from alloy.optim.optimizer import PARAMS_PER_KERNEL
from conftest import assert_close

torch = pytest.importorskip("torch")

SHAPES = [(5, 4), (5,), (3, 5), (3,)]

def _weights(): return [np.random.default_rng(7 + i).standard_normal(s) for i, s in enumerate(SHAPES)]

def _loss(lib, ps, x):
  h = (x @ ps[0].T + ps[1]).tanh()
  return ((h @ ps[2].T + ps[3]) ** 2).sum()

CONFIGS = [
  ("SGD", dict(lr=0.05)),
  ("SGD", dict(lr=0.05, momentum=0.9)),
  ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
  ("SGD", dict(lr=0.005, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)),   # ascent: a small lr keeps it bounded
  ("Adam", dict(lr=0.02)),
  ("Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)),
  ("Adam", dict(lr=0.02, amsgrad=True)),
  ("AdamW", dict(lr=0.02)),
  ("AdamW", dict(lr=0.02, weight_decay=0.1, amsgrad=True, maximize=True)),
  ("RMSprop", dict(lr=0.01)),
  ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.05, momentum=0.8, centered=True)),
  ("RMSprop", dict(lr=0.002, momentum=0.5, maximize=True)),
  ("Adagrad", dict(lr=0.1)),
  ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.02, initial_accumulator_value=0.1, eps=1e-6)),
  ("Adamax", dict(lr=0.02)),
  ("Adamax", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05, maximize=True)),
  ("RAdam", dict(lr=0.02)),   # rho_t passes 5 at the 6th step: both of its updates run
  ("RAdam", dict(lr=0.02, betas=(0.5, 0.9), weight_decay=0.05, decoupled_weight_decay=True)),
  ("NAdam", dict(lr=0.02)),
  ("NAdam", dict(lr=0.02, betas=(0.8, 0.99), momentum_decay=0.05, weight_decay=0.05, maximize=True)),
  ("NAdam", dict(lr=0.02, weight_decay=0.1, decoupled_weight_decay=True)),
]

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{'-'.join(k for k in kw if k != 'lr') or 'plain'}" for n, kw in CONFIGS])
def test_trajectory_matches_torch(device, dtype, name, kw):
  if dtype == "float64" and device == "METAL": pytest.skip("Metal has no float64")
  ws = _weights()
  x = np.random.default_rng(3).standard_normal((6, 4)).astype(dtype)
  ap = [Tensor(w.astype(dtype), device=device, requires_grad=True) for w in ws]
  tp = [torch.tensor(w.astype(dtype), requires_grad=True) for w in ws]
  ao, to = getattr(optim, name)(ap, **kw), getattr(torch.optim, name)(tp, **kw)
  xa, xt = Tensor(x, device=device), torch.tensor(x)
  for _ in range(6):
    ao.zero_grad(); to.zero_grad()
    _loss(alloy, ap, xa).backward(); _loss(torch, tp, xt).backward()
    ao.step(); to.step()
  tol = dict(atol=1e-10, rtol=1e-10) if dtype == "float64" else dict(atol=2e-5, rtol=2e-5)
  def close(got, want):   # float32: a small entry's error scales with its tensor's largest (a momentum buffer: ~7 after 6 steps)
    assert_close(got, want, **(tol if dtype == "float64" else dict(atol=2e-5 * max(1.0, float(np.abs(want).max())), rtol=2e-5)))
  for a, t in zip(ap, tp): close(a.numpy(), t.detach().numpy())
  for a, t in zip(ap, tp):   # the state too: torch's names and values
    for k, v in to.state[t].items():
      if k != "step": close(np.asarray(ao.state[a][k].numpy() if k not in ao.host_state else ao.state[a][k]), v.numpy())
    assert ao.state[a]["step"] == 6

def _count_launches(fn):
  launches = []
  with watchers.watching(OnLaunch(lambda *a: launches.append(a))): fn()
  return len(launches)

def test_a_step_is_a_few_kernels_and_a_schedule_compiles_nothing(device):
  n = 2 * PARAMS_PER_KERNEL + 3   # three chunks
  ps = [Tensor(np.full((4, 3), i + 1.0, np.float32), device=device, requires_grad=True) for i in range(n)]
  opt = optim.AdamW(ps, lr=0.01)
  sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50, eta_min=1e-4)
  def step():
    for i, p in enumerate(ps): p.grad = Tensor(np.full((4, 3), 0.1 * (i + 1), np.float32), device=device)
    opt.step()
    sched.step()
  for _ in range(3): step()
  before = compiled.compiles
  launches = _count_launches(step)
  for _ in range(20): step()
  assert compiled.compiles == before, "a new learning rate or step count compiled a kernel"
  # per chunk: the parameters, exp_avg and exp_avg_sq (plus the gradients' own copies to the device)
  assert launches <= 3 * 3 + n, f"{launches} launches for {n} parameters"
  assert ps[0].grad is not None and opt.state[ps[0]]["step"] == 24

def test_step_keeps_parameter_objects_and_skips_those_without_grad():
  a, b = Tensor(np.ones(3, np.float32), requires_grad=True), Tensor(np.ones(2, np.float32), requires_grad=True)
  opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
  a.grad = Tensor(np.ones(3, np.float32))
  opt.step()
  assert_close(a.numpy(), np.full(3, 0.9, np.float32))
  assert_close(b.numpy(), np.ones(2, np.float32)) and b not in opt.state
  assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0
  b.grad = Tensor(np.ones(2, np.float32))
  opt.step()
  assert_close(b.numpy(), np.full(2, 0.5, np.float32))
  assert a.requires_grad and a.is_leaf

def test_closure_returns_the_loss():
  w = Tensor(np.array([2.0, -1.0], np.float32), requires_grad=True)
  opt = optim.SGD([w], lr=0.25)
  def closure():
    opt.zero_grad()
    loss = (w * w).sum()
    loss.backward()
    return loss
  assert opt.step(closure).item() == 5.0
  assert_close(w.numpy(), np.array([1.0, -0.5], np.float32))

def test_errors():
  w = Tensor(np.ones(2, np.float32), requires_grad=True)
  with pytest.raises(ValueError, match="empty parameter list"): optim.SGD([], lr=0.1)
  with pytest.raises(TypeError, match="got a Tensor"): optim.SGD(w, lr=0.1)
  with pytest.raises(ValueError, match="does not require grad"): optim.Adam([Tensor(np.ones(2, np.float32))])
  with pytest.raises(ValueError, match="non-leaf"): optim.Adam([w * 2])
  with pytest.raises(ValueError, match="more than one parameter group"): optim.Adam([{"params": [w]}, {"params": [w]}])
  with pytest.raises(ValueError, match="Invalid learning rate"): optim.SGD([w], lr=-1)
  with pytest.raises(ValueError, match="Invalid beta parameter at index 1"): optim.Adam([w], betas=(0.9, 1.0))
  with pytest.raises(ValueError, match="Invalid momentum_decay value: -0.1"): optim.NAdam([w], momentum_decay=-0.1)
  with pytest.raises(ValueError, match="Nesterov momentum requires"): optim.SGD([w], lr=0.1, nesterov=True)
  with pytest.raises(TypeError, match="only optimize Tensors"): optim.SGD([np.ones(2)], lr=0.1)

def test_large_parameters_alone_and_values_changed_between_steps(device):
  """A parameter past ALONE_FROM is its own chunk; a value given between steps (load_state_dict) is read, not last
  step's vector."""
  from alloy.optim.optimizer import ALONE_FROM
  rng = np.random.default_rng(4)
  ws = [rng.standard_normal(ALONE_FROM + 5).astype(np.float32), rng.standard_normal(7).astype(np.float32), rng.standard_normal(3).astype(np.float32)]
  ap = [Tensor(w, device=device, requires_grad=True) for w in ws]
  tp = [torch.tensor(w, requires_grad=True) for w in ws]
  ao, to = optim.Adam(ap, lr=0.01), torch.optim.Adam(tp, lr=0.01)
  for i in range(4):
    if i == 2:
      fresh = rng.standard_normal(7).astype(np.float32)
      with alloy.no_grad(): ap[1].copy_(Tensor(fresh, device=device))
      with torch.no_grad(): tp[1].copy_(torch.tensor(fresh))
    for p, q in zip(ap, tp):
      g = np.cos(np.arange(p.numel(), dtype=np.float32) * (i + 1))
      p.grad, q.grad = Tensor(g, device=device), torch.tensor(g)
    ao.step(); to.step()
  for a, t in zip(ap, tp): assert_close(a.numpy(), t.detach().numpy(), atol=2e-5, rtol=2e-5)

def test_state_dict_resumes_and_loads_torch_state():
  ws = _weights()
  x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
  def run(steps, opt=None, ps=None):
    ps = ps or [Tensor(w.astype(np.float32), requires_grad=True) for w in ws]
    opt = opt or optim.AdamW(ps, lr=0.02)
    for _ in range(steps):
      opt.zero_grad(); _loss(alloy, ps, Tensor(x)).backward(); opt.step()
    return ps, opt
  straight, _ = run(5)
  ps, opt = run(2)
  saved = opt.state_dict()
  assert saved["param_groups"][0]["params"] == [0, 1, 2, 3] and saved["state"][0]["step"] == 2
  fresh = [Tensor(p.numpy(), requires_grad=True) for p in ps]
  resumed = optim.AdamW(fresh, lr=0.5)
  resumed.load_state_dict(saved)
  assert resumed.param_groups[0]["lr"] == 0.02
  run(3, resumed, fresh)
  for a, b in zip(fresh, straight): assert_close(a.numpy(), b.numpy())
  # torch's state dict loads too: its tensors convert, and the trajectories go on together
  tp = [torch.tensor(w.astype(np.float32), requires_grad=True) for w in ws]
  to = torch.optim.AdamW(tp, lr=0.02)
  for _ in range(2):
    to.zero_grad(); _loss(torch, tp, torch.tensor(x)).backward(); to.step()
  ap = [Tensor(t.detach().numpy(), requires_grad=True) for t in tp]
  ao = optim.AdamW(ap, lr=0.02)
  ao.load_state_dict(to.state_dict())
  for _ in range(3):
    to.zero_grad(); _loss(torch, tp, torch.tensor(x)).backward(); to.step()
  run(3, ao, ap)
  for a, t in zip(ap, tp): assert_close(a.numpy(), t.detach().numpy(), atol=2e-5, rtol=2e-5)
  with pytest.raises(ValueError, match="do not match"): optim.AdamW(ap[:2]).load_state_dict(saved)

def test_nadam_resumes_from_torchs_state_dict():
  # its host-side mu_product comes from torch's tensor, and the trajectories go on together to the last bit
  ws, x = _weights(), np.random.default_rng(4).standard_normal((6, 4))
  tp = [torch.tensor(w, requires_grad=True) for w in ws]
  to = torch.optim.NAdam(tp, lr=0.02, momentum_decay=0.05)
  def torch_steps(n):
    for _ in range(n):
      to.zero_grad(); _loss(torch, tp, torch.tensor(x)).backward(); to.step()
  torch_steps(2)
  ap = [Tensor(t.detach().numpy(), requires_grad=True) for t in tp]
  ao = optim.NAdam(ap, lr=0.02, momentum_decay=0.05)
  ao.load_state_dict(to.state_dict())
  assert ao.state[ap[0]]["mu_product"] == to.state[tp[0]]["mu_product"].item()
  torch_steps(3)
  for _ in range(3):
    ao.zero_grad(); _loss(alloy, ap, Tensor(x)).backward(); ao.step()
  for a, t in zip(ap, tp): assert_close(a.numpy(), t.detach().numpy(), atol=1e-12, rtol=1e-12)
