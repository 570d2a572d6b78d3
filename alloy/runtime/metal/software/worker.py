"""Software Metal worker process: executes command buffers sent by the host, in order.

Run as a script (``python -S -E worker.py RUNTIME_SO DATA_FD FDS_FD STATUS_FD NTHREADS STACK_KB``);
imports only the standard library. A crash inside a kernel (SIGFPE, SIGSEGV, ...) kills only this
process; the host reads the kernel's name from the shared status page and starts a new worker.

Protocol (DATA_FD, a stream socket): 4-byte little-endian length + pickle, both directions.
  host -> worker: ("run", seq, n_fd_packets, frees, new_psos, items)
  worker -> host: ("done", seq, error_or_None, gpu_start, gpu_end)
Buffer file descriptors arrive on FDS_FD (a seqpacket socket) as packets of pickled
[(buffer_id, size), ...] with the descriptors attached.
"""
import ctypes, mmap, os, pickle, socket, struct, sys, time

PROT_READ, PROT_WRITE, MAP_SHARED = 1, 2, 1
MAX_BINDINGS = 31

class Launch(ctypes.Structure):
  _fields_ = [("entry", ctypes.c_void_p), ("tls_touch", ctypes.c_void_p), ("dl_handle", ctypes.c_void_p),
              ("groups", ctypes.c_uint32 * 3), ("tg", ctypes.c_uint32 * 3), ("grid", ctypes.c_uint32 * 3),
              ("nonuniform", ctypes.c_uint32), ("fiber", ctypes.c_uint32), ("order", ctypes.c_uint32),
              ("poison", ctypes.c_uint32), ("strict", ctypes.c_uint32), ("pad_", ctypes.c_uint32),
              ("seed", ctypes.c_uint64), ("bufs", ctypes.c_void_p * (MAX_BINDINGS + 1))]

def recv_exact(sock, n):
  buf = bytearray(n)
  view = memoryview(buf)
  got = 0
  while got < n:
    k = sock.recv_into(view[got:], n - got)
    if k == 0: return None
    got += k
  return buf

def recv_msg(sock):
  head = recv_exact(sock, 4)
  if head is None: return None
  body = recv_exact(sock, struct.unpack("<I", head)[0])
  return None if body is None else pickle.loads(body)

def send_msg(sock, obj):
  body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  sock.sendall(struct.pack("<I", len(body)) + body)

class Worker:
  def __init__(self, rt_path, data_fd, fds_fd, status_fd, nthreads, stack_kb):
    self.data = socket.socket(fileno=data_fd)
    self.fds = socket.socket(fileno=fds_fd)
    self.status = mmap.mmap(status_fd, 4096)
    self.libc = ctypes.CDLL(None, use_errno=True)
    self.libc.mmap.restype = ctypes.c_void_p
    self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    self.rt = ctypes.CDLL(rt_path)
    self.rt.mtl_launch.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    self.rt.mtl_runtime_init(nthreads, stack_kb)
    self.bufs = {}  # id -> (address, size)
    self.psos = {}  # id -> (entry, touch, handle, fiber)
    self.libs = {}  # path -> CDLL
    self.err = ctypes.create_string_buffer(2048)
  def map_buffers(self, npackets):
    for _ in range(npackets):
      msg, fds, _, _ = socket.recv_fds(self.fds, 1 << 20, 255)
      if not msg: raise ConnectionResetError("the host closed the buffer socket")
      for (bid, size), fd in zip(pickle.loads(msg), fds):
        addr = self.libc.mmap(None, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
          raise OSError(ctypes.get_errno(), f"mmap of buffer {bid} ({size} bytes) failed")
        self.bufs[bid] = (addr, size)
      for fd in fds: os.close(fd)
  def add_pso(self, pid, path, name, fiber):
    lib = self.libs.get(path)
    if lib is None: lib = self.libs[path] = ctypes.CDLL(path)
    entry = ctypes.cast(getattr(lib, "mtl_entry_" + name), ctypes.c_void_p).value
    touch = ctypes.cast(lib.mtl_tls_touch, ctypes.c_void_p).value
    self.psos[pid] = (entry, touch, lib._handle, fiber)
  def set_status(self, seq, index, name):
    nb = name.encode()[:2000]
    self.status[16:16 + len(nb)] = nb
    struct.pack_into("<QII", self.status, 0, seq, index, len(nb))
  def dispatch(self, item):
    (_, name, pid, groups, tg, grid, nonuniform, bindings, order, poison, strict, seed) = item
    entry, touch, handle, fiber = self.psos[pid]
    L = Launch()
    L.entry, L.tls_touch, L.dl_handle = entry, touch, handle
    L.groups[:] = groups
    L.tg[:] = tg
    L.grid[:] = grid
    L.nonuniform, L.fiber, L.order, L.poison, L.strict, L.seed = nonuniform, fiber, order, poison, strict, seed
    keep = []
    for idx, kind, a, b in bindings:
      if kind == 0:
        L.bufs[idx] = self.bufs[a][0] + b
      elif kind == 1:
        cbuf = ctypes.create_string_buffer(bytes(a), max(len(a), 16))
        keep.append(cbuf)
        L.bufs[idx] = ctypes.addressof(cbuf)
    if self.rt.mtl_launch(ctypes.byref(L), self.err, len(self.err)) != 0:
      return f"kernel '{name}': {self.err.value.decode(errors='replace')}"
    return None
  def run(self, seq, items):
    for i, item in enumerate(items):
      kind = item[0]
      if kind == "dispatch":
        self.set_status(seq, i, item[1])
        err = self.dispatch(item)
        if err: return err
      elif kind == "copy":
        _, src, soff, dst, doff, n = item
        ctypes.memmove(self.bufs[dst][0] + doff, self.bufs[src][0] + soff, n)
      elif kind == "fill":
        _, dst, off, n, value = item
        ctypes.memset(self.bufs[dst][0] + off, value, n)
    return None
  def serve(self):
    """Runs messages until the host closes its end: at its exit (or shutdown) work may still be queued here, and its
    socket may be closed with completions unread (a reset), so a vanished host is the normal end, not an error."""
    try:
      while (msg := recv_msg(self.data)) is not None: self.handle(msg)
    except (BrokenPipeError, ConnectionResetError): pass
  def handle(self, msg):
    _, seq, npackets, frees, new_psos, items = msg
    for bid in frees:
      addr, size = self.bufs.pop(bid)
      self.libc.munmap(addr, size)
    self.map_buffers(npackets)
    err = None
    try:
      for p in new_psos: self.add_pso(*p)
    except (OSError, AttributeError) as e:
      err = f"loading kernel object failed: {e}"
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    if err is None: err = self.run(seq, items)
    t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
    self.set_status(0, 0, "")
    send_msg(self.data, ("done", seq, err, t0, t1))

def main(argv):
  rt_path, data_fd, fds_fd, status_fd, nthreads, stack_kb = argv[1:7]
  Worker(rt_path, int(data_fd), int(fds_fd), int(status_fd), int(nthreads), int(stack_kb)).serve()

if __name__ == "__main__":
  main(sys.argv)
