"""The host side of the software device: the worker subprocess (worker.py), the messages to it, and the bookkeeping of
committed command buffers (sent in commit order, completed in the same order, re-sent to a fresh worker after a crash).

Protocol (see worker.py): on the data socket, 4-byte little-endian length + pickle both ways; buffer memfds travel on a
second (seqpacket) socket the first time a command buffer uses them. The worker writes the kernel it is running to a
shared status page, so a crash can be blamed on the right command buffer.
"""
from __future__ import annotations
import atexit, collections, contextlib, itertools, mmap, os, pickle, select, signal, socket, struct, subprocess, sys, threading, time
from pathlib import Path
from typing import TYPE_CHECKING
from alloy.runtime.metal.software import compiler
from alloy.runtime.metal.software.errors import MetalError, MetalExecutionError, MetalKernelCrash, MetalKernelTimeout, MetalValidationError
from alloy.runtime.metal.software.options import OPTIONS
if TYPE_CHECKING: from alloy.runtime.metal.software.commands import CommandBuffer

WORKER_PY = Path(__file__).resolve().parent / "worker.py"
MAX_INFLIGHT = 64   # committed command buffers the worker may hold before a commit waits for completions

def send_msg(sock: socket.socket, obj) -> None:
  body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  sock.sendall(struct.pack("<I", len(body)) + body)

def recv_exact(sock: socket.socket, n: int):
  buf = bytearray(n)
  view, got = memoryview(buf), 0
  while got < n:
    try: k = sock.recv_into(view[got:], n - got)
    except ConnectionResetError: return None
    if k == 0: return None
    got += k
  return buf

def recv_msg(sock: socket.socket):
  head = recv_exact(sock, 4)
  if head is None: return None
  body = recv_exact(sock, struct.unpack("<I", head)[0])
  return None if body is None else pickle.loads(body)

def readable(sock: socket.socket, timeout: float) -> bool:
  """poll, not select: every buffer holds a memfd, so socket numbers can pass select's FD_SETSIZE (1024)."""
  p = select.poll()
  p.register(sock, select.POLLIN)
  return bool(p.poll(max(timeout, 0.0) * 1000))

class WorkerProcess:
  """One worker subprocess: its sockets, status page and what it has already been sent."""
  def __init__(self):
    rt = compiler.runtime_path()
    self.status_fd = os.memfd_create("alloy-mtl-status")
    os.ftruncate(self.status_fd, 4096)
    self.status = mmap.mmap(self.status_fd, 4096)
    self.data, child_data = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    self.fds, child_fds = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    nthreads = int(os.environ.get("ALLOY_METAL_SW_THREADS", "0") or 0) or (os.cpu_count() or 1)
    stack_kb = int(os.environ.get("ALLOY_METAL_SW_STACK_KB", "128"))
    passed = (child_data.fileno(), child_fds.fileno(), self.status_fd)
    self.proc = subprocess.Popen([sys.executable, "-S", "-E", str(WORKER_PY), rt, *map(str, passed), str(nthreads), str(stack_kb)],
                                 pass_fds=passed, stdin=subprocess.DEVNULL)
    child_data.close()
    child_fds.close()
    self.known_buffers: set[int] = set()
    self.known_pipelines: set[int] = set()
    self.frees: collections.deque = collections.deque()   # buffer ids to unmap; appended by any thread (a finaliser), drained by _send

  def crash_site(self) -> tuple[int, str]:
    seq, _, n = struct.unpack_from("<QII", self.status, 0)
    return seq, bytes(self.status[16:16 + min(n, 2000)]).decode(errors="replace")

  def close(self, kill: bool = False) -> int | None:
    for s in (self.data, self.fds):
      with contextlib.suppress(OSError): s.close()
    if kill and self.proc.poll() is None: self.proc.kill()
    try: rc = self.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      rc = self.proc.wait()
    with contextlib.suppress(OSError): os.close(self.status_fd)
    return rc

SIGNAL_HINTS = {"SIGFPE": " (integer division by zero or overflow?)", "SIGSEGV": " (out-of-bounds, misaligned or unbound-buffer access?)",
                "SIGBUS": " (misaligned or out-of-bounds access?)", "SIGILL": " (undefined behaviour trap?)"}

