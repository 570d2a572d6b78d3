"""The disk caches survive damage: a truncated or garbage file in them is reported (DEBUG=1), never loaded, and rebuilt;
an unusable cache folder gives one warning and a run without it; ALLOY_CACHE=0 writes nothing anywhere; no temporary
file outlives its process. Each scenario runs in a subprocess with its own cache folders and TMPDIR under tmp_path:
the suite's own cache stays untouched, and a crash (SIGBUS on a truncated binary) fails the test instead of pytest."""
import os, shutil, subprocess, sys, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ("CPU", "METAL")   # METAL is the software device here: it needs only g++
COMPUTE = """
import sys, numpy as np
from alloy import Tensor
for dev in sys.argv[1:]:
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=dev)
  print("value", dev, float((x * 2 + 1).sum().numpy()))
"""
BAD = "bad cache file"
WARNING = "RuntimeWarning: alloy: cache folder"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the software Metal device needs g++")

def run(tmp_path: Path, devices=DEVICES, code=COMPUTE, prefix=(), **env) -> subprocess.CompletedProcess:
  """COMPUTE (or code) in a fresh interpreter whose caches and TMPDIR lie under tmp_path; env values of None unset."""
  full = {k: v for k, v in os.environ.items() if not k.startswith("ALLOY_") and k not in ("DEBUG", "DEV")}
  full.update(XDG_CACHE_HOME=str(tmp_path / "cache"), ALLOY_METAL_SW_CACHE=str(tmp_path / "metal"), TMPDIR=str(tmp_path / "tmp"),
              PYTHONPATH=str(ROOT), DEBUG="0")
  full.update(env)
  full = {k: v for k, v in full.items() if v is not None}
  (tmp_path / "tmp").mkdir(exist_ok=True)
  return subprocess.run([*prefix, sys.executable, "-c", code, *devices], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300)

def ok(r: subprocess.CompletedProcess, devices=DEVICES) -> str:
  """The run's stdout and stderr, once it has exited cleanly with the right value on every device."""
  out = r.stdout + r.stderr
  assert r.returncode == 0, out
  for dev in devices: assert f"value {dev} 144.0" in r.stdout, out
  return out

def files(folder: Path) -> list[Path]: return sorted(p for p in folder.rglob("*") if p.is_file())

def leftovers(tmp_path: Path) -> list[str]:
  """Temporary files of alloy's anywhere under tmp_path, and whatever is in TMPDIR."""
  temps = [str(p) for p in tmp_path.rglob("*") if ".tmp" in p.name or p.name.startswith("build-")]
  return temps + [str(p) for p in (tmp_path / "tmp").iterdir()]

@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
  """Caches filled by one run on both devices: the compile entries, and the software Metal device's
  lib/, so/, runtime-*.so and pch-*/ files."""
  d = tmp_path_factory.mktemp("pristine")
  ok(run(d))
  return d

def copy_caches(src: Path, dst: Path) -> None:
  for name in ("cache", "metal"): shutil.copytree(src / name, dst / name)

