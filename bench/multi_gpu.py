"""Several devices: all-reduce bus bandwidth and a data-parallel MLP training step.

1. All-reduce of 256 MB (fp32 and bf16) through alloy's collectives (NCCL, enqueued on alloy's streams) beside
   torch.distributed with its NCCL backend, in the same run on the same GPUs. Bus bandwidth as nccl-tests defines
   it: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (so with one GPU busbw is 0 by definition and the
   figure that remains is algbw: one rank's all-reduce is a device-to-device copy out of place, nothing in place).
   alloy is timed out of place and in place; torch.distributed's all_reduce is in place. Each is the host time of
   `iters` back-to-back calls between two synchronizations of every device.
2. A data-parallel MLP step (alloy/data_parallel.py: forward, backward, gradients all-reduced, SGD) at 1 and N
   devices, as samples per second, with torch's eager step of the same MLP on one GPU beside it.

python bench/multi_gpu.py                              (every CUDA GPU present; says what it could not run)
python bench/multi_gpu.py --devices CPU:0,CPU:1 --mb 16   (the host collectives between CPU devices, no torch column)
"""
from __future__ import annotations
import argparse, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import alloy
from alloy import nn, optim
import alloy.nn.functional as F
from alloy.data_parallel import DataParallel
from alloy.realize_tensors import buffer_of
from alloy.runtime import collective
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import device_available

def gpu_count() -> int:
  if not device_available("CUDA"): return 0   # (alloy.runtime.cuda needs cuda-bindings to import)
  from alloy.runtime.cuda import device_count
  return device_count()

def sync(devices) -> None:
  for d in devices: alloy.get_device(d).synchronize()

def alloy_all_reduce(devices, nbytes: int, dtype, iters: int, in_place: bool) -> float:
  """Seconds per all-reduce of nbytes per device."""
  count = nbytes // dtype.itemsize
  ins = [buffer_of(alloy.ones(count, dtype=dtype, device=d).contiguous()) for d in devices]
  outs = ins if in_place else [Buffer(b.device, b.size, b.dtype) for b in ins]
  for _ in range(2): collective.all_reduce(ins, outs, "sum")   # communicators, first use
  sync(devices)
  start = time.perf_counter()
  for _ in range(iters): collective.all_reduce(ins, outs, "sum")
  sync(devices)
  return (time.perf_counter() - start) / iters

def _torch_rank(rank: int, n: int, nbytes: int, dtype_names: list, iters: int, path: str, results) -> None:
  import torch, torch.distributed as dist
  torch.cuda.set_device(rank)
  dist.init_process_group("nccl", store=dist.FileStore(path, n), rank=rank, world_size=n)
  for name in dtype_names:
    dtype = getattr(torch, name)
    t = torch.ones(nbytes // dtype.itemsize, dtype=dtype, device=f"cuda:{rank}")
    for _ in range(2): dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters): dist.all_reduce(t)
    torch.cuda.synchronize()
    if rank == 0: results.put((name, (time.perf_counter() - start) / iters))
    del t
  dist.destroy_process_group()

def torch_all_reduce(n: int, nbytes: int, dtype_names: list, iters: int) -> dict:
  """{dtype name: seconds per in-place torch.distributed all_reduce (NCCL)}, one process per GPU as torch needs."""
  import tempfile, torch.multiprocessing as mp
  results = mp.get_context("spawn").Queue()
  with tempfile.TemporaryDirectory() as tmp:
    mp.start_processes(_torch_rank, args=(n, nbytes, dtype_names, iters, os.path.join(tmp, "store"), results), nprocs=n,
                       start_method="spawn")
  return dict(results.get() for _ in dtype_names)

def mlp(width: int, depth: int = 3) -> nn.Module:
  alloy.manual_seed(0)
  layers = []
  for _ in range(depth - 1): layers += [nn.Linear(width, width), nn.ReLU()]
  return nn.Sequential(*layers, nn.Linear(width, 16))

def alloy_dp_step(devices, batch: int, width: int, seconds: float = 2.0) -> float:
  """Samples per second of a data-parallel SGD step over `devices`, `batch` samples per device."""
  dp = DataParallel(mlp(width), devices)
  opts = [optim.SGD(r.parameters(), lr=1e-3) for r in dp.replicas]
  rng = np.random.default_rng(0)
  xb, yb = dp.scatter(rng.standard_normal((batch * len(devices), width)).astype(np.float32),
                      rng.standard_normal((batch * len(devices), 16)).astype(np.float32))
  def step():
    loss = dp.loss(F.mse_loss, dp(xb), yb)
    for o in opts: o.zero_grad()
    loss.backward()
    dp.reduce_gradients()
    for o in opts: o.step()
    return loss
  for _ in range(2): step().item()   # compiles
  sync(devices)
  n, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    step(); n += 1
  sync(devices)
  return n * batch * len(devices) / (time.perf_counter() - start)

