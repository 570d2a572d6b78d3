"""The trace recorder: every kernel launch and host stage as a Chrome trace-event JSON that Perfetto opens.

`with alloy.trace("out.json"): ...` or `TRACE=out.json python script.py`. While recording, every launch waits for
its kernel and reports the device-measured time (so the kernels run one at a time, each in a command buffer of its
own: this is a profile, not a production run), and jitted functions replay launch by launch so each kernel has its
own slice. With kernel_times=False (TRACE_KERNEL_TIMES=0) launches do not wait: command buffers fill as in a
production run, and a kernel's slice is its host submit time.

Tracks: one per device (kernel slices: name, target, global/local size, vector widths, applied opts, FLOPs, bytes,
source; around them one slice per command buffer its encoder committed: dispatches, barriers, kernels) and one for
the host (schedule, lower, render, compile, load, submit).
`python -m alloy.trace out.json` prints a table per kernel.
"""
from __future__ import annotations
import atexit, json, os, threading, time
from alloy.helpers import getenv
from alloy.engine.watch import Watcher, watchers

PID = 1
HOST_TRACK = "host"

class TraceRecorder(Watcher):
  """Collects events between start() and stop() (a watcher of stages, launches and commits); save() writes them."""
  def __init__(self, path: str, kernel_times: bool = True):
    self.path, self.kernel_times = path, kernel_times
    self.device_time = kernel_times   # every launch waits and reports its device time
    self.events: list[dict] = []
    self.kernels: dict[str, list] = {}   # device -> its kernel slices, in launch order
    self.command_buffers: list = []      # the CommandBufferRecords committed while recording
    self.tracks: dict[str, int] = {}
    self.t0 = time.perf_counter()
    self.lock = threading.Lock()

  def _tid(self, track: str) -> int:
    if (tid := self.tracks.get(track)) is None:
      tid = self.tracks[track] = len(self.tracks) + 1
      self.events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": track}})
    return tid

  def _slice(self, track: str, name: str, cat: str, start: float, seconds: float, args: dict) -> dict:
    with self.lock:
      self.events.append(event := {"name": name, "cat": cat, "ph": "X", "pid": PID, "tid": self._tid(track),
                                   "ts": (start - self.t0) * 1e6, "dur": max(seconds, 0.0) * 1e6, "args": args})
    return event

  def stage(self, stage: str, start: float, seconds: float, detail: str) -> None:
    self._slice(HOST_TRACK, stage, "host", start, seconds, {"detail": detail} if detail else {})

  def launch(self, ck, buffers, elapsed, t_submit, consts=()) -> None:
    m = ck.meta
    end = time.perf_counter()
    seconds = elapsed if elapsed is not None else t_submit
    args = {"name": m.name, "target": m.target, "global_size": list(m.global_size), "local_size": list(m.local_size),
            "vector_widths": list(m.vector_widths), "opts": [list(o) if isinstance(o, tuple) else o for o in m.opts],
            "flops": m.flops, "bytes": m.bytes, "device_time_measured": elapsed is not None,
            "buffers": [f"{b.dtype.name}[{b.size}]" for b in buffers], "source": ck.source}
    device = buffers[0].device if buffers else "device"
    event = self._slice(device, m.name, "kernel", end - seconds, seconds, args)
    with self.lock: self.kernels.setdefault(device, []).append(event)

  def commit(self, record) -> None:
    with self.lock: self.command_buffers.append(record)

  def command_buffer_slices(self) -> list[dict]:
    """One slice per committed command buffer, around the slices of its kernels: a record's kernels are the next
    slices of its device's kernels by name (launches that are not dispatches, a graph replay's, are skipped)."""
    out, next_kernel = [], {}
    for rec in self.command_buffers:
      slices, i = [], next_kernel.get(rec.device, 0)
      kernels = self.kernels.get(rec.device, [])
      for name in rec.kernels:
        while i < len(kernels) and kernels[i]["name"] != name: i += 1
        if i < len(kernels): slices.append(kernels[i])
        i += 1
      next_kernel[rec.device] = min(i, len(kernels))
      start = min([(rec.opened - self.t0) * 1e6] + [k["ts"] for k in slices])
      end = max([(rec.committed - self.t0) * 1e6] + [k["ts"] + k["dur"] for k in slices])
      out.append({"name": "command buffer", "cat": "command_buffer", "ph": "X", "pid": PID, "tid": self._tid(rec.device), "ts": start,
                  "dur": end - start, "args": {"dispatches": rec.dispatches, "barriers": rec.barriers, "kernels": rec.kernels}})
    return out

  def start(self) -> "TraceRecorder":
    self.t0 = time.perf_counter()
    watchers.attach(self)
    return self

  def stop(self) -> None: watchers.detach(self)

  def save(self) -> str:
    if os.path.dirname(self.path): os.makedirs(os.path.dirname(self.path), exist_ok=True)
    with open(self.path, "w") as f:
      json.dump({"traceEvents": [{"name": "process_name", "ph": "M", "pid": PID, "args": {"name": "alloy"}}] + self.events +
                 self.command_buffer_slices(), "displayTimeUnit": "ns"}, f)
    return self.path

