"""The CUDA toolkit outside NVRTC: where the CUDA headers are (cuda_fp16.h, cuda_bf16.h), where a binary utility
(cuobjdump, nvdisasm) is, and SASS disassembly of a cubin for DEBUG=6. All optional: each returns None when absent."""
from __future__ import annotations
import functools, glob, os, shutil, subprocess, sys, tempfile

@functools.lru_cache(None)
def cuda_include_dir() -> str | None:
  """The folder holding cuda_fp16.h / cuda_bf16.h: from the nvidia wheels (nvidia-cuda-runtime), CUDA_HOME, or /usr/local/cuda."""
  try:
    from cuda import pathfinder
    if (d := pathfinder.find_nvidia_header_directory("cudart")) and os.path.exists(os.path.join(d, "cuda_fp16.h")): return d
  except Exception: pass
  candidates = []
  for p in sys.path:
    candidates += sorted(glob.glob(os.path.join(p, "nvidia", "cu1*", "include")), reverse=True)
    candidates.append(os.path.join(p, "nvidia", "cuda_runtime", "include"))
  for env in ("CUDA_HOME", "CUDA_PATH"):
    if os.environ.get(env): candidates.append(os.path.join(os.environ[env], "include"))
  candidates.append("/usr/local/cuda/include")
  for d in candidates:
    if os.path.exists(os.path.join(d, "cuda_fp16.h")): return d
  return None

def find_cuda_tool(name: str) -> str | None:
  """Path of a CUDA binary utility (cuobjdump, nvdisasm), or None."""
  if (p := shutil.which(name)): return p
  for env in ("CUDA_HOME", "CUDA_PATH"):
    if os.environ.get(env) and os.path.exists(p := os.path.join(os.environ[env], "bin", name)): return p
  if os.path.exists(p := f"/usr/local/cuda/bin/{name}"): return p
  try:
    from cuda import pathfinder
    return pathfinder.find_nvidia_binary_utility(name)
  except Exception: return None

def disassemble(cubin: bytes) -> str | None:
  """SASS of a cubin through cuobjdump (or nvdisasm), or None when neither tool is installed."""
  with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(cubin)
    f.flush()
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
      if (path := find_cuda_tool(tool)) is None: continue
      try: out = subprocess.run([path, *args, f.name], capture_output=True, text=True, timeout=60)
      except (OSError, subprocess.SubprocessError): continue
      if out.returncode == 0: return out.stdout
  return None
