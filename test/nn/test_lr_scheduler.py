"""lr_scheduler against torch.optim.lr_scheduler: the same learning rates, step for step, to the last bit (the same
recursive formulas), for several parameter groups; and the errors."""
import numpy as np, pytest
from alloy import Tensor, optim

torch = pytest.importorskip("torch")

CASES = [
  ("StepLR", dict(step_size=3, gamma=0.5)),
  ("StepLR", dict(step_size=1, gamma=0.9)),
  ("CosineAnnealingLR", dict(T_max=10)),
  ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),   # past T_max it rises again, as torch's does
  ("LinearLR", dict()),
  ("LinearLR", dict(start_factor=0.1, end_factor=0.8, total_iters=6)),
  ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.5)),
  ("ExponentialLR", dict(gamma=0.93)),
  ("ConstantLR", dict()),
  ("ConstantLR", dict(factor=0.25, total_iters=7)),
  ("PolynomialLR", dict(total_iters=8, power=2.0)),
  ("LambdaLR", dict(lr_lambda=lambda e: 0.95 ** e + 0.01 * (e % 3))),
  ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9 if e % 2 else 0.99)),
  ("CosineAnnealingWarmRestarts", dict(T_0=4)),
  ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.001)),
]

def _optimizers(lrs=(0.1, 0.03)):
  """alloy's and torch's SGD over one parameter group per lr."""
  mine = [Tensor(np.ones(2, np.float32), requires_grad=True) for _ in lrs]
  theirs = [torch.ones(2, requires_grad=True) for _ in lrs]
  return (optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(mine, lrs)], lr=1.0),
          torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(theirs, lrs)], lr=1.0))

def _same_steps(a_opt, t_opt, a_s, t_s, steps: int = 25):
  """Both schedules give the same lrs, to the last bit, at the start and after every step."""
  assert a_s.get_last_lr() == t_s.get_last_lr()
  for _ in range(steps):
    t_opt.step(); a_opt.step()
    a_s.step(); t_s.step()
    assert a_s.get_last_lr() == t_s.get_last_lr()
    assert [g["lr"] for g in a_opt.param_groups] == [g["lr"] for g in t_opt.param_groups]

@pytest.mark.parametrize("name,kw", CASES)
def test_schedule_matches_torch(name, kw):
  a_opt, t_opt = _optimizers()
  _same_steps(a_opt, t_opt, getattr(optim.lr_scheduler, name)(a_opt, **kw), getattr(torch.optim.lr_scheduler, name)(t_opt, **kw))

def test_scheduler_errors():
  opt = optim.SGD([Tensor(np.ones(1, np.float32), requires_grad=True)], lr=0.1)
  with pytest.raises(ValueError, match="step_size must be a positive int"): optim.lr_scheduler.StepLR(opt, 0)
  with pytest.raises(ValueError, match="T_max must be positive"): optim.lr_scheduler.CosineAnnealingLR(opt, 0)
  with pytest.raises(ValueError, match=r"start_factor must be in \(0, 1\]"): optim.lr_scheduler.LinearLR(opt, start_factor=0)
  with pytest.raises(TypeError, match="is not an Optimizer"): optim.lr_scheduler.StepLR(object(), 2)
  with pytest.raises(KeyError, match="initial_lr"): optim.lr_scheduler.StepLR(opt, 2, last_epoch=3)

def test_state_dict_resumes():
  opt = optim.SGD([Tensor(np.ones(1, np.float32), requires_grad=True)], lr=0.1)
  s = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
  for _ in range(3): s.step()
  saved, lr = s.state_dict(), opt.param_groups[0]["lr"]
  s2 = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
  s2.load_state_dict(saved)
  opt.param_groups[0]["lr"] = lr
  s.step(); want = opt.param_groups[0]["lr"]
  opt.param_groups[0]["lr"] = lr
  s2.step()
  assert opt.param_groups[0]["lr"] == want