class Host:
  """Sends committed command buffers to the worker in order and collects their completions. Thread-safe: one lock
  around submitting, polling and waiting (a wait holds it while it reads completions)."""
  def __init__(self):
    self.lock = threading.RLock()
    self.worker: WorkerProcess | None = None
    self.inflight: collections.deque = collections.deque()
    self.seq = itertools.count(1)
    self.pid = os.getpid()
    self.victimless_deaths = 0

  def _worker(self) -> WorkerProcess:
    if self.pid != os.getpid():  # forked: the worker belongs to the parent process
      self.worker, self.inflight, self.pid = None, collections.deque(), os.getpid()
    if self.worker is None: self.worker = WorkerProcess()
    return self.worker

  def worker_pid(self) -> int | None: return None if self.worker is None else self.worker.proc.pid

  def buffer_freed(self, bid: int) -> None:
    """Called from a buffer's finaliser, in whatever thread collects it: takes no lock."""
    w = self.worker
    if w is not None and bid in w.known_buffers:
      w.known_buffers.discard(bid)
      w.frees.append(bid)

  def submit(self, cb: "CommandBuffer") -> None:
    with self.lock:
      self._poll()
      while len(self.inflight) >= MAX_INFLIGHT: self._read_one(None)
      cb._seq = next(self.seq)
      try: self._send(cb)
      except BaseException as e:   # not sent: the command buffer fails, the books stay as they were
        cb._finish(e if isinstance(e, MetalError) else MetalExecutionError(f"submitting the command buffer failed: {e!r}"), 0.0, 0.0)
        raise

  def _send(self, cb: "CommandBuffer") -> None:
    """Sends one command buffer and books it in flight; anything that can refuse it is checked before a byte is sent
    (a partial send would leave buffer packets the worker reads for the next command buffer)."""
    w = self._worker()
    buffers, pipelines = cb._resources()
    if (freed := next((b for b in buffers if b.finalized), None)) is not None:
      raise MetalValidationError(f"commit: the command buffer uses a buffer of {freed._length} bytes that was already freed")
    items = cb._wire_items()
    self.inflight.append(cb)
    try:
      new = [b for b in buffers if b._id not in w.known_buffers]
      packets = 0
      for i in range(0, len(new), 200):
        chunk = new[i:i + 200]
        socket.send_fds(w.fds, [pickle.dumps([(b._id, b._alloc) for b in chunk])], [b._fd for b in chunk])
        w.known_buffers.update(b._id for b in chunk)
        packets += 1
      new_psos = [(p._id, p._so_path, p._name, int(p._fiber)) for p in pipelines if p._id not in w.known_pipelines]
      w.known_pipelines.update(p[0] for p in new_psos)
      frees = [w.frees.popleft() for _ in range(len(w.frees))]
      send_msg(w.data, ("run", cb._seq, packets, frees, new_psos, items))
    except OSError:   # the worker died: a fresh one runs what is in flight, this command buffer included
      self._handle_death()
    except BaseException:   # sent in part if at all (an interrupt): the worker's stream is not to be trusted, a fresh one runs the rest
      self.inflight.remove(cb)
      self._handle_death()
      raise

  def _read_one(self, timeout: float | None) -> bool:
    """Reads one completion (or notices the worker's death). False when timeout passed first."""
    w = self.worker
    if w is None: return True
    if timeout is not None and not readable(w.data, timeout): return False
    msg = recv_msg(w.data)
    if msg is None:
      self._handle_death()
      return True
    self._complete(msg)
    return True

  def _complete(self, msg) -> None:
    _, seq, err, t0, t1 = msg
    cb = self.inflight.popleft()
    assert cb._seq == seq, f"software Metal: completion {seq} for command buffer {cb._seq}"
    self.victimless_deaths = 0
    cb._finish(MetalExecutionError(err) if err else None, t0, t1)

  def _poll(self) -> None:
    while self.worker is not None and self.inflight:
      if not readable(self.worker.data, 0.0): return
      self._read_one(None)

  def poll(self) -> None:
    with self.lock: self._poll()

  def wait(self, cb: "CommandBuffer") -> None:
    with self.lock:
      timeout = OPTIONS["timeout"] if cb._timeout is None else cb._timeout
      deadline = None if timeout is None else time.monotonic() + timeout
      while not cb._done:
        remaining = None if deadline is None else deadline - time.monotonic()
        if not self._read_one(remaining): self._handle_death(timeout=timeout)

  def _handle_death(self, timeout: float | None = None) -> None:
    w, self.worker = self.worker, None
    if w is None: return
    if timeout is not None: w.proc.kill()
    # completions the worker sent before dying are still in the socket
    with contextlib.suppress(OSError):
      w.data.setblocking(True)
      while self.inflight:
        msg = recv_msg(w.data)
        if msg is None: break
        self._complete(msg)
    seq, name = w.crash_site()
    rc = w.close(kill=True)
    pending = list(self.inflight)
    self.inflight.clear()
    victim = next((cb for cb in pending if cb._seq == seq), None) if seq else None
    if victim is None and pending:
      self.victimless_deaths += 1
      if self.victimless_deaths >= 3: victim = pending[0]
    if victim is not None:
      self.victimless_deaths = 0
      victim._finish(self._crash_error(name, rc, timeout), 0.0, 0.0)
    for cb in pending:  # later command buffers run again on a fresh worker
      if cb is not victim: self._send(cb)

  @staticmethod
  def _crash_error(name: str, rc: int | None, timeout: float | None) -> MetalKernelCrash:
    sig = signal.Signals(-rc).name if rc is not None and rc < 0 and -rc in signal.valid_signals() else None
    how = sig or f"exit code {rc}"
    if timeout is not None:
      what = f"kernel '{name}'" if name else "a command buffer"
      return MetalKernelTimeout(f"{what} did not finish within {timeout} s; the software Metal worker was "
                                f"killed (infinite loop or a lane spinning without a barrier?)", name, sig, rc)
    if name: return MetalKernelCrash(f"kernel '{name}' died with {how}{SIGNAL_HINTS.get(sig, '')}", name, sig, rc)
    return MetalKernelCrash(f"the software Metal worker died with {how} while executing a command buffer", None, sig, rc)

  def shutdown(self) -> None:
    with self.lock:
      w, self.worker = self.worker, None
      if w is not None and self.pid == os.getpid(): w.close()

HOST = Host()
atexit.register(HOST.shutdown)

def worker_pid() -> int | None:
  """Process id of the current worker subprocess (None before the first commit)."""
  return HOST.worker_pid()

def shutdown() -> None:
  """Stops the worker; the next commit starts a new one."""
  HOST.shutdown()
