"""Timing a BEAM candidate on scratch buffers, in this process or in a child process that a crash cannot take down.

`time_kernel` runs one compiled kernel on scratch buffers and returns its device time and output. A GPU candidate
runs in the searching process (the software Metal device already runs kernels in a worker process of its own). A
CPU kernel runs in the caller's address space, so a candidate that crashes would kill the process: `ChildTimer`
runs them in a child Python (`serve`), a child that holds copies of the inputs; a crash or a timeout
costs that child, which is started again, and never the search. A child that outlives its search is kept (one) for
the next search of the process, which sends it new inputs.
"""
from __future__ import annotations
import os, pickle, select, struct, subprocess, sys, time
import numpy as np
from alloy.dtype import DTYPES
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device

POISON = 0x7f   # the output is filled with this byte before each candidate runs: a kernel that skips outputs shows

def scratch_buffers(device: str, arrays: list) -> list:
  """Fresh buffers holding copies of the inputs (dtype name, array): the user's own are never written."""
  return [Buffer(device, a.size, DTYPES[name]).copyin(a) for name, a in arrays]

_poisons: dict = {}
def _poison(nbytes: int) -> np.ndarray:
  """POISON bytes, made once per size (a big output is refilled for every candidate)."""
  if (p := _poisons.get(nbytes)) is None:
    _poisons.clear()
    p = _poisons[nbytes] = np.full(nbytes, POISON, np.uint8)
  return p

def time_kernel(device_name: str, inputs: list, out: tuple, kernel: tuple, scalars: tuple, repeats: int, slow_s: float) -> tuple:
  """(best device seconds, the output's bytes) of kernel = (name, binary, global_size, local_size) run on the input
  buffers and a fresh output of out = (dtype name, size). After the first run, repeats more, unless the first took
  over slow_s (a candidate far slower than the best needs no precise figure)."""
  device = get_device(device_name)
  name, binary, global_size, local_size = kernel
  output = Buffer(device_name, out[1], DTYPES[out[0]]).copyin(_poison(out[1] * DTYPES[out[0]].itemsize).view(DTYPES[out[0]].np))
  runner = device.load(name, binary)
  handles = [output.handle] + [b.handle for b in inputs]
  times = [runner(handles, scalars, global_size, local_size, wait=True)]
  if times[0] <= slow_s:
    times += [runner(handles, scalars, global_size, local_size, wait=True) for _ in range(repeats)]
  return min(times), output.numpy().tobytes()

# ---- the child process: messages are length-prefixed pickles on stdin / a private copy of stdout
_LEN = struct.Struct("<Q")

def _readable(f, seconds: float) -> bool:
  """Whether f has data within seconds. poll, not select: select refuses descriptors past 1023, which a long-running
  process reaches (the software Metal device's shared-memory buffers, the test suite's files)."""
  poller = select.poll()
  poller.register(f, select.POLLIN | select.POLLHUP)
  return bool(poller.poll(max(seconds, 0.0) * 1000))

def _send(f, obj) -> None:
  data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  f.write(_LEN.pack(len(data)) + data)
  f.flush()

def _read_exact(f, n: int) -> bytes | None:
  parts, got = [], 0
  while got < n:
    chunk = f.read(n - got)
    if not chunk: return None
    parts.append(chunk)
    got += len(chunk)
  return b"".join(parts)

def _recv(f):
  if (head := _read_exact(f, _LEN.size)) is None: return None
  return pickle.loads(_read_exact(f, _LEN.unpack(head)[0]))