def torch_step(batch: int, width: int, seconds: float = 2.0) -> float:
  import torch
  torch.manual_seed(0)
  layers = []
  for _ in range(2): layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
  model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 16)).cuda()
  opt = torch.optim.SGD(model.parameters(), lr=1e-3)
  x, y = torch.randn(batch, width, device="cuda"), torch.randn(batch, 16, device="cuda")
  def step():
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
  for _ in range(3): step()
  torch.cuda.synchronize()
  n, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    step(); n += 1
  torch.cuda.synchronize()
  return n * batch / (time.perf_counter() - start)

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--devices", default=None, help="CUDA:0,CUDA:1 or CPU:0,CPU:1 (default: every GPU, else CPU:0,CPU:1)")
  ap.add_argument("--mb", type=int, default=256, help="all-reduce size per device, MiB")
  ap.add_argument("--iters", type=int, default=20)
  ap.add_argument("--batch", type=int, default=4096, help="MLP samples per device per step")
  ap.add_argument("--width", type=int, default=2048, help="MLP width (3 layers)")
  ap.add_argument("--seconds", type=float, default=2.0, help="how long each training-step figure runs")
  a = ap.parse_args()
  gpus = gpu_count()
  devices = [d for d in a.devices.split(",") if d] if a.devices else [f"CUDA:{i}" for i in range(gpus)] or ["CPU:0", "CPU:1"]
  cuda = devices[0].upper().startswith("CUDA")
  n, nbytes = len(devices), a.mb << 20
  notes = []
  if cuda:
    from alloy.runtime.cuda import nccl
    try: print(f"devices: {', '.join(devices)} ({alloy.get_device(devices[0]).device_name}); NCCL {nccl.version()} from {nccl.library().path}")
    except RuntimeError as e: return print(f"devices: {', '.join(devices)}; nothing ran: {e}")
  else: print(f"devices: {', '.join(devices)} (host collectives)")
  if n < 2: notes.append(f"only {n} device: bus bandwidth is 0 by nccl-tests' formula (algbw remains); the all-reduce between "
                         f"2 or more GPUs and the N-GPU step did not run")
  try: import torch
  except ImportError: torch = None
  torch_ok = cuda and torch is not None and torch.cuda.is_available() and torch.distributed.is_nccl_available()
  if cuda and not torch_ok: notes.append("torch.distributed with NCCL is not available here: no torch column")
  print(f"\nall-reduce of {a.mb} MiB per device, {a.iters} calls; GB/s = 1e9 bytes/s")
  print(f"{'dtype':9} {'alloy out of place':>22} {'alloy in place':>18} {'torch (in place)':>18} {'alloy/torch busbw':>18}")
  factor = 2 * (n - 1) / n
  dtypes = ((alloy.float32, "float32"), (alloy.bfloat16, "bfloat16"))
  torch_times = torch_all_reduce(n, nbytes, [name for _, name in dtypes], a.iters) if torch_ok else {}
  for dtype, tname in dtypes:
    t_out = alloy_all_reduce(devices, nbytes, dtype, a.iters, False)
    t_in = alloy_all_reduce(devices, nbytes, dtype, a.iters, True)
    t_torch = torch_times.get(tname)
    fig = lambda t: "-" if t is None else f"{nbytes / t / 1e9:7.1f} alg {nbytes / t / 1e9 * factor:6.1f} bus"
    ratio = f"{t_torch / t_in:.2f}x (time)" if t_torch else "-"
    print(f"{tname:9} {fig(t_out):>22} {fig(t_in):>18} {fig(t_torch):>18} {ratio:>18}")
  print(f"\ndata-parallel MLP step (3 layers of {a.width}, {a.batch} samples per device, SGD), samples/s")
  counts = sorted({1, n})
  one = None
  for k in counts:
    rate = alloy_dp_step(devices[:k], a.batch, a.width, a.seconds)
    one = rate if k == 1 else one
    scale = f"  ({rate / one:.2f}x one device)" if k > 1 else ""
    print(f"  alloy on {k} device{'s' if k > 1 else ''}: {rate:12.0f}{scale}")
  if torch_ok: print(f"  torch eager, 1 GPU: {torch_step(a.batch, a.width, a.seconds):12.0f}   (its DDP over N GPUs is not run here)")
  for note in notes: print("note:", note)

if __name__ == "__main__": main()