def damage(path: Path, how: str) -> None:
  data = path.read_bytes()
  if how == "garbage": return path.write_bytes(os.urandom(len(data)))
  path.write_bytes(data[:{"empty": 0, "1 byte": 1, "half": len(data) // 2, "all but 1 byte": len(data) - 1}[how]])

@pytest.mark.parametrize("how", ["empty", "1 byte", "half", "all but 1 byte", "garbage"])
def test_damaged_cache_files_are_reported_and_rebuilt(tmp_path, pristine, how):
  copy_caches(pristine, tmp_path)
  damaged = files(tmp_path / "cache") + files(tmp_path / "metal")
  kinds = {(rel[2] if rel[0] == "cache" else rel[1].split("-")[0]) for rel in (p.relative_to(tmp_path).parts for p in damaged)}
  assert {"compile", "lib", "so", "runtime", "pch"} <= kinds, damaged
  for p in damaged: damage(p, how)
  out = ok(run(tmp_path, DEBUG="1"))
  missed = [str(p) for p in damaged if str(p) not in out]
  assert not missed, f"not reported as bad: {missed}\n{out}"
  from alloy.helpers import unpack_entry
  for p in files(tmp_path / "cache"): unpack_entry(p.read_bytes())   # rebuilt whole
  assert all(p.exists() for p in damaged if p.parent.name != "so"), out   # a rebuilt .so may hash to another name
  # again, with the kernels compiled anew through the precompiled header: nothing left is bad
  shutil.rmtree(tmp_path / "cache")
  shutil.rmtree(tmp_path / "metal" / "lib")
  out = ok(run(tmp_path, DEBUG="1"))
  assert BAD not in out and not leftovers(tmp_path), out

def read_only(folder: Path) -> list[str]:
  """A command prefix under which folder cannot be written: its mode where we are not root, else a read-only bind
  mount in a mount namespace of the command's own (root writes through any mode)."""
  folder.mkdir(parents=True, exist_ok=True)
  if os.geteuid() != 0:
    folder.chmod(0o555)
    return []
  prefix = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', str(folder)]
  if not shutil.which("unshare") or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
    pytest.skip("root, and no read-only bind mount (unshare -m) to make a folder read-only")
  return prefix

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("problem", ["read-only", "a file in its place"])
def test_unusable_cache_folder_warns_once(tmp_path, device, problem):
  folder = tmp_path / "cache" / "alloy" if device == "CPU" else tmp_path / "metal"
  prefix = []
  if problem == "read-only": prefix = read_only(folder)
  else:
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_bytes(b"not a folder")
  out = ok(run(tmp_path, [device], prefix=prefix), [device])
  warnings = [line for line in out.splitlines() if WARNING in line]
  assert len(warnings) == 1 and str(folder) in warnings[0], out
  if problem == "read-only": assert not any(folder.iterdir())
  else: assert folder.read_bytes() == b"not a folder"
  assert not leftovers(tmp_path), out

def test_cache_folders_deleted_mid_run(tmp_path):
  code = COMPUTE + """
import shutil, os
shutil.rmtree(os.environ["XDG_CACHE_HOME"]); shutil.rmtree(os.environ["ALLOY_METAL_SW_CACHE"])
for dev in sys.argv[1:]:
  x = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device=dev)
  print("again", dev, float((x * 3 - 1).sum().numpy()))
"""
  r = run(tmp_path, code=code)
  out = ok(r)
  assert "again CPU 186.0" in out and "again METAL 186.0" in out
  assert WARNING not in out and files(tmp_path / "cache") and files(tmp_path / "metal")

def test_cache_off_writes_nothing(tmp_path):
  out = ok(run(tmp_path, ALLOY_CACHE="0"))
  assert not (tmp_path / "cache").exists() and not (tmp_path / "metal").exists(), out
  assert not leftovers(tmp_path), out
  # the software Metal device's default folder too
  out = ok(run(tmp_path, ["METAL"], ALLOY_CACHE="0", ALLOY_METAL_SW_CACHE=None), ["METAL"])
  assert not (tmp_path / "cache").exists() and not leftovers(tmp_path), out

def test_failed_dlopen_leaves_no_file(tmp_path):
  code = COMPUTE + """
from alloy.runtime.registry import get_device
try: get_device("CPU").load("k", b"\\x7fELF, but no shared object")
except OSError as e: print("dlopen failed:", e)
"""
  out = ok(run(tmp_path, ["CPU"], code=code), ["CPU"])
  assert "dlopen failed" in out and not list((tmp_path / "tmp").iterdir()), out

def test_stale_temporary_files_are_removed(tmp_path):
  """A run killed mid-build leaves its temporary file; a later run never picks it up and, once the killed
  process is gone (and the file is old, see helpers.STALE_SECONDS), removes it."""
  cxx = tmp_path / "g++"   # g++, and for the runtime's build a kill of the Python that called it, as a Ctrl-\\ would
  cxx.write_text('#!/bin/sh\ng++ "$@" || exit $?\ncase "$*" in *runtime.cpp*) [ -n "$KILL_PARENT" ] && kill -9 $PPID;; esac\nexit 0\n')
  cxx.chmod(0o755)
  r = run(tmp_path, ["METAL"], ALLOY_METAL_SW_CXX=str(cxx), KILL_PARENT="1")
  assert r.returncode == -9, r.stdout + r.stderr
  stale = [p for p in files(tmp_path / "metal") if ".tmp" in p.name]
  assert stale, files(tmp_path / "metal")
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
  compile_dir = tmp_path / "cache" / "alloy" / "compile"
  compile_dir.mkdir(parents=True, exist_ok=True)
  stale += [compile_dir / ".tmp-abcd1234", compile_dir / f".tmp-{dead}-1-x"]   # this and earlier versions' names
  kept = [compile_dir / f".tmp-{dead}-1-new", compile_dir / f".tmp-{os.getpid()}-1-live"]   # too new; a live process's
  for p in stale[-2:] + kept: p.write_bytes(b"half")
  old = time.time() - 3600
  for p in stale + kept[1:]: os.utime(p, (old, old))
  out = ok(run(tmp_path, ["CPU", "METAL"], ALLOY_METAL_SW_CXX=str(cxx)))
  assert not [p for p in stale if p.exists()] and all(p.exists() for p in kept), out