class trace:
  """Context manager: `with alloy.trace("out.json") as rec:` records everything launched inside into out.json;
  kernel_times=False lets launches batch into command buffers as they do unrecorded (kernel slices are then host times)."""
  def __init__(self, path: str, kernel_times: bool = True): self.recorder = TraceRecorder(path, kernel_times)
  def __enter__(self) -> TraceRecorder: return self.recorder.start()
  def __exit__(self, *exc) -> None:
    self.recorder.stop()
    self.recorder.save()

def _trace_whole_process(path: str) -> None:
  recorder = TraceRecorder(path, bool(getenv("TRACE_KERNEL_TIMES", 1))).start()
  def finish():
    recorder.stop()
    recorder.save()
  atexit.register(finish)

if (_path := getenv("TRACE", "")): _trace_whole_process(_path)

# ---- reading a trace back

def kernel_table(path: str) -> list[dict]:
  """Per kernel name: launches, total device seconds, share of all kernel time, GB/s, GFLOP/s."""
  with open(path) as f: events = json.load(f)["traceEvents"]
  rows: dict[str, dict] = {}
  for e in events:
    if e.get("ph") != "X" or e.get("cat") != "kernel": continue
    r = rows.setdefault(e["name"], {"kernel": e["name"], "count": 0, "seconds": 0.0, "bytes": 0, "flops": 0})
    r["count"] += 1
    r["seconds"] += e["dur"] * 1e-6
    r["bytes"] += e["args"].get("bytes", 0)
    r["flops"] += e["args"].get("flops", 0)
  total = sum(r["seconds"] for r in rows.values()) or 1.0
  for r in rows.values():
    r["share"] = r["seconds"] / total
    r["gbs"] = r["bytes"] / r["seconds"] / 1e9 if r["seconds"] else 0.0
    r["gflops"] = r["flops"] / r["seconds"] / 1e9 if r["seconds"] else 0.0
  return sorted(rows.values(), key=lambda r: -r["seconds"])

def format_table(rows: list[dict]) -> str:
  head = f"{'kernel':32s} {'count':>7s} {'total us':>12s} {'share':>7s} {'GB/s':>9s} {'GFLOP/s':>9s}"
  lines = [head, "-" * len(head)]
  for r in rows:
    lines.append(f"{r['kernel'][:32]:32s} {r['count']:7d} {r['seconds'] * 1e6:12.1f} {r['share'] * 100:6.1f}% {r['gbs']:9.2f} {r['gflops']:9.2f}")
  lines.append(f"{len(rows)} kernels, {sum(r['count'] for r in rows)} launches, {sum(r['seconds'] for r in rows) * 1e6:.1f} us of kernel time")
  return "\n".join(lines)