def serve() -> None:
  """The child: ("setup", device, [(dtype name, array)], out) keeps scratch inputs; ("time", kernel, scalars, repeats,
  slow_s) answers ("ok", seconds, output bytes) or ("error", message)."""
  replies = os.fdopen(os.dup(1), "wb")
  os.dup2(2, 1)   # anything printed goes to stderr, never into the replies
  requests, inputs, device, out = sys.stdin.buffer, [], "CPU", None
  while (msg := _recv(requests)) is not None:
    try:
      if msg[0] == "setup":
        _, device, arrays, out = msg
        inputs = scratch_buffers(device, arrays)
        _send(replies, ("ok",))
      else:
        _, kernel, scalars, repeats, slow_s = msg
        _send(replies, ("ok",) + time_kernel(device, inputs, out, kernel, scalars, repeats, slow_s))
    except Exception as e: _send(replies, ("error", f"{type(e).__name__}: {e}"))

_idle: list = []   # a timing child kept between searches: its start (a Python importing alloy, about 1 s) is paid once

class ChildTimer:
  """Times kernels in a child process (see the module docstring); `time` returns (seconds, bytes) or raises
  CandidateFailed saying what happened to the child. A child that survives a search is kept for the next one."""
  def __init__(self, device: str, arrays: list, out: tuple):
    self.setup, self.proc = ("setup", device, arrays, out), None
  def _start(self) -> None:
    while _idle:
      self.proc = _idle.pop()
      if self.proc.poll() is not None: continue
      try: return self._ask(self.setup, timeout=120)
      except CandidateFailed:   # a new one instead
        if self.proc is not None: self.close_child()
    env = dict(os.environ, DEBUG="0", TRACE="")
    self.proc = subprocess.Popen([sys.executable, "-c", "from alloy.engine.search_worker import serve; serve()"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=env)
    self._ask(self.setup, timeout=120)
  def _ask(self, msg, timeout: float):
    try: _send(self.proc.stdin, msg)
    except (BrokenPipeError, OSError): pass   # it died: the read below says how
    deadline = time.monotonic() + timeout
    while True:
      left = deadline - time.monotonic()
      if left <= 0 or not _readable(self.proc.stdout, left):
        self.proc.kill()   # our own child, by its handle: a kernel stuck in a loop does not read its stdin
        self.proc.wait()
        self.proc = None
        raise CandidateFailed(f"timed out after {timeout:.1f} s")
      reply = _recv(self.proc.stdout)
      if reply is None:
        code = self.proc.wait()
        self.proc = None
        raise CandidateFailed(f"crashed the timing process ({'signal ' + str(-code) if code < 0 else 'exit ' + str(code)})")
      if reply[0] == "error": raise CandidateFailed(reply[1])
      return reply[1:]
  def time(self, kernel: tuple, scalars: tuple, repeats: int, slow_s: float, timeout: float) -> tuple:
    if self.proc is None: self._start()
    return self._ask(("time", kernel, scalars, repeats, slow_s), timeout)
  def close(self) -> None:
    if self.proc is None: return
    if not _idle:
      try:   # kept, without the scratch inputs
        self._ask(("setup", self.setup[1], [], self.setup[3]), timeout=10)
        proc, self.proc = self.proc, None
        _idle.append(proc)
        return
      except CandidateFailed:
        if self.proc is None: return
    self.close_child()
  def close_child(self) -> None:
    proc, self.proc = self.proc, None
    try: proc.stdin.close()
    except OSError: pass
    try: proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
      proc.kill()   # our own child, by its handle
      proc.wait()

class CandidateFailed(RuntimeError):
  """A candidate kernel did not run to completion: it crashed, timed out or raised."""

class InProcessTimer:
  """Times kernels here, on scratch copies of the inputs (GPU devices)."""
  def __init__(self, device: str, arrays: list, out: tuple):
    self.device, self.inputs, self.out = device, scratch_buffers(device, arrays), out
  def time(self, kernel: tuple, scalars: tuple, repeats: int, slow_s: float, timeout: float) -> tuple:
    try: return time_kernel(self.device, self.inputs, self.out, kernel, scalars, repeats, slow_s)
    except Exception as e: raise CandidateFailed(f"{type(e).__name__}: {e}") from e
  def close(self) -> None: self.inputs = []