def test_reduce_on_plateau_matches_torch():
  losses = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
  for kw in (dict(patience=2), dict(mode="max", factor=0.5, patience=1, threshold=0.01, threshold_mode="abs", cooldown=2, min_lr=[0.02, 0.001])):
    mine = [Tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2)]
    theirs = [torch.ones(2, requires_grad=True) for _ in range(2)]
    a_opt = optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(mine, (0.1, 0.03))], lr=1.0)
    t_opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(theirs, (0.1, 0.03))], lr=1.0)
    a_s, t_s = optim.lr_scheduler.ReduceLROnPlateau(a_opt, **kw), torch.optim.lr_scheduler.ReduceLROnPlateau(t_opt, **kw)
    for loss in losses:
      a_s.step(Tensor(np.float32(loss))); t_s.step(loss)
      assert [g["lr"] for g in a_opt.param_groups] == [g["lr"] for g in t_opt.param_groups], kw
  with pytest.raises(ValueError, match="factor should be < 1.0"): optim.lr_scheduler.ReduceLROnPlateau(a_opt, factor=1.5)

@pytest.mark.parametrize("opt_name,kw", [("SGD", dict(max_lr=0.5, total_steps=20)),
                                         ("Adam", dict(max_lr=[0.1, 0.2], epochs=3, steps_per_epoch=8, anneal_strategy="linear")),
                                         ("AdamW", dict(max_lr=0.05, total_steps=25, three_phase=True, pct_start=0.25, div_factor=10))])
def test_one_cycle_matches_torch(opt_name, kw):
  mine = [Tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2)]
  theirs = [torch.ones(2, requires_grad=True) for _ in range(2)]
  extra = {"momentum": 0.9} if opt_name == "SGD" else {}
  a_opt = getattr(optim, opt_name)([{"params": [p]} for p in mine], lr=1.0, **extra)
  t_opt = getattr(torch.optim, opt_name)([{"params": [p]} for p in theirs], lr=1.0, **extra)
  a_s, t_s = optim.lr_scheduler.OneCycleLR(a_opt, **kw), torch.optim.lr_scheduler.OneCycleLR(t_opt, **kw)
  total = kw.get("total_steps") or kw["epochs"] * kw["steps_per_epoch"]
  for _ in range(total):
    assert a_s.get_last_lr() == t_s.get_last_lr()
    key = "betas" if opt_name != "SGD" else "momentum"
    assert [g[key] for g in a_opt.param_groups] == [tuple(g[key]) if key == "betas" else g[key] for g in t_opt.param_groups]
    t_opt.step(); a_opt.step()
    a_s.step(); t_s.step()
  with pytest.raises(ValueError, match="more than total_steps"): a_s.step()   # as torch's, past total_steps

@pytest.mark.filterwarnings("ignore::UserWarning")   # torch's SequentialLR calls step(0), which it deprecates
@pytest.mark.parametrize("parts", [
  [("LinearLR", dict(start_factor=0.1, total_iters=5)), ("CosineAnnealingLR", dict(T_max=15, eta_min=0.001))],
  [("ConstantLR", dict(factor=0.5, total_iters=3)), ("ExponentialLR", dict(gamma=0.9)), ("StepLR", dict(step_size=2, gamma=0.5))],
  [("PolynomialLR", dict(total_iters=4, power=2.0)), ("MultiStepLR", dict(milestones=[2, 4], gamma=0.3))],
], ids=["warmup-cosine", "constant-exp-step", "poly-multistep"])
def test_sequential_matches_torch(parts):
  a_opt, t_opt = _optimizers()
  milestones = [5, 9][:len(parts) - 1]
  a_s = optim.lr_scheduler.SequentialLR(a_opt, [getattr(optim.lr_scheduler, n)(a_opt, **kw) for n, kw in parts], milestones)
  t_s = torch.optim.lr_scheduler.SequentialLR(t_opt, [getattr(torch.optim.lr_scheduler, n)(t_opt, **kw) for n, kw in parts], milestones)
  _same_steps(a_opt, t_opt, a_s, t_s)
