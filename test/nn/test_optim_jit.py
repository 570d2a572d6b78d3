"""optimizer.step() inside @alloy.jit: a whole training step (zero_grad, forward, backward, update) captured once and
replayed as device graphs, its parameter trajectory equal to the eager steps' (and to torch.optim's where torch is
installed), with a learning-rate schedule changing lr every step and Adam's step count moving, compiling nothing and
scheduling nothing after the capture."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn, optim, JitError
from alloy.engine import compiled, realize as engine
from alloy.jit import RECAPTURES_WARNED
from conftest import assert_close

STEPS = 7

def _weights():
  rng = np.random.default_rng(11)
  return [rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in ((16, 8), (16,), (4, 16), (4,))]

def _data():
  rng = np.random.default_rng(12)
  return [(rng.uniform(-1, 1, (10, 8)).astype(np.float32), rng.uniform(-1, 1, (10, 4)).astype(np.float32)) for _ in range(STEPS)]

def _model(device):
  m = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(device)
  with alloy.no_grad():
    for p, w in zip(m.parameters(), _weights()): p.copy_(Tensor(w, device=device))
  return m

OPTIMIZERS = [("AdamW", dict(lr=0.02, weight_decay=0.05)), ("Adam", dict(lr=0.02, amsgrad=True)),
              ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)), ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
              ("Adagrad", dict(lr=0.05, lr_decay=0.01)), ("Adamax", dict(lr=0.02)), ("RAdam", dict(lr=0.02, betas=(0.5, 0.9))),
              ("NAdam", dict(lr=0.02, momentum_decay=0.05))]

def _steps(device, name, kw, jitted: bool, monkeypatch=None, before=None, after=None, replays: bool = True):
  """STEPS training steps, eager or jitted (from the third call on, replays that schedule and compile nothing, where
  `replays`): before(k, opt) ahead of step k, after(k, model, opt, loss) behind it; the parameters after each step,
  the jitted step and the optimizer."""
  model = _model(device)
  opt = getattr(optim, name)(model.parameters(), **kw)
  def train_step(x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss
  step = alloy.jit(train_step) if jitted else train_step
  def boom(*a, **kw): raise AssertionError("a replay scheduled or compiled")
  trajectory = []
  for k, (x, y) in enumerate(_data()):
    if before: before(k, opt)
    xt, yt = Tensor(x, device=device), Tensor(y, device=device)
    if jitted and replays and k >= 2:   # from here on every call is a replay: nothing is scheduled or compiled
      assert step.replay is not None and step.replay.launches
      with monkeypatch.context() as m:
        m.setattr(engine, "run_schedule", boom)
        m.setattr(engine, "compile_kernel", boom)
        loss = step(xt, yt)
    else: loss = step(xt, yt)
    if after: after(k, model, opt, loss)
    trajectory.append([p.numpy().copy() for p in model.parameters()])
  return trajectory, step, opt

def _run(device, name, kw, jitted: bool, monkeypatch=None):
  """Per step the parameters after it and the loss; the lr falls every step (StepLR)."""
  losses, compiles, sched = [], [], []
  def before(k, opt):
    if k == 0: sched.append(optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.8))
    if k == 2: compiles.append(compiled.compiles)
  def after(k, model, opt, loss):
    losses.append(loss.item())
    sched[0].step()
  trajectory, step, opt = _steps(device, name, kw, jitted, monkeypatch, before, after)
  if jitted:
    assert compiled.compiles == compiles[0], "a replay compiled a kernel"
    assert any(g is not None for g, *_ in step.replay.graphs), step.replay.graph_off   # replayed as device graphs
  params = list(opt.param_groups[0]["params"])
  assert all(opt.state[p]["step"] == STEPS for p in params)
  assert all(p.grad is not None and p.is_leaf and p.requires_grad for p in params)
  return trajectory, losses, opt

def _torch_run(name, kw, changes=None):
  """torch.optim's trajectory: with StepLR, or with the group's hyper-parameters set to changes[k] before step k."""
  torch = pytest.importorskip("torch")
  model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
  with torch.no_grad():
    for p, w in zip(model.parameters(), _weights()): p.copy_(torch.tensor(w))
  opt = getattr(torch.optim, name)(model.parameters(), **kw)
  sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.8) if changes is None else None
  trajectory = []
  for k, (x, y) in enumerate(_data()):
    if changes is not None: opt.param_groups[0].update(changes.get(k, {}))
    opt.zero_grad()
    ((model(torch.tensor(x)) - torch.tensor(y)) ** 2).mean().backward()
    opt.step()
    if sched: sched.step()
    trajectory.append([p.detach().numpy().copy() for p in model.parameters()])
  return trajectory

@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_jitted_step_follows_the_eager_trajectory(device, name, kw, monkeypatch):
  eager, eager_losses, _ = _run(device, name, kw, jitted=False)
  jitted, jitted_losses, opt = _run(device, name, kw, jitted=True, monkeypatch=monkeypatch)
  assert_close(np.array(jitted_losses), np.array(eager_losses), rtol=1e-5, atol=1e-6)
  for a, b in zip(jitted, eager):
    for p, q in zip(a, b): assert_close(p, q, rtol=1e-5, atol=1e-6)
  if name != "SGD":   # the lr the last replays used is the scheduler's: a baked lr would leave the state as at capture
    assert abs(opt.param_groups[0]["lr"] - kw["lr"] * 0.8 ** STEPS) < 1e-12

@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_jitted_step_follows_torch(name, kw, monkeypatch):
  want = _torch_run(name, kw)
  got, _, _ = _run("CPU", name, kw, jitted=True, monkeypatch=monkeypatch)
  for a, b in zip(got, want):
    for p, q in zip(a, b): assert_close(p, q, rtol=2e-5, atol=2e-5)

def test_capturing_a_first_step_is_refused():
  w = Tensor(np.ones(3, np.float32), requires_grad=True)
  v = Tensor(np.ones(3, np.float32), requires_grad=True)
  opt = optim.Adam([w, v], lr=0.1)
  @alloy.jit
  def train_step(x, second: bool):
    opt.zero_grad()
    ((w * x).sum() + ((v * x).sum() if second else 0)).backward()
    opt.step()
  train_step(Tensor(np.ones(3, np.float32)), False)
  with pytest.raises(JitError, match="the first step of a parameter creates its state"): train_step(Tensor(np.ones(3, np.float32)), True)

ADAMW = dict(lr=0.02, weight_decay=0.05)

def test_host_reads_between_replays(device, tmp_path, monkeypatch):
  """Reading the parameters and the optimizer's state on the host (numpy(), state_dict(), alloy.save) between replays
  keeps their memory layout (slices of the update's vectors): training goes on replaying, on the eager trajectory."""
  eager, *_ = _steps(device, "AdamW", ADAMW, False)
  logged, models = [], []
  def read(k, model, opt, loss):
    if k < 2: return   # the capture sees the slices; from then on reads would copy them into buffers of their own
    logged.append([p.numpy().copy() for p in model.parameters()])
    logged[-1] += [v.numpy() for v in model.state_dict().values()]
    logged[-1] += [st[name].numpy() for st in opt.state_dict()["state"].values() for name in ("exp_avg", "exp_avg_sq")]
    print(model[0].weight, opt.state[model[0].weight]["exp_avg"])   # a log line reads them too
    alloy.save(model, tmp_path / f"step{k}.safetensors")
    models[:] = [model]
  jitted, *_ = _steps(device, "AdamW", ADAMW, True, monkeypatch, after=read)
  for a, b in zip(jitted, eager):
    for p, q in zip(a, b): assert_close(p, q, rtol=1e-5, atol=1e-6)
  for k, values in enumerate(logged, 2):
    for v, want in zip(values, jitted[k]): np.testing.assert_array_equal(v, want)   # what was read is what the step left
    saved = alloy.load(tmp_path / f"step{k}.safetensors")
    for name, want in zip(models[0].state_dict(), jitted[k]): np.testing.assert_array_equal(saved[name].numpy(), want)

def test_views_of_parameters_follow_jitted_steps(device, monkeypatch):
  """Views of the parameters made before the capture (a row, state_dict()'s detached tensors) show every step's
  values, as they do eagerly and in PyTorch."""
  views = {}
  def read(k, model, opt, loss):
    if k == 0: views.update(row=model[0].weight[3], cols=model[2].weight.T[1:], sd=model.state_dict())
    w0, w2 = model[0].weight.numpy(), model[2].weight.numpy()
    np.testing.assert_array_equal(views["row"].numpy(), w0[3])
    np.testing.assert_array_equal(views["cols"].numpy(), w2.T[1:])
    for v, p in zip(views["sd"].values(), model.parameters()): np.testing.assert_array_equal(v.numpy(), p.numpy())
  eager, *_ = _steps(device, "AdamW", ADAMW, False, after=read)
  views.clear()
  jitted, *_ = _steps(device, "AdamW", ADAMW, True, monkeypatch, after=read)
  for a, b in zip(jitted, eager):
    for p, q in zip(a, b): assert_close(p, q, rtol=1e-5, atol=1e-6)

# hyper-parameters set between calls, before the step of that index (from 2 on, every call is a replay)
CHANGES = [("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
            {2: dict(momentum=0.5), 3: dict(weight_decay=0.05, dampening=0.3), 5: dict(lr=0.02, momentum=0.95)}),
           ("Adam", dict(lr=0.02, weight_decay=0.01), {2: dict(betas=(0.8, 0.99)), 4: dict(eps=1e-3, weight_decay=0.1)}),
           ("AdamW", dict(lr=0.02, weight_decay=0.05), {3: dict(betas=(0.85, 0.95), weight_decay=0.2), 5: dict(eps=1e-2)})]

def _changing(device, name, kw, changes, jitted: bool, monkeypatch=None, replays: bool = True):
  """The parameters after each step with the group's hyper-parameters set to changes[k] before step k."""
  trajectory, step, _ = _steps(device, name, kw, jitted, monkeypatch, before=lambda k, opt: opt.param_groups[0].update(changes.get(k, {})),
                               replays=replays)
  return trajectory, step

@pytest.mark.parametrize("name,kw,changes", CHANGES, ids=[n for n, *_ in CHANGES])
def test_hyperparameters_changed_between_replays(device, name, kw, changes, monkeypatch):
  """Every number of a group is read again per replay: momentum, dampening, weight decay, betas and eps set between
  calls reach the replayed kernels, which compile nothing, as they reach the eager steps (and torch.optim's)."""
  eager, _ = _changing(device, name, kw, changes, jitted=False)
  jitted, _ = _changing(device, name, kw, changes, jitted=True, monkeypatch=monkeypatch)
  for a, b in zip(jitted, eager):
    for p, q in zip(a, b): assert_close(p, q, rtol=1e-5, atol=1e-6)
  if device == "CPU":
    for a, b in zip(jitted, _torch_run(name, kw, changes)):
      for p, q in zip(a, b): assert_close(p, q, rtol=2e-5, atol=2e-5)
  unchanged, _ = _changing(device, name, kw, {}, jitted=False)
  assert not np.allclose(unchanged[-1][0], eager[-1][0], rtol=1e-5, atol=1e-6)   # the changes do change the trajectory

# changes that make other kernels (momentum to or from 0, nesterov, maximize, amsgrad): the step is captured again
RECAPTURED = [("SGD", dict(lr=0.05, momentum=0.9), {2: dict(nesterov=True), 3: dict(nesterov=False, momentum=0.0, weight_decay=0.1),
                                                    5: dict(momentum=0.5, maximize=True)}),
              ("Adam", dict(lr=0.02), {2: dict(weight_decay=0.1), 3: dict(maximize=True), 5: dict(amsgrad=True)})]

@pytest.mark.parametrize("name,kw,changes", RECAPTURED, ids=[n for n, *_ in RECAPTURED])
def test_structural_changes_capture_again(device, name, kw, changes):
  eager, _ = _changing(device, name, kw, changes, jitted=False)
  jitted, step = _changing(device, name, kw, changes, jitted=True, replays=False)
  for a, b in zip(jitted, eager):
    for p, q in zip(a, b): assert_close(p, q, rtol=1e-5, atol=1e-6)
  assert step.replay is not None   # captured again after the last change

def test_loading_state_between_replays_captures_again(device):
  """A module's load_state_dict (parameters in buffers of their own), an optimizer's (new state tensors) and a lazy
  change of a parameter between calls: the next call runs the step normally and captures again, on the eager
  trajectory, where a replay would have read the old state or raised on the layout."""
  saved = {}
  def after(k, model, opt, loss):
    if k == 1:   # copies: state_dict()'s tensors are views (the parameters') or the state itself, which go on changing
      sd = opt.state_dict()
      saved.update(model={n: v * 1 for n, v in model.state_dict().items()},
                   opt={**sd, "state": {i: {n: v * 1 if isinstance(v, Tensor) else v for n, v in st.items()} for i, st in sd["state"].items()}})
    if k == 2: model.load_state_dict(saved["model"])   # the next call runs normally, the one after captures
    if k == 4:
      opt.load_state_dict(saved["opt"])
      with alloy.no_grad(): model[2].bias.add_(Tensor(np.full(4, 0.1, np.float32), device=device))
  eager, *_ = _steps(device, "AdamW", ADAMW, False, after=after)
  saved.clear()
  jitted, step, _ = _steps(device, "AdamW", ADAMW, True, after=after, replays=False)
  for a, b in zip(jitted, eager):
    for p, q in zip(a, b): assert_close(p, q, rtol=1e-5, atol=1e-6)
  assert step.replay is not None

def test_a_flag_changed_every_call_warns_once():
  """Changes that make other kernels on every call: each call after one runs normally (on the eager trajectory), and
  after RECAPTURES_WARNED of them one warning says the replays are lost."""
  def run(jitted):
    w = Tensor(np.linspace(-1, 1, 6).astype(np.float32), requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    def train_step(x):
      opt.zero_grad()
      ((w * x) ** 2).sum().backward()
      opt.step()
    step = alloy.jit(train_step) if jitted else train_step
    for k in range(3 * (RECAPTURES_WARNED + 1)):
      opt.param_groups[0]["nesterov"] = k % 6 >= 3   # three calls each way: a capture, then a replay that finds it changed
      step(Tensor(np.full(6, 0.5, np.float32)))
    return w.numpy()
  want = run(False)
  with pytest.warns(UserWarning, match="captured again 8 times") as caught: got = run(True)
  assert len([w for w in caught if "captured again" in str(w.message)]) == 1
  assert_close(got, want, rtol=1e-6, atol=1e-7)
